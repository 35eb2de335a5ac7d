package consumer_test

// Fast tests of the consumer's decisions with the in-memory ledger (which
// passes the same conformance suite as DynamoDB), a captured SQS client and
// a fake clock. The failure table against the stand-ins is in
// consumer_test.go.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/nudgehq/nudge/internal/circuit"
	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/retry"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

type fast struct {
	c     *consumer.Consumer
	l     *ledger.Memory
	q     *captureSQS
	clk   *clock.Fake
	sends int
}

func newFast(t *testing.T, sendErr error) *fast {
	t.Helper()
	t.Parallel()
	f := &fast{q: &captureSQS{}, clk: clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))}
	f.l = mustMemory(f.clk)
	backoff, _ := retry.New(retry.Config{Base: 10 * time.Second, Rand: func() float64 { return 0.5 }})
	var err error
	f.c, err = consumer.New(consumer.Config{
		Ledger: f.l, Queue: f.q, QueueURL: "work", DLQURL: "dlq", Clock: f.clk, Backoff: backoff, MaxAttempts: 3,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// These tests follow one delivery's attempts past the five failures
		// in a row that would open the provider's circuit (circuit_test.go).
		Circuit: circuit.Config{Failures: 100},
		Providers: map[string]provider.Provider{"webhook": provider.Func(func(context.Context, provider.Request, string) (provider.Receipt, error) {
			f.sends++
			return provider.Receipt{ID: "r"}, sendErr
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fast) seed(t *testing.T, id string, due time.Time) {
	t.Helper()
	if err := f.l.Create(context.Background(), ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: due, ExpiresAt: due.Add(time.Hour), Status: ledger.StatusQueued}); err != nil {
		t.Fatal(err)
	}
}

func (f *fast) handle(id, prov string, due time.Time, receives string, attrs map[string]string) error {
	body, _ := message.Encode(message.Message{ReminderID: id, Channel: "email", Provider: prov, DueAt: due})
	a := map[string]string{"ApproximateReceiveCount": receives}
	for k, v := range attrs {
		a[k] = v
	}
	return f.c.Handle(context.Background(), events.SQSMessage{MessageId: "m-" + id, ReceiptHandle: "h", Body: string(body), Attributes: a})
}

func after(err error) time.Duration {
	var fe *failure.Error
	if errors.As(err, &fe) {
		return fe.After
	}
	return -1
}

func TestLeasedDeliveryIsRetriedWhenTheLeaseEnds(t *testing.T) {
	f := newFast(t, nil)
	now := f.clk.Now()
	f.seed(t, "rem-1", now)
	if _, err := f.l.Claim(context.Background(), ledger.Claim{Key: message.DeliveryKey{ReminderID: "rem-1", Channel: "email", Provider: "webhook"}, Token: "other", LeaseUntil: now.Add(40 * time.Second), DueBy: now}); err != nil {
		t.Fatal(err)
	}
	err := f.handle("rem-1", "webhook", now, "1", nil)
	if got := after(err); got != 41*time.Second || f.sends != 0 {
		t.Fatalf("retry after %v (%v), sends %d; want 41s and no send", got, err, f.sends)
	}
}

func TestUnknownProviderIsDeadLetteredAsConfig(t *testing.T) {
	f := newFast(t, nil)
	f.seed(t, "rem-2", f.clk.Now())
	if err := f.handle("rem-2", "carrier-pigeon", f.clk.Now(), "1", nil); err != nil {
		t.Fatal(err)
	}
	d, _ := f.l.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-2", Channel: "email", Provider: "carrier-pigeon"})
	if len(f.q.sent) != 1 || aws.ToString(f.q.sent[0].MessageAttributes[deadletter.AttrErrorClass].StringValue) != string(failure.ClassConfig) || d.Status != "" {
		t.Fatalf("DLQ sends %d; ledger %+v", len(f.q.sent), d)
	}
}

func TestEarlyFIFOMessageIsDeferredByVisibility(t *testing.T) {
	f := newFast(t, nil)
	due := f.clk.Now().Add(3 * time.Minute)
	f.seed(t, "rem-3", due)
	err := f.handle("rem-3", "webhook", due, "1", map[string]string{"MessageGroupId": "acct-1"})
	if got := after(err); got != 3*time.Minute || len(f.q.sent) != 0 || f.sends != 0 {
		t.Fatalf("deferral %v, SQS sends %d, provider sends %d; want a 3m visibility delay only", got, len(f.q.sent), f.sends)
	}
}

func TestEarlyStandardMessageIsRepublishedWithADelay(t *testing.T) {
	f := newFast(t, nil)
	due := f.clk.Now().Add(90 * time.Second)
	f.seed(t, "rem-4", due)
	if err := f.handle("rem-4", "webhook", due, "4", nil); err != nil {
		t.Fatal(err)
	}
	if len(f.q.sent) != 1 || f.q.sent[0].DelaySeconds != 90 || aws.ToString(f.q.sent[0].QueueUrl) != "work" {
		t.Fatalf("re-published %+v", f.q.sent)
	}
}

// TestDueDecadesAheadIsReleasedNotOverflowed: a message for a delivery due
// 70 or 400 years ahead (one created past intake's cap) is handed back to
// the calendar. Before, its wait in seconds overflowed int32 (70 years)
// or the rounding overflowed the Duration (400 years): a negative delay,
// which SQS refuses, retried forever.
func TestDueDecadesAheadIsReleasedNotOverflowed(t *testing.T) {
	for _, years := range []int{70, 400} {
		for name, attrs := range map[string]map[string]string{"standard": nil, "fifo": {"MessageGroupId": "g"}} {
			t.Run(fmt.Sprint(years, "y ", name), func(t *testing.T) {
				f := newFast(t, nil)
				due := f.clk.Now().AddDate(years, 0, 0)
				f.seed(t, "rem-far", due)
				if err := f.handle("rem-far", "webhook", due, "1", attrs); err != nil {
					t.Fatal(err)
				}
				d, _ := f.l.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-far", Channel: "email", Provider: "webhook"})
				if len(f.q.sent) != 0 || d.Status != ledger.StatusPending || f.sends != 0 {
					t.Fatalf("SQS sends %+v, delivery %s; want it released to the calendar", f.q.sent, d.Status)
				}
			})
		}
	}
}

// TestBackoffGrowsWithProviderAttemptsUntilTheBudget: the backoff and the
// budget count the provider attempts the ledger recorded, not the message's
// receive count, which here stays at 1 (a repair's republish starts a new
// message at 1; before, that reset the budget and the backoff).
func TestBackoffGrowsWithProviderAttemptsUntilTheBudget(t *testing.T) {
	f := newFast(t, &provider.StatusError{Code: 503})
	f.seed(t, "rem-5", f.clk.Now())
	for attempt, want := range []time.Duration{5 * time.Second, 10 * time.Second} {
		if got := after(f.handle("rem-5", "webhook", f.clk.Now(), "1", nil)); got != want {
			t.Errorf("attempt %d: delay %v, want %v", attempt+1, got, want)
		}
	}
	if err := f.handle("rem-5", "webhook", f.clk.Now(), "1", nil); err != nil {
		t.Fatalf("last attempt not dead-lettered: %v", err)
	}
	d, _ := f.l.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-5", Channel: "email", Provider: "webhook"})
	if d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassExhausted || f.sends != 3 {
		t.Fatalf("ledger %+v, sends %d", d, f.sends)
	}
	if m := f.q.sent[0]; aws.ToString(m.MessageAttributes[deadletter.AttrAttempts].StringValue) != "3" || aws.ToString(m.MessageAttributes[deadletter.AttrReceives].StringValue) != "1" {
		t.Fatalf("DLQ attributes %v; want 3 attempts, 1 receive", m.MessageAttributes)
	}
}

// TestReceivesThatNeverReachedTheProviderDoNotSpendTheBudget: a message
// received many times without a send (left unstarted at the cut-off,
// refused by another copy's lease, a throttled claim) still has its whole
// budget: its first failed send is retried, not dead-lettered as exhausted.
func TestReceivesThatNeverReachedTheProviderDoNotSpendTheBudget(t *testing.T) {
	f := newFast(t, &provider.StatusError{Code: 503})
	f.seed(t, "rem-6", f.clk.Now())
	err := f.handle("rem-6", "webhook", f.clk.Now(), "9", nil)
	d, _ := f.l.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-6", Channel: "email", Provider: "webhook"})
	if after(err) != 5*time.Second || d.Status != ledger.StatusRetrying || len(f.q.sent) != 0 {
		t.Fatalf("first send on receive 9: %v, delivery %s, DLQ sends %d; want a retry after 5s", err, d.Status, len(f.q.sent))
	}
}

// TestARedriveRestartsTheBudget: a dead-lettered delivery brought back by
// a console redrive gets the whole budget again, counted from the redrive.
func TestARedriveRestartsTheBudget(t *testing.T) {
	f := newFast(t, &provider.StatusError{Code: 503})
	f.seed(t, "rem-7", f.clk.Now())
	for range 3 {
		_ = f.handle("rem-7", "webhook", f.clk.Now(), "1", nil)
	}
	k := message.DeliveryKey{ReminderID: "rem-7", Channel: "email", Provider: "webhook"}
	if d, _ := f.l.Get(context.Background(), k); d.Status != ledger.StatusDead {
		t.Fatalf("after the budget: %s", d.Status)
	}
	for i := range 2 {
		err := f.c.Handle(context.Background(), redrivenRecord(t, "rem-7", f.clk.Now(), fmt.Sprint(i+1)))
		if after(err) <= 0 {
			t.Fatalf("redriven attempt %d: %v; want a retry (the budget restarted)", i+1, err)
		}
	}
	if err := f.c.Handle(context.Background(), redrivenRecord(t, "rem-7", f.clk.Now(), "3")); err != nil {
		t.Fatalf("third attempt after the redrive: %v; want dead-lettered", err)
	}
	if d, _ := f.l.Get(context.Background(), k); d.Status != ledger.StatusDead || d.Attempts != 6 || f.sends != 6 {
		t.Fatalf("after the second budget: %s, %d attempts, %d sends", d.Status, d.Attempts, f.sends)
	}
}

// redrivenRecord is a record back from the DLQ: it carries the consumer's
// dead-letter attributes.
func redrivenRecord(t *testing.T, id string, due time.Time, receives string) events.SQSMessage {
	t.Helper()
	body, _ := message.Encode(message.Message{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: due})
	return events.SQSMessage{MessageId: "m-redriven-" + id, ReceiptHandle: "h", Body: string(body),
		Attributes:        map[string]string{"ApproximateReceiveCount": receives},
		MessageAttributes: map[string]events.SQSMessageAttribute{deadletter.AttrErrorClass: {StringValue: aws.String("exhausted"), DataType: "String"}}}
}

// mustMemory is an in-memory ledger on clk.
func mustMemory(clk clock.Clock) *ledger.Memory {
	m, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
	if err != nil {
		panic(err)
	}
	return m
}

// TestALeaseUnderADeadlineCountsFromTheConsumersClock: the claim's lease
// ends 5 s after the invocation's deadline, which is on Lambda's (the wall)
// clock; it is written as the time left of it from the consumer's own
// clock, whatever date that reads, never as the wall clock's date.
func TestALeaseUnderADeadlineCountsFromTheConsumersClock(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	l := mustMemory(clk)
	key := message.DeliveryKey{ReminderID: "rem-1", Channel: "email", Provider: "webhook"}
	var lease time.Time
	c, err := consumer.New(consumer.Config{
		Ledger: l, Queue: &captureSQS{}, QueueURL: "work", DLQURL: "dlq", Clock: clk, MaxAttempts: 3,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Providers: map[string]provider.Provider{"webhook": provider.Func(func(context.Context, provider.Request, string) (provider.Receipt, error) {
			d, err := l.Get(context.Background(), key)
			lease = d.LeaseUntil
			return provider.Receipt{ID: "r"}, err
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	due := clk.Now().Add(-time.Minute)
	if err := l.Create(context.Background(), ledger.Delivery{ReminderID: "rem-1", Channel: "email", Provider: "webhook", DueAt: due, ExpiresAt: due.Add(time.Hour), Status: ledger.StatusQueued}); err != nil {
		t.Fatal(err)
	}
	body, _ := message.Encode(message.Message{ReminderID: "rem-1", Channel: "email", Provider: "webhook", DueAt: due})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Handle(ctx, events.SQSMessage{MessageId: "m-1", ReceiptHandle: "h", Body: string(body), Attributes: map[string]string{"ApproximateReceiveCount": "1"}}); err != nil {
		t.Fatal(err)
	}
	if left := lease.Sub(clk.Now()); left < 14*time.Second || left > 15*time.Second {
		t.Fatalf("lease until %s, %v after the consumer's now (%s); want the 10 s left of the invocation and 5 s more", lease, left, clk.Now())
	}
}

// TestALateCopyNeverExpiresADeliveryBeingSent: a copy of a delivery's
// message arrives after expiresAt while another consumer, which claimed it
// in time, is still sending it. The copy's refused claim carries that
// consumer's token; the copy must not expire the delivery under it, so that
// the holder's Complete records the send that reached the recipient.
func TestALateCopyNeverExpiresADeliveryBeingSent(t *testing.T) {
	f := newFast(t, nil)
	now := f.clk.Now()
	key := message.DeliveryKey{ReminderID: "rem-held", Channel: "email", Provider: "webhook"}
	if err := f.l.Create(context.Background(), ledger.Delivery{ReminderID: key.ReminderID, Channel: key.Channel, Provider: key.Provider,
		DueAt: now, ExpiresAt: now.Add(30 * time.Second), Status: ledger.StatusQueued}); err != nil {
		t.Fatal(err)
	}
	held, err := f.l.Claim(context.Background(), ledger.Claim{Key: key, Token: "holder", LeaseUntil: now.Add(time.Minute), DueBy: now})
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(40 * time.Second) // past expiresAt; the holder's send is under way
	err = f.handle(key.ReminderID, "webhook", now, "2", nil)
	if got := after(err); got != 21*time.Second || f.sends != 0 {
		t.Fatalf("the late copy: retry after %v (%v), sends %d; want 21s (the lease's end) and no send", got, err, f.sends)
	}
	if d, _ := f.l.Get(context.Background(), key); d.Status != ledger.StatusSending {
		t.Fatalf("the late copy left %q, want the holder's sending", d.Status)
	}
	if d, err := f.l.Complete(context.Background(), held, "accepted"); err != nil || d.Status != ledger.StatusSent {
		t.Fatalf("the holder's complete: %+v, %v", d, err)
	}
}

// TestAMessageForAHeldFallbackIsAcknowledgedUnsent: a fallback not taken
// is never claimed; a message naming it (none of Nudge's does) is
// acknowledged, and the fallback stays held.
func TestAMessageForAHeldFallbackIsAcknowledgedUnsent(t *testing.T) {
	f := newFast(t, nil)
	now := f.clk.Now()
	held := ledger.Delivery{ReminderID: "rem-held", Channel: "email", Provider: "webhook", DueAt: now, ExpiresAt: now.Add(time.Hour),
		Status: ledger.StatusHeld, FallbackOf: ledger.FallbackRef{Channel: "sms", Provider: "webhook"}}
	if err := f.l.Create(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	if err := f.handle("rem-held", "webhook", now, "1", nil); err != nil {
		t.Fatalf("handle: %v; want it acknowledged", err)
	}
	d, _ := f.l.Get(context.Background(), held.Key())
	if f.sends != 0 || len(f.q.sent) != 0 || d.Status != ledger.StatusHeld {
		t.Fatalf("sends %d, SQS sends %d, status %s; want none, none, held", f.sends, len(f.q.sent), d.Status)
	}
}

// TestADLQCopyOfAPrimaryWhoseFallbackWasTakenIsAcknowledgedUnsent: a
// console redrive brings back the DLQ copy of a dead primary whose
// fallback was taken since: the claim is refused, the message is
// acknowledged, nothing is sent, and the primary stays dead.
func TestADLQCopyOfAPrimaryWhoseFallbackWasTakenIsAcknowledgedUnsent(t *testing.T) {
	f := newFast(t, nil)
	ctx, now := context.Background(), f.clk.Now()
	primary := ledger.Delivery{ReminderID: "rem-fbt", Channel: "email", Provider: "webhook", DueAt: now, ExpiresAt: now.Add(time.Hour),
		Fallback: ledger.FallbackRef{Channel: "sms", Provider: "webhook"}}
	held := ledger.Delivery{ReminderID: "rem-fbt", Channel: "sms", Provider: "webhook", DueAt: now, ExpiresAt: now.Add(time.Hour),
		Status: ledger.StatusHeld, FallbackOf: ledger.FallbackRef{Channel: "email", Provider: "webhook"}}
	for _, d := range []ledger.Delivery{primary, held} {
		if err := f.l.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := f.l.DeadLetter(ctx, primary, ledger.Failure{Class: failure.ClassRejected, Message: "provider answered 400"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.TakeFallback(ctx, dead, "dead (rejected)"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Handle(ctx, redrivenRecord(t, "rem-fbt", now, "1")); err != nil {
		t.Fatalf("handle: %v; want it acknowledged", err)
	}
	d, _ := f.l.Get(ctx, primary.Key())
	if f.sends != 0 || len(f.q.sent) != 0 || d.Status != ledger.StatusDead {
		t.Fatalf("sends %d, SQS sends %d, status %s; want none, none, dead", f.sends, len(f.q.sent), d.Status)
	}
}
