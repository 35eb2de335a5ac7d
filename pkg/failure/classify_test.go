package failure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/nudgehq/nudge/pkg/message"
)

type statusErr struct {
	code  int
	after time.Duration
}

func (e statusErr) Error() string             { return fmt.Sprintf("status %d", e.code) }
func (e statusErr) StatusCode() int           { return e.code }
func (e statusErr) RetryAfter() time.Duration { return e.after }
func awsStatus(code int, apiCode string) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem", Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}},
		Err:      &smithy.GenericAPIError{Code: apiCode, Message: "m"},
	}}
}

func TestDefaultChain(t *testing.T) {
	t.Parallel()
	_, decodeErr := message.Decode([]byte("nope"))
	cases := []struct {
		name string
		err  error
		want Outcome
	}{
		{"decided retry keeps its delay", Retryable(errors.New("x"), 7*time.Second), Outcome{KindRetry, ClassUnknown, 7 * time.Second}},
		{"decided permanent", Permanent(errors.New("bad recipient")), Outcome{KindPermanent, ClassRejected, 0}},
		{"decided ambiguous", Ambiguous(errors.New("conn reset after write")), Outcome{KindAmbiguous, ClassUnknown, 0}},
		{"class override", WithClass(Permanent(errors.New("x")), ClassConfig), Outcome{KindPermanent, ClassConfig, 0}},
		{"wrapped decided", fmt.Errorf("send: %w", Permanent(errors.New("x"))), Outcome{KindPermanent, ClassRejected, 0}},
		{"decode error", fmt.Errorf("record: %w", decodeErr), Outcome{KindPermanent, ClassDecode, 0}},
		{"provider 429 with Retry-After", statusErr{429, 30 * time.Second}, Outcome{KindRetry, ClassThrottled, 30 * time.Second}},
		{"provider 503", statusErr{503, 0}, Outcome{KindRetry, ClassServer, 0}},
		{"provider 500 with Retry-After", statusErr{500, time.Minute}, Outcome{KindRetry, ClassServer, time.Minute}},
		{"provider 408", statusErr{408, 0}, Outcome{KindRetry, ClassTimeout, 0}},
		{"provider 400", statusErr{400, 0}, Outcome{KindPermanent, ClassRejected, 0}},
		{"provider 404", statusErr{404, 0}, Outcome{KindPermanent, ClassRejected, 0}},
		{"aws throttling", awsStatus(400, "ThrottlingException"), Outcome{KindRetry, ClassThrottled, 0}},
		{"aws provisioned throughput", &types.ProvisionedThroughputExceededException{Message: new(string)}, Outcome{KindRetry, ClassThrottled, 0}},
		{"aws 500", awsStatus(500, "InternalServerError"), Outcome{KindRetry, ClassServer, 0}},
		{"aws missing table", awsStatus(400, "ResourceNotFoundException"), Outcome{KindRetry, ClassAWS, 0}},
		{"deadline", fmt.Errorf("send: %w", context.DeadlineExceeded), Outcome{KindAmbiguous, ClassTimeout, 0}},
		{"cancelled", context.Canceled, Outcome{KindAmbiguous, ClassTimeout, 0}},
		{"network", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, Outcome{KindAmbiguous, ClassNetwork, 0}},
		{"unknown", errors.New("what is this"), Outcome{KindRetry, ClassUnknown, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Default.Classify(tc.err); got != tc.want {
				t.Fatalf("Classify(%v) = %+v, want %+v", tc.err, got, tc.want)
			}
		})
	}
}

func TestChainFirstDefiniteAnswerWins(t *testing.T) {
	t.Parallel()
	var asked []string
	c := Chain{
		ClassifierFunc(func(error) (Outcome, bool) { asked = append(asked, "a"); return Outcome{}, false }),
		ClassifierFunc(func(error) (Outcome, bool) {
			asked = append(asked, "b")
			return Outcome{Kind: KindPermanent, Class: "b"}, true
		}),
		ClassifierFunc(func(error) (Outcome, bool) { asked = append(asked, "c"); return Outcome{}, true }),
	}
	if got := c.Classify(errors.New("x")); got.Class != "b" {
		t.Fatalf("got %+v", got)
	}
	if fmt.Sprint(asked) != "[a b]" {
		t.Fatalf("asked %v, want [a b]", asked)
	}
}

// TestIsThrottleCode: every code the AWS SDK counts as throttling, and every
// code the intake answered 503 for before it asked this package, is a
// throttle, and the AWS classifier answers it ClassThrottled; other codes
// are not.
func TestIsThrottleCode(t *testing.T) {
	t.Parallel()
	throttles := []string{
		// The intake's own list, before it asked IsThrottleCode.
		"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException", "LimitExceededException",
		// The rest of aws-sdk-go-v2's retry.DefaultThrottleErrorCodes.
		"Throttling", "ThrottledException", "RequestThrottledException", "TransactionInProgressException", "BandwidthLimitExceeded",
		"RequestThrottled", "SlowDown", "PriorRequestNotComplete", "EC2ThrottledException",
	}
	for _, code := range throttles {
		if !IsThrottleCode(code) {
			t.Errorf("IsThrottleCode(%q) = false; want true", code)
		}
		if got := Default.Classify(awsStatus(400, code)); got.Class != ClassThrottled {
			t.Errorf("%s is classified %+v; want class %s", code, got, ClassThrottled)
		}
	}
	for _, code := range []string{"ResourceNotFoundException", "ConditionalCheckFailedException", "AccessDeniedException", "throttlingexception", ""} {
		if IsThrottleCode(code) {
			t.Errorf("IsThrottleCode(%q) = true; want false", code)
		}
	}
}
