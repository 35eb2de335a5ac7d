package heartbeat

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/pkg/batch"
)

// TestMiddlewareWatchesEachRecord: around a record with a receipt handle
// the heartbeat beats, and when a beat fails the handler's Watched context
// ends with ErrLost while its own context goes on (the bookkeeping after a
// send still runs); beats stop when the record ends; a record without a
// receipt handle is handed on as it is.
func TestMiddlewareWatchesEachRecord(t *testing.T) {
	h, f, clk := setup(t)
	f.fail = true
	handler := batch.Chain(batch.HandlerFunc(func(ctx context.Context, rec events.SQSMessage) error {
		if rec.ReceiptHandle == "" {
			if Watched(ctx) != ctx {
				t.Error("a record without a receipt handle is watched")
			}
			return nil
		}
		advance(t, clk, 20*time.Second) // the first beat, which fails
		<-f.beat
		select {
		case <-Watched(ctx).Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the watched context did not end when the beat failed")
		}
		if !errors.Is(context.Cause(Watched(ctx)), ErrLost) || ctx.Err() != nil {
			t.Errorf("watched: %v; record context: %v; want ErrLost, and the record's context alive", context.Cause(Watched(ctx)), ctx.Err())
		}
		return nil
	}), h.Middleware(func(events.SQSMessage) string { return "q" }))
	if err := handler.Handle(context.Background(), events.SQSMessage{MessageId: "m-1", ReceiptHandle: "rh"}); err != nil {
		t.Fatal(err)
	}
	if err := handler.Handle(context.Background(), events.SQSMessage{MessageId: "m-2"}); err != nil {
		t.Fatal(err)
	}
	if n := f.count(); n != 1 {
		t.Errorf("%d beats, want 1", n)
	}
}
