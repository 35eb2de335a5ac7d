package batch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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

// Middleware wraps the handling of every record: here one that
// acknowledges test messages without running the handler. The processor
// always puts Recover outermost, so a handler's panic fails its own
// record, with class panic, and the batch goes on. Run returns what became
// of each record, in the event's order; Process answers its Response.
func ExampleMiddleware() {
	skipTests := batch.Middleware(func(next batch.Handler) batch.Handler {
		return batch.HandlerFunc(func(ctx context.Context, rec events.SQSMessage) error {
			if strings.HasPrefix(rec.Body, "test:") {
				return nil
			}
			return next.Handle(ctx, rec)
		})
	})
	handler := batch.HandlerFunc(func(ctx context.Context, rec events.SQSMessage) error {
		if rec.Body == "boom" {
			panic("a bug")
		}
		return nil
	})
	p, _ := batch.New(handler, batch.Config{
		Middleware: []batch.Middleware{skipTests},
		Logger:     slog.New(slog.DiscardHandler), // Recover logs the panic with its stack here
	})

	report := p.Run(context.Background(), batchtest.Event("hello", "test:ping", "boom"))
	for _, r := range report.Results {
		var f *failure.Error
		if errors.As(r.Err, &f) {
			fmt.Printf("%s %s: %v (%s, class %s)\n", r.MessageID, r.Status, r.Err, f.Kind, f.Class)
			continue
		}
		fmt.Println(r.MessageID, r.Status)
	}
	fmt.Println("failed:", report.Response().BatchItemFailures)
	// Output:
	// m0 succeeded
	// m1 succeeded
	// m2 failed: handler panicked: a bug (retry, class panic)
	// failed: [{m2}]
}
