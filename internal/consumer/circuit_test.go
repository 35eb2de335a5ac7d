package consumer_test

// The provider circuit in the consumer (circuit.go), fast: the in-memory
// ledger, a captured SQS client, a fake clock, providers as functions.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/internal/retry"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/provider"
)

type lockedSQS struct {
	mu   sync.Mutex
	sent []*sqs.SendMessageInput
}

func (q *lockedSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, in)
	return &sqs.SendMessageOutput{}, nil
}

func (q *lockedSQS) to(url string) []*sqs.SendMessageInput {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*sqs.SendMessageInput
	for _, in := range q.sent {
		if aws.ToString(in.QueueUrl) == url {
			out = append(out, in)
		}
	}
	return out
}

// tripped is a consumer with two providers: the webhook, whose answer the
// test sets (answer), and ses, which accepts everything.
type tripped struct {
	c       *consumer.Consumer
	l       *ledger.Memory
	q       *lockedSQS
	clk     *clock.Fake
	m       *metrics.Recorder
	logs    *syncBuffer
	mu      sync.Mutex
	answer  error // the webhook's
	block   chan struct{}
	webhook atomic.Int32 // sends that reached the webhook
	ses     atomic.Int32
}

func newTripped(t *testing.T) *tripped {
	t.Helper()
	t.Parallel()
	f := &tripped{q: &lockedSQS{}, clk: clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)), logs: &syncBuffer{},
		m: metrics.New(map[string]string{"Function": "consumer"})}
	f.l = mustMemory(f.clk)
	backoff, _ := retry.New(retry.Config{Base: 10 * time.Second, Rand: func() float64 { return 0.5 }})
	var err error
	f.c, err = consumer.New(consumer.Config{
		Ledger: f.l, Queue: f.q, QueueURL: "work", DLQURL: "dlq", Clock: f.clk, Backoff: backoff, MaxAttempts: 3, Metrics: f.m,
		// The webhook on a queue of its own, as a paced provider's: its
		// deferrals go there, not to the default queue.
		Routes: envelope.Routes{Default: "work", ByProvider: map[string]string{"webhook": "work-webhook"}},
		Logger: slog.New(slog.NewJSONHandler(f.logs, nil)),
		Providers: map[string]provider.Provider{
			"webhook": provider.Func(func(context.Context, provider.Request, string) (provider.Receipt, error) {
				f.webhook.Add(1)
				if f.block != nil {
					<-f.block
				}
				f.mu.Lock()
				err := f.answer
				f.mu.Unlock()
				if err != nil {
					return provider.Receipt{}, err
				}
				return provider.Receipt{ID: "r"}, nil
			}),
			"ses": provider.Func(func(context.Context, provider.Request, string) (provider.Receipt, error) {
				f.ses.Add(1)
				return provider.Receipt{ID: "s"}, nil
			}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *tripped) fail(err error) { f.mu.Lock(); f.answer = err; f.mu.Unlock() }
func (f *tripped) heal()          { f.fail(nil) }

// record seeds a delivery of prov due now and returns its record.
func (f *tripped) record(t *testing.T, id, prov string, attrs map[string]string) events.SQSMessage {
	t.Helper()
	due := f.clk.Now()
	if err := f.l.Create(context.Background(), ledger.Delivery{ReminderID: id, Channel: "email", Provider: prov, DueAt: due, ExpiresAt: due.Add(time.Hour), Status: ledger.StatusQueued}); err != nil {
		t.Fatal(err)
	}
	body, _ := message.Encode(message.Message{ReminderID: id, Channel: "email", Provider: prov, DueAt: due})
	a := map[string]string{"ApproximateReceiveCount": "1"}
	for k, v := range attrs {
		a[k] = v
	}
	return events.SQSMessage{MessageId: "m-" + id, ReceiptHandle: "h", Body: string(body), Attributes: a}
}

func (f *tripped) delivery(id, prov string) ledger.Delivery {
	d, _ := f.l.Get(context.Background(), message.DeliveryKey{ReminderID: id, Channel: "email", Provider: prov})
	return d
}

// trip opens the webhook's circuit: five deliveries whose sends time out.
func (f *tripped) trip(t *testing.T) {
	t.Helper()
	f.fail(fmt.Errorf("webhook: %w", context.DeadlineExceeded))
	for i := range 5 {
		if err := f.c.Handle(context.Background(), f.record(t, fmt.Sprint("trip-", i), "webhook", nil)); after(err) <= 0 {
			t.Fatalf("timeout %d: %v; want a retry", i, err)
		}
	}
	if !strings.Contains(f.logs.String(), `"msg":"provider circuit","provider":"webhook","from":"closed","to":"open","coolDown":"30s"`) {
		t.Fatalf("no line for the circuit's opening:\n%s", f.logs)
	}
}

// TestAnOpenCircuitDefersItsProvidersRecordsUnclaimed: after five
// timeouts in a row the webhook's records are re-published, unchanged,
// to the queue they came from with the cool-down's delay; unclaimed (no
// attempt spent) and never dead-lettered, however often they come back;
// to their provider's own work queue where it has one.
// The other providers' records are sent as before.
func TestAnOpenCircuitDefersItsProvidersRecordsUnclaimed(t *testing.T) {
	f := newTripped(t)
	f.trip(t)
	rec := f.record(t, "rem-wait", "webhook", nil)
	rec.MessageAttributes = map[string]events.SQSMessageAttribute{"x-trace": {DataType: "String", StringValue: aws.String("t-1")}}
	for receive := range 12 { // far past the attempt budget and maxReceiveCount
		rec.Attributes["ApproximateReceiveCount"] = fmt.Sprint(receive + 1)
		if err := f.c.Handle(context.Background(), rec); err != nil {
			t.Fatalf("receive %d: %v; want a deferral acknowledged", receive+1, err)
		}
	}
	d := f.delivery("rem-wait", "webhook")
	copies := f.q.to("work-webhook")
	if f.webhook.Load() != 5 || d.Status != ledger.StatusQueued || d.Attempts != 0 || len(f.q.to("dlq")) != 0 || len(copies) != 12 {
		t.Fatalf("webhook sends %d, delivery %s with %d attempts, DLQ %d, copies %d; want 5 sends, queued, 0 attempts, nothing dead, 12 copies",
			f.webhook.Load(), d.Status, d.Attempts, len(f.q.to("dlq")), len(copies))
	}
	c := copies[0]
	if c.DelaySeconds != 30 || aws.ToString(c.MessageBody) != rec.Body || aws.ToString(c.MessageAttributes["x-trace"].StringValue) != "t-1" {
		t.Fatalf("copy %+v; want the body and attributes unchanged, a 30s delay", c)
	}
	if n := f.m.Count(consumer.MetricCircuitDeferred); n != 12 {
		t.Fatalf("%s = %v, want 12", consumer.MetricCircuitDeferred, n)
	}
	if n := f.m.Count(consumer.MetricCircuit); n != 1 {
		t.Fatalf("%s = %v, want 1 (opened)", consumer.MetricCircuit, n)
	}
	if err := f.c.Handle(context.Background(), f.record(t, "rem-email", "ses", nil)); err != nil || f.ses.Load() != 1 {
		t.Fatalf("an e-mail while the webhook's circuit is open: %v, %d sends; want it sent", err, f.ses.Load())
	}
	if !strings.Contains(f.logs.String(), `"outcome":"deferred","next":"30s","via":"republish","reason":"provider circuit open: webhook"`) {
		t.Fatalf("no deferral line:\n%s", f.logs)
	}
}

// TestTheProbeClosesTheCircuitOrDoublesTheCoolDown: at the probe time one
// record is sent; a timeout opens the circuit for 60 s, a success closes
// it.
func TestTheProbeClosesTheCircuitOrDoublesTheCoolDown(t *testing.T) {
	f := newTripped(t)
	f.trip(t)
	f.clk.Advance(30 * time.Second)
	if err := f.c.Handle(context.Background(), f.record(t, "probe-1", "webhook", nil)); after(err) <= 0 || f.webhook.Load() != 6 {
		t.Fatalf("probe: %v after %d sends; want the sixth send, retried", err, f.webhook.Load())
	}
	_ = f.c.Handle(context.Background(), f.record(t, "rem-1", "webhook", nil))
	if c := f.q.to("work-webhook"); len(c) != 1 || c[0].DelaySeconds != 60 {
		t.Fatalf("after a failed probe: copies %+v; want one, delayed 60s", c)
	}
	f.heal()
	f.clk.Advance(60 * time.Second)
	for _, id := range []string{"rem-1", "rem-2", "rem-3"} {
		rec := f.record(t, id+"-b", "webhook", nil)
		if err := f.c.Handle(context.Background(), rec); err != nil {
			t.Fatalf("%s after the webhook recovered: %v", id, err)
		}
		if d := f.delivery(id+"-b", "webhook"); d.Status != ledger.StatusSent {
			t.Fatalf("%s: %s, want sent", id, d.Status)
		}
	}
	for _, want := range []string{`"from":"open","to":"half-open"`, `"from":"half-open","to":"open","coolDown":"1m0s"`, `"from":"half-open","to":"closed"`} {
		if !strings.Contains(f.logs.String(), want) {
			t.Fatalf("no %s in the log:\n%s", want, f.logs)
		}
	}
}

// TestManyRecordsAtTheProbeTimeSendOneProbe: twenty records of the webhook
// handled at once when the cool-down ends: one is sent (the probe, held
// until the test lets it go), the other nineteen are deferred until the
// probe's time is up (SendTime, 11 s).
func TestManyRecordsAtTheProbeTimeSendOneProbe(t *testing.T) {
	f := newTripped(t)
	f.trip(t)
	f.heal()
	f.block = make(chan struct{})
	f.clk.Advance(30 * time.Second)
	recs := make([]events.SQSMessage, 20)
	for i := range recs {
		recs[i] = f.record(t, fmt.Sprint("burst-", i), "webhook", nil)
	}
	var wg sync.WaitGroup
	for _, rec := range recs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = f.c.Handle(context.Background(), rec) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(f.q.to("work-webhook")) < 19 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(f.block)
	wg.Wait()
	copies := f.q.to("work-webhook")
	if f.webhook.Load() != 6 || len(copies) != 19 {
		t.Fatalf("%d sends after the 5 that tripped it, %d deferred; want 1 probe and 19 deferred", f.webhook.Load()-5, len(copies))
	}
	for _, c := range copies {
		if c.DelaySeconds != 11 {
			t.Fatalf("deferred %ds during the probe; want 11s (the probe's longest time)", c.DelaySeconds)
		}
	}
}

// TestAFIFORecordWaitsByItsVisibility: a FIFO queue has no per-message
// delay: the record is returned with the cool-down as its visibility, and
// nothing is re-published.
func TestAFIFORecordWaitsByItsVisibility(t *testing.T) {
	f := newTripped(t)
	f.trip(t)
	err := f.c.Handle(context.Background(), f.record(t, "rem-fifo", "webhook", map[string]string{"MessageGroupId": "acct-1"}))
	if after(err) != 30*time.Second || len(f.q.to("work-webhook")) != 0 || f.delivery("rem-fifo", "webhook").Attempts != 0 {
		t.Fatalf("FIFO record: %v, %d copies; want a 30s visibility delay, unclaimed", err, len(f.q.to("work-webhook")))
	}
}

// TestRefusalsOfOneDeliveryDoNotOpenTheCircuit: a 400 is the delivery's
// own problem, and a 429 the provider asking for a slower rate: ten in a
// row leave the circuit closed.
func TestRefusalsOfOneDeliveryDoNotOpenTheCircuit(t *testing.T) {
	f := newTripped(t)
	for i, err := range []error{&provider.StatusError{Code: 400}, &provider.StatusError{Code: 429}} {
		f.fail(err)
		for j := range 10 {
			_ = f.c.Handle(context.Background(), f.record(t, fmt.Sprint("rem-", i, "-", j), "webhook", nil))
		}
	}
	f.heal()
	if err := f.c.Handle(context.Background(), f.record(t, "rem-ok", "webhook", nil)); err != nil || f.webhook.Load() != 21 {
		t.Fatalf("after 10 refusals and 10 throttles: %v, %d sends; want the 21st sent", err, f.webhook.Load())
	}
	if len(f.q.to("work-webhook")) != 0 || f.m.Count(consumer.MetricCircuit) != 0 {
		t.Fatal("the circuit opened")
	}
}

// TestAProbeWhoseClaimIsRefusedHandsTheProbeOn: the record admitted as
// the probe is a duplicate (its delivery was sent): it sends nothing, and
// the next record is the probe.
func TestAProbeWhoseClaimIsRefusedHandsTheProbeOn(t *testing.T) {
	f := newTripped(t)
	f.trip(t)
	f.heal()
	f.clk.Advance(30 * time.Second)
	dup := f.record(t, "rem-dup", "webhook", nil)
	d := f.delivery("rem-dup", "webhook")
	if _, err := f.l.Claim(context.Background(), ledger.Claim{Key: d.Key(), Token: "other", LeaseUntil: f.clk.Now().Add(time.Minute), DueBy: f.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Handle(context.Background(), dup); after(err) <= 0 || f.webhook.Load() != 5 {
		t.Fatalf("leased record as the probe: %v, %d sends; want a retry when the lease ends and no send", err, f.webhook.Load())
	}
	if err := f.c.Handle(context.Background(), f.record(t, "rem-next", "webhook", nil)); err != nil || f.webhook.Load() != 6 {
		t.Fatalf("next record: %v, %d sends; want it sent as the probe", err, f.webhook.Load())
	}
}
