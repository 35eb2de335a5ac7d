package batch_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/local/batchtest"
	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/failure"
)

// A handler acknowledges a record by returning nil. Returning
// failure.Retryable(err, d) reports the record as failed and first sets its
// visibility to d, so it comes back after its own backoff. In a Lambda
// function, pass p.Process to lambda.Start and turn on
// ReportBatchItemFailures in the event source mapping.
func Example() {
	vis := &batchtest.Visibility{} // an *sqs.Client in production
	p, _ := batch.New(batch.HandlerFunc(func(ctx context.Context, rec events.SQSMessage) error {
		if rec.Body == "flaky" {
			return failure.Retryable(errors.New("provider answered 503"), 30*time.Second)
		}
		return nil
	}), batch.Config{Concurrency: 4, Visibility: vis})

	resp, _ := p.Process(context.Background(), batchtest.Event("ok", "flaky", "ok"))
	fmt.Println("failed:", resp.BatchItemFailures)
	fmt.Println("visibility of m1:", vis.Changes["h1"], "s")
	// Output:
	// failed: [{m1}]
	// visibility of m1: 30 s
}
