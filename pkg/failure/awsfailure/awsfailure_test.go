package awsfailure

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

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/failure"
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

// out is the outcome of kind and class after a delay.
func out(kind failure.Kind, class failure.Class, after time.Duration) failure.Outcome {
	return failure.Outcome{Kind: kind, Class: class, RetryAfter: after}
}

func TestDefaultChain(t *testing.T) {
	t.Parallel()
	_, decodeErr := message.Decode([]byte("nope"))
	cases := []struct {
		name string
		err  error
		want failure.Outcome
	}{
		{"decided retry keeps its delay", failure.Retryable(errors.New("x"), 7*time.Second), out(failure.KindRetry, failure.ClassUnknown, 7*time.Second)},
		{"decided permanent", failure.Permanent(errors.New("bad recipient")), out(failure.KindPermanent, failure.ClassRejected, 0)},
		{"decided ambiguous", failure.Ambiguous(errors.New("conn reset after write")), out(failure.KindAmbiguous, failure.ClassUnknown, 0)},
		{"class override", failure.WithClass(failure.Permanent(errors.New("x")), failure.ClassConfig), out(failure.KindPermanent, failure.ClassConfig, 0)},
		{"wrapped decided", fmt.Errorf("send: %w", failure.Permanent(errors.New("x"))), out(failure.KindPermanent, failure.ClassRejected, 0)},
		{"decode error", fmt.Errorf("record: %w", decodeErr), out(failure.KindPermanent, failure.ClassDecode, 0)},
		{"provider 429 with Retry-After", statusErr{429, 30 * time.Second}, out(failure.KindRetry, failure.ClassThrottled, 30*time.Second)},
		{"provider 503", statusErr{503, 0}, out(failure.KindRetry, failure.ClassServer, 0)},
		{"provider 500 with Retry-After", statusErr{500, time.Minute}, out(failure.KindRetry, failure.ClassServer, time.Minute)},
		{"provider 408", statusErr{408, 0}, out(failure.KindRetry, failure.ClassTimeout, 0)},
		{"provider 400", statusErr{400, 0}, out(failure.KindPermanent, failure.ClassRejected, 0)},
		{"provider 404", statusErr{404, 0}, out(failure.KindPermanent, failure.ClassRejected, 0)},
		{"aws throttling", awsStatus(400, "ThrottlingException"), out(failure.KindRetry, failure.ClassThrottled, 0)},
		{"aws provisioned throughput", &types.ProvisionedThroughputExceededException{Message: new(string)}, out(failure.KindRetry, failure.ClassThrottled, 0)},
		{"aws 500", awsStatus(500, "InternalServerError"), out(failure.KindRetry, failure.ClassServer, 0)},
		{"aws missing table", awsStatus(400, "ResourceNotFoundException"), out(failure.KindRetry, failure.ClassAWS, 0)},
		{"deadline", fmt.Errorf("send: %w", context.DeadlineExceeded), out(failure.KindAmbiguous, failure.ClassTimeout, 0)},
		{"cancelled", context.Canceled, out(failure.KindAmbiguous, failure.ClassTimeout, 0)},
		{"network", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, out(failure.KindAmbiguous, failure.ClassNetwork, 0)},
		{"unknown", errors.New("what is this"), out(failure.KindRetry, failure.ClassUnknown, 0)},
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

// TestIsThrottleCode: every code the AWS SDK counts as throttling, and every
// code the intake answered 503 for before it asked this package, is a
// throttle, and the AWS classifier answers it failure.ClassThrottled; other codes
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
		if got := Default.Classify(awsStatus(400, code)); got.Class != failure.ClassThrottled {
			t.Errorf("%s is classified %+v; want class %s", code, got, failure.ClassThrottled)
		}
	}
	for _, code := range []string{"ResourceNotFoundException", "ConditionalCheckFailedException", "AccessDeniedException", "throttlingexception", ""} {
		if IsThrottleCode(code) {
			t.Errorf("IsThrottleCode(%q) = true; want false", code)
		}
	}
}
