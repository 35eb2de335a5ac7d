package awsfailure_test

import (
	"fmt"
	"net/http"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/nudgehq/nudge/pkg/failure/awsfailure"
)

// apiError is what an AWS SDK call returns when the service answers status
// with the API error code: an operation error around the HTTP response
// error around the API error.
func apiError(status int, code string) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem", Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      &smithy.GenericAPIError{Code: code, Message: "the service's message"},
	}}
}

// Errors of AWS SDK calls go through awsfailure.Default, the consumer's
// chain: throttling and 5xx are retried with backoff, and so is any other
// API error (a denied permission or a missing table is an operator's to
// fix; dead-lettering the reminder would not help). IsThrottleCode answers
// for a bare error code, for code that reports throttling itself.
func Example() {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"throttled (400 ThrottlingException)", apiError(400, "ThrottlingException")},
		{"server error (500 InternalServerError)", apiError(500, "InternalServerError")},
		{"denied (400 AccessDeniedException)", apiError(400, "AccessDeniedException")},
	} {
		o := awsfailure.Default.Classify(c.err)
		fmt.Printf("%-39s %-6s %s\n", c.name, o.Kind, o.Class)
	}
	fmt.Println(awsfailure.IsThrottleCode("ProvisionedThroughputExceededException"), awsfailure.IsThrottleCode("ValidationException"))
	// Output:
	// throttled (400 ThrottlingException)     retry  throttled
	// server error (500 InternalServerError)  retry  server
	// denied (400 AccessDeniedException)      retry  aws
	// true false
}
