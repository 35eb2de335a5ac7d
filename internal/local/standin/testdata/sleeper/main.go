// Command sleeper is a Lambda function for the stand-in's own tests: it
// answers {"pid":…} after the event's "sleep" (a Go duration).
package main

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(ctx context.Context, in struct{ Sleep string }) (map[string]int, error) {
		if d, err := time.ParseDuration(in.Sleep); err == nil {
			time.Sleep(d)
		}
		return map[string]int{"pid": os.Getpid()}, nil
	})
}
