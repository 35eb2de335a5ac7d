package consumer_test

// Fast tests of the consumer's decisions with the in-memory ledger (which
// passes the same conformance suite as DynamoDB), a captured SQS client and
// a fake clock. The failure table against the stand-ins is in
// consumer_test.go.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/consumer"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/ledger/ledgertest"
	"github.com/nudgehq/nudge/pkg/message"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/retry"
)

type fast struct {
	c     *consumer.Consumer
	l     *ledgertest.Memory
	q     *captureSQS
	clk   *clock.Fake
	sends int
}

func newFast(t *testing.T, sendErr error) *fast {
	t.Helper()
	t.Parallel()
	f := &fast{q: &captureSQS{}, clk: clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))}
	f.l = ledgertest.NewMemory(f.clk, 0)
	backoff, _ := retry.New(retry.Config{Base: 10 * time.Second, Rand: func() float64 { return 0.5 }})
	var err error
	f.c, err = consumer.New(consumer.Config{
		Ledger: f.l, Queue: f.q, QueueURL: "work", DLQURL: "dlq", Clock: f.clk, Backoff: backoff, MaxAttempts: 3,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
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
	if len(f.q.sent) != 1 || aws.ToString(f.q.sent[0].MessageAttributes[consumer.AttrErrorClass].StringValue) != failure.ClassConfig || d.Status != "" {
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

func TestBackoffGrowsWithTheReceiveCountUntilTheBudget(t *testing.T) {
	f := newFast(t, &provider.StatusError{Code: 503})
	f.seed(t, "rem-5", f.clk.Now())
	for receive, want := range map[string]time.Duration{"1": 5 * time.Second, "2": 10 * time.Second} {
		if got := after(f.handle("rem-5", "webhook", f.clk.Now(), receive, nil)); got != want {
			t.Errorf("receive %s: delay %v, want %v", receive, got, want)
		}
	}
	if err := f.handle("rem-5", "webhook", f.clk.Now(), "3", nil); err != nil {
		t.Fatalf("last attempt not dead-lettered: %v", err)
	}
	d, _ := f.l.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-5", Channel: "email", Provider: "webhook"})
	if d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassExhausted || f.sends != 3 {
		t.Fatalf("ledger %+v, sends %d", d, f.sends)
	}
}
