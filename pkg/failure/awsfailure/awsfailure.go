package awsfailure

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/nudgehq/nudge/pkg/failure"
)

// Default is the chain the consumer uses: decided outcomes first, then
// decode errors, provider HTTP statuses, AWS SDK errors, deadlines and
// network errors.
var Default = failure.Chain{failure.Decided, failure.Decode, failure.HTTPStatus, Classifier, failure.Context, failure.Network}

var (
	throttles  = retry.IsErrorThrottles(retry.DefaultThrottles)
	retryables = retry.IsErrorRetryables(retry.DefaultRetryables)
)

// IsThrottleCode reports whether code, an AWS API error code (a
// smithy.APIError's ErrorCode), says the service is throttling its caller.
// The codes are the AWS SDK's (retry.DefaultThrottleErrorCodes), the ones
// Classifier answers failure.ClassThrottled: among them DynamoDB's
// ProvisionedThroughputExceededException and RequestLimitExceeded, and
// ThrottlingException, TooManyRequestsException and LimitExceededException.
// Codes are case-sensitive. It is for code that answers throttling itself
// (the intake's 503) rather than through a Chain.
func IsThrottleCode(code string) bool {
	_, ok := retry.DefaultThrottleErrorCodes[code]
	return ok
}

// Classifier recognises AWS SDK errors: throttling and 5xx are retried, and so is
// any other API error (a missing table or a denied permission is fixed by an
// operator, not by dead-lettering the reminder).
var Classifier = failure.ClassifierFunc(func(err error) (failure.Outcome, bool) {
	if throttles.IsErrorThrottle(err) == aws.TrueTernary {
		return failure.Outcome{Kind: failure.KindRetry, Class: failure.ClassThrottled}, true
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
		return failure.Outcome{Kind: failure.KindRetry, Class: failure.ClassServer}, true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return failure.Outcome{Kind: failure.KindRetry, Class: failure.ClassAWS}, true
	}
	var op *smithy.OperationError
	if errors.As(err, &op) && !errors.Is(err, context.DeadlineExceeded) && retryables.IsErrorRetryable(err) == aws.TrueTernary {
		return failure.Outcome{Kind: failure.KindRetry, Class: failure.ClassNetwork}, true
	}
	return failure.Outcome{}, false
})
