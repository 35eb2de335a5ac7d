package heartbeat

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/pkg/batch"
)

// watchedKey carries a record's watched context.
type watchedKey struct{}

// Middleware runs the heartbeat around each record a batch.Processor
// hands on, from the record's start to its end, for records with a receipt
// handle; queueURL names the record's queue. The handler reads the
// context to stop when a beat fails with Watched: the context it passes to
// the work that must not outlive the message's invisibility (the
// provider's send), while the bookkeeping after it runs on.
func (h *Heartbeat) Middleware(queueURL func(events.SQSMessage) string) batch.Middleware {
	return func(next batch.Handler) batch.Handler {
		return batch.HandlerFunc(func(ctx context.Context, rec events.SQSMessage) error {
			if rec.ReceiptHandle == "" {
				return next.Handle(ctx, rec)
			}
			watched, stop := h.Start(ctx, queueURL(rec), rec.ReceiptHandle)
			defer stop()
			return next.Handle(context.WithValue(ctx, watchedKey{}, watched), rec)
		})
	}
}

// Watched returns the context the middleware cancels, with cause ErrLost,
// when the record's visibility could not be extended; ctx itself when no
// heartbeat runs.
func Watched(ctx context.Context) context.Context {
	if w, ok := ctx.Value(watchedKey{}).(context.Context); ok {
		return w
	}
	return ctx
}
