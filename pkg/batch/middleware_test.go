package batch_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/failure"
)

// TestMiddlewareWrapsEveryRecordInOrder: the first middleware is the
// outermost; Recover is outside them all, so a panic in a middleware fails
// its record alone, as one in the handler does.
func TestMiddlewareWrapsEveryRecordInOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var trace []string
	named := func(name string) batch.Middleware {
		return func(next batch.Handler) batch.Handler {
			return batch.HandlerFunc(func(ctx context.Context, rec events.SQSMessage) error {
				if name == "outer" && rec.MessageId == "boom-in-middleware" {
					panic("middleware bug")
				}
				mu.Lock()
				trace = append(trace, name+">"+rec.MessageId)
				mu.Unlock()
				return next.Handle(ctx, rec)
			})
		}
	}
	p := newProcessor(t, func(_ context.Context, rec events.SQSMessage) error {
		if rec.MessageId == "boom-in-handler" {
			panic("handler bug")
		}
		return nil
	}, batch.Config{Concurrency: 1, Middleware: []batch.Middleware{named("outer"), named("inner")}})
	rep := p.Run(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1"}, {MessageId: "boom-in-middleware"}, {MessageId: "boom-in-handler"}, {MessageId: "m-2"},
	}})
	if got := strings.Join(trace, " "); got != "outer>m-1 inner>m-1 outer>boom-in-handler inner>boom-in-handler outer>m-2 inner>m-2" {
		t.Errorf("trace %q", got)
	}
	if got := failedIDs(rep.Response()); strings.Join(got, ",") != "boom-in-middleware,boom-in-handler" {
		t.Errorf("failed %v; want the two panics alone", got)
	}
	for _, r := range rep.Results {
		var fe *failure.Error
		if r.Status == batch.Failed && (!errors.As(r.Err, &fe) || fe.Class != failure.ClassPanic) {
			t.Errorf("%s failed with %v, want class panic", r.MessageID, r.Err)
		}
	}
}
