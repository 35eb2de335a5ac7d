// Command echo is a function behind a function URL for the front's own
// tests: it answers what it was sent, with its process id and invocation
// id; /fail is a
// function error, /sleep takes 300 ms.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

func main() {
	lambda.Start(func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		switch ev.RawPath {
		case "/fail":
			return events.LambdaFunctionURLResponse{}, errors.New("echo: asked to fail")
		case "/sleep":
			time.Sleep(300 * time.Millisecond)
		}
		ev.Headers = nil // the caller knows them
		var invocation string
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			invocation = lc.AwsRequestID
		}
		b, err := json.Marshal(map[string]any{"pid": os.Getpid(), "invocation": invocation, "event": ev})
		if err != nil {
			return events.LambdaFunctionURLResponse{}, err
		}
		return events.LambdaFunctionURLResponse{
			StatusCode: 200,
			Headers:    map[string]string{"content-type": "application/json"},
			Cookies:    []string{"seen=1"},
			Body:       string(b),
		}, nil
	})
}
