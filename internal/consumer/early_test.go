package consumer_test

// A record that arrives a moment before its due time (a delay rounded down
// to whole seconds, a clock a little ahead) is held in the consumer until
// due and then sent, instead of going back to the queue, where it would
// come back at least a second late; one too early, or one whose
// invocation has too little time left after the wait, is deferred.

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/provider"
)

// held is a consumer whose provider records when it was called.
type held struct {
	f      *fast
	sentAt chan time.Time
}

func newHeld(t *testing.T) *held {
	t.Helper()
	t.Parallel()
	h := &held{f: &fast{q: &captureSQS{}, clk: clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))}, sentAt: make(chan time.Time, 4)}
	h.f.l = mustMemory(h.f.clk)
	var err error
	h.f.c, err = consumer.New(consumer.Config{
		Ledger: h.f.l, Queue: h.f.q, QueueURL: "work", DLQURL: "dlq", Clock: h.f.clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SendTime: 5 * time.Second,
		Providers: map[string]provider.Provider{"webhook": provider.Func(func(context.Context, provider.Request, string) (provider.Receipt, error) {
			h.sentAt <- h.f.clk.Now()
			return provider.Receipt{ID: "r"}, nil
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *held) handle(ctx context.Context, id string, due time.Time) <-chan error {
	body, _ := message.Encode(message.Message{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: due})
	done := make(chan error, 1)
	go func() {
		done <- h.f.c.Handle(ctx, events.SQSMessage{MessageId: "m-" + id, ReceiptHandle: "h", Body: string(body),
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}()
	return done
}

func TestARecordAMomentEarlyIsHeldUntilDueThenSent(t *testing.T) {
	h := newHeld(t)
	due := h.f.clk.Now().Add(700 * time.Millisecond)
	h.f.seed(t, "rem-early", due)
	done := h.handle(context.Background(), "rem-early", due)
	if !h.f.clk.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("the record was not held")
	}
	select {
	case at := <-h.sentAt:
		t.Fatalf("sent at %v, before its due time %v", at, due)
	default:
	}
	h.f.clk.Advance(700 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if at := <-h.sentAt; !at.Equal(due) {
		t.Fatalf("sent at %v; want its due time %v", at, due)
	}
	if len(h.f.q.sent) != 0 {
		t.Fatalf("re-published %d messages; want none", len(h.f.q.sent))
	}
}

func TestARecordEarlierThanTheWaitIsDeferred(t *testing.T) {
	h := newHeld(t)
	due := h.f.clk.Now().Add(2500 * time.Millisecond) // EarlyWait is 2 s
	h.f.seed(t, "rem-early", due)
	if err := <-h.handle(context.Background(), "rem-early", due); err != nil {
		t.Fatal(err)
	}
	if len(h.f.q.sent) != 1 || h.f.q.sent[0].DelaySeconds != 2 || len(h.sentAt) != 0 {
		t.Fatalf("re-published %+v, sent %d; want one copy delayed 2 s (rounded down), nothing sent", h.f.q.sent, len(h.sentAt))
	}
}

// TestARecordNearTheCutOffIsDeferredNotHeld: with less than the wait plus
// the send's time left in the invocation, the record goes back (re-published
// for its due time) rather than being held into the deadline.
func TestARecordNearTheCutOffIsDeferredNotHeld(t *testing.T) {
	h := newHeld(t)
	due := h.f.clk.Now().Add(time.Second)
	h.f.seed(t, "rem-late-in-batch", due)
	// wall clock: the invocation's deadline is Lambda's; 5.5 s left, the
	// send needs 5 s after a 1 s wait.
	ctx, cancel := context.WithTimeout(context.Background(), 5500*time.Millisecond)
	defer cancel()
	if err := <-h.handle(ctx, "rem-late-in-batch", due); err != nil {
		t.Fatal(err)
	}
	if len(h.f.q.sent) != 1 || len(h.sentAt) != 0 || h.f.clk.Waiters() != 0 {
		t.Fatalf("re-published %d, sent %d, waiting %d; want it deferred at once", len(h.f.q.sent), len(h.sentAt), h.f.clk.Waiters())
	}
}

// TestAFIFORecordJustBeforeItsTimeComesBackInASecond: a FIFO deferral of
// under a second asks for a second's visibility, not none (which would
// leave the queue's own, minutes).
func TestAFIFORecordJustBeforeItsTimeComesBackInASecond(t *testing.T) {
	f := newFast(t, nil)
	due := f.clk.Now().Add(2400 * time.Millisecond) // beyond the 2 s hold
	f.seed(t, "rem-fifo", due)
	if got := after(f.handle("rem-fifo", "webhook", due, "1", map[string]string{"MessageGroupId": "acct-1"})); got != 2*time.Second {
		t.Fatalf("deferred by %v; want 2s (rounded down)", got)
	}
}

// TestAFIFORecordRescheduledUnderASecondLaterComesBackInASecond: its claim
// is refused not due, 0.4 s ahead: a second's visibility, never none.
func TestAFIFORecordRescheduledUnderASecondLaterComesBackInASecond(t *testing.T) {
	f := newFast(t, nil)
	f.seed(t, "rem-fifo", f.clk.Now().Add(400*time.Millisecond))
	if got := after(f.handle("rem-fifo", "webhook", f.clk.Now(), "1", map[string]string{"MessageGroupId": "acct-1"})); got != time.Second {
		t.Fatalf("deferred by %v; want 1s, never 0", got)
	}
}

func TestAnEarlyWaitUnderASecondIsRefused(t *testing.T) {
	t.Parallel()
	_, err := consumer.New(consumer.Config{Ledger: mustMemory(clock.NewFake(time.Now())), Queue: &captureSQS{}, QueueURL: "w", DLQURL: "d",
		EarlyWait: 500 * time.Millisecond, Providers: map[string]provider.Provider{"webhook": provider.Func(nil)}})
	if err == nil || !strings.Contains(err.Error(), "early wait") {
		t.Fatalf("error %v; want the early wait refused", err)
	}
}
