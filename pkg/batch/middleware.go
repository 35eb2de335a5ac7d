package batch

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/pkg/failure"
)

// Middleware wraps a Handler with work done around every record: the
// visibility heartbeat (heartbeat.Heartbeat.Middleware), tracing, timing.
// The Processor applies Config.Middleware in order, the first outermost,
// inside Recover, which it always applies.
type Middleware func(Handler) Handler

// Chain returns h wrapped by mw, mw[0] outermost.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// Recover turns a panic in the handler into the failure of that record
// alone (class panic), logged with its stack; the other records of the
// batch go on.
func Recover(log *slog.Logger) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, rec events.SQSMessage) (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = panicked(log, rec.MessageId, r)
				}
			}()
			return next.Handle(ctx, rec)
		})
	}
}

// panicked logs a recovered panic and returns the record's failure. Out of
// line, so that the deferred function every record runs stays small: a
// large frame there grows every record goroutine's stack (it tripled the
// processor's overhead per record).
//
//go:noinline
func panicked(log *slog.Logger, messageID string, r any) error {
	log.Error("handler panicked", "messageId", messageID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	return failure.WithClass(fmt.Errorf("handler panicked: %v", r), failure.ClassPanic)
}
