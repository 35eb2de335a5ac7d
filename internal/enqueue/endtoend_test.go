package enqueue_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/provider/webhook"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/batchtest"
	"github.com/nudgehq/nudge/internal/local/sink"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/provider"
)

// TestScheduledEnqueuedAndConsumedEndToEnd takes a reminder from the
// intake through both functions' handlers: scheduled with the store,
// handed off by the enqueue Function on a sample schedule event, received
// from the queue as the event source mapping would, and delivered once by
// the consumer Function to the provider sink.
func TestScheduledEnqueuedAndConsumedEndToEnd(t *testing.T) {
	b := setupLocal(t, 4)
	secret := []byte("end-to-end-secret")
	snk := &sink.Sink{Secret: secret}
	srv := httptest.NewServer(snk)
	t.Cleanup(srv.Close)
	hook, err := webhook.New(webhook.Config{URL: srv.URL, Secret: secret, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	in, err := b.store.Validator().ParseJSON([]byte(`{"id":"rem-e2e","accountRef":"acct-9","dueAt":"2026-11-30T09:00:30Z",
		"deliveries":[{"channel":"email","provider":"webhook","recipientRef":"acct-9/contact-1","templateRef":"renewal-v3"},
		              {"channel":"sms","provider":"webhook","recipientRef":"acct-9/phone-1","templateRef":"renewal-sms"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Create(b.ctx, in); err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.NewJSONHandler(lockedWriter{b.logMu, b.logs}, nil))
	enqMetrics := metrics.New(map[string]string{"Function": "enqueue"})
	cfg := b.cfg
	cfg.Queue, cfg.Metrics = b.sqs, enqMetrics // the real queue, no recorder
	enq, err := enqueue.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var emf strings.Builder
	enqFn, err := enqueue.NewFunction(enqueue.FunctionConfig{Enqueuer: enq, Metrics: enqMetrics, MetricsOut: &emf, Logger: log, Clock: b.clk})
	if err != nil {
		t.Fatal(err)
	}

	cons, err := consumer.New(consumer.Config{
		Ledger: b.dynamo, Providers: map[string]provider.Provider{"webhook": hook},
		Queue: b.sqs, QueueURL: b.q.WorkURL, DLQURL: b.q.DLQURL, Clock: b.clk, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	proc, err := batch.New(cons, batch.Config{Visibility: b.sqs, Clock: b.clk, Logger: log, QueueURL: func(string) string { return b.q.WorkURL }})
	if err != nil {
		t.Fatal(err)
	}
	consFn, err := consumer.NewFunction(consumer.FunctionConfig{Processor: proc, Metrics: metrics.New(nil), MetricsOut: io.Discard, Clock: b.clk, Logger: log})
	if err != nil {
		t.Fatal(err)
	}

	tick, err := os.ReadFile("../../events/scheduler.json")
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Minute) // 09:01, due 30s ago
	rep, err := enqFn.Handle(b.ctx, json.RawMessage(tick))
	if err != nil || rep.Enqueued != 2 {
		t.Fatalf("enqueue: %+v, %v", rep, err)
	}
	if !strings.Contains(emf.String(), `"Enqueued":2`) || !strings.Contains(emf.String(), `"OverduePending":0`) {
		t.Fatalf("EMF line = %s", emf.String())
	}

	var ev = receiveAll(t, b, 2)
	resp, err := consFn.Handle(b.ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("consumer: %+v, %v", resp, err)
	}
	if err := batchtest.Acknowledge(b.ctx, b.sqs, b.q.WorkURL, ev, resp); err != nil {
		t.Fatal(err)
	}
	for _, d := range in.Deliveries {
		k := in.Key(d)
		if got := b.status(t, k); got.Status != ledger.StatusSent {
			t.Fatalf("%s = %s, want sent", k, got.Status)
		}
		if snk.Sends(k.String()) != 1 {
			t.Fatalf("sink accepted %s %d times", k, snk.Sends(k.String()))
		}
	}

	// Later ticks find nothing to hand off, nothing overdue, nothing to repair.
	b.clk.Advance(15 * time.Minute)
	rep, err = enqFn.Handle(b.ctx, json.RawMessage(tick))
	if err != nil || rep.Enqueued+rep.Repaired+rep.OverduePending != 0 {
		t.Fatalf("later run: %+v, %v", rep, err)
	}
	if again := receiveAll(t, b, 0); len(again.Records) != 0 {
		t.Fatalf("queue still holds %d messages", len(again.Records))
	}
	if !strings.Contains(b.logs.String(), `"msg":"enqueue run"`) {
		t.Fatal("no enqueue summary line in the logs")
	}
}

// receiveAll receives want records from the work queue (0: whatever is
// there now).
func receiveAll(t *testing.T, b *bundle, want int) (ev events.SQSEvent) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := batchtest.Receive(b.ctx, b.sqs, b.q.WorkURL, b.q.WorkARN, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		ev.Records = append(ev.Records, got.Records...)
		if len(ev.Records) >= want || time.Now().After(deadline) {
			return ev
		}
		time.Sleep(20 * time.Millisecond)
	}
}
