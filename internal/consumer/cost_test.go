package consumer_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// directEvent shapes bodies as an SQS event without going through the
// queue, so only the consumer's own requests are counted.
func directEvent(bodies ...string) events.SQSEvent {
	ev := events.SQSEvent{}
	for i, body := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprint("m-", i), Body: body, Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	return ev
}

// seedDirect creates n queued deliveries due now and returns their bodies.
func (b *bundle) seedDirect(prefix string, n int) []string {
	bodies := make([]string, n)
	for i := range bodies {
		id := fmt.Sprintf("%s-%d", prefix, i)
		d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: b.clk.Now(), ExpiresAt: b.clk.Now().Add(time.Hour), Status: ledger.StatusQueued}
		if err := b.ledger.Create(b.ctx, d); err != nil {
			b.t.Fatal(err)
		}
		bodies[i] = b.body(id, d.DueAt)
	}
	return bodies
}

// TestRequestsPerDelivery counts the AWS requests the consumer makes: two
// DynamoDB writes per delivered message (claim, complete), one per
// recognised duplicate, and no SQS request for either (the event source
// mapping deletes acknowledged records).
func TestRequestsPerDelivery(t *testing.T) {
	b := setup(t, options{})
	bodies := b.seedDirect("rem-cost", 10)
	b.counter.Reset()
	before := b.ledger.WriteUnits()
	resp, _ := b.fn.Handle(b.ctx, directEvent(bodies...))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	if got := b.counter.Count("DynamoDB.UpdateItem"); got != 20 || b.counter.Service("DynamoDB") != 20 || b.counter.Service("SQS") != 0 {
		t.Fatalf("10 deliveries made %s; want 20 DynamoDB UpdateItem and nothing else", b.counter)
	}
	// Claim 1, complete 1, and 1 for the due index entry the complete removes.
	if wcu := b.ledger.WriteUnits() - before; wcu != 30 {
		t.Fatalf("10 deliveries consumed %v write units, want 30 (claim, complete, index removal)", wcu)
	}
	b.counter.Reset()
	b.fn.Handle(b.ctx, directEvent(bodies...))
	if b.counter.Service("DynamoDB") != 10 || b.counter.Service("SQS") != 0 {
		t.Fatalf("10 duplicates made %s; want 10 DynamoDB requests", b.counter)
	}
}

// BenchmarkBatchOf10WithProviderLatency50ms delivers batches of ten
// through the sink answering after 50 ms, against the stand-ins. With
// records in parallel a batch should take about one provider latency.
func BenchmarkBatchOf10WithProviderLatency50ms(b *testing.B) {
	script := ""
	for i := 0; i < b.N; i++ {
		for j := 0; j < 10; j++ {
			script += fmt.Sprintf("rem-b-%d-%d=ok+50ms;", i, j)
		}
	}
	bb := setup(b, options{script: script})
	batches := make([]events.SQSEvent, b.N)
	for i := range batches {
		batches[i] = directEvent(bb.seedDirect(fmt.Sprint("rem-b-", i), 10)...)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if resp, _ := bb.fn.Handle(bb.ctx, batches[i]); len(resp.BatchItemFailures) != 0 {
			b.Fatalf("failures %v", resp.BatchItemFailures)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/50, "x-provider-latency")
}

// BenchmarkDeliveryAgainstStandins measures one delivered message end to
// end through the consumer (claim, send to the sink, complete), and the
// DynamoDB requests and write units it costs.
func BenchmarkDeliveryAgainstStandins(b *testing.B) {
	bb := setup(b, options{})
	bodies := bb.seedDirect("rem-d", b.N)
	bb.counter.Reset()
	wcu := bb.ledger.WriteUnits()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bb.fn.Handle(bb.ctx, directEvent(bodies[i]))
	}
	b.StopTimer()
	b.ReportMetric(float64(bb.counter.Service("DynamoDB"))/float64(b.N), "ddb-requests/msg")
	b.ReportMetric((bb.ledger.WriteUnits()-wcu)/float64(b.N), "wcu/msg")
}

// TestWriteUnitsPerEmailDelivery measures what an SES delivery's address
// and template data cost: each write to the delivery item is billed by
// its size. With the demo's metadata (4 keys) an e-mail costs what a
// webhook delivery costs; with the most metadata the intake accepts (16
// keys of 256 bytes) each write costs more, and the figure is in
// docs/performance.md.
func TestWriteUnitsPerEmailDelivery(t *testing.T) {
	b := setup(t, options{})
	typical := map[string]string{"plan": "Pro", "renewsOn": "1 December 2026", "reference": "rem-00001", "demo": "due now"}
	largest := map[string]string{}
	for i := range schedule.MaxMetadataKeys {
		largest[fmt.Sprintf("%s%02d", strings.Repeat("k", schedule.MaxMetadataKey-2), i)] = strings.Repeat("v", schedule.MaxMetadataValue)
	}
	for _, c := range []struct {
		name string
		data map[string]string
		want float64 // write units per delivery, claim and complete (with the index removal)
	}{{"typical", typical, 3}, {"largest", largest, 13}} {
		bodies := make([]string, 10)
		for i := range bodies {
			id := fmt.Sprintf("rem-mail-%s-%d", c.name, i)
			d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "ses", Address: "ana.lopez@example.com", TemplateRef: "renewal-notice",
				TemplateData: c.data, DueAt: b.clk.Now(), ExpiresAt: b.clk.Now().Add(time.Hour), Status: ledger.StatusQueued}
			if err := b.ledger.Create(b.ctx, d); err != nil {
				t.Fatal(err)
			}
			body, _ := message.Encode(message.Message{ReminderID: id, Channel: "email", Provider: "ses", DueAt: d.DueAt})
			bodies[i] = string(body)
		}
		before := b.ledger.WriteUnits()
		if resp, _ := b.fn.Handle(b.ctx, directEvent(bodies...)); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %v", resp.BatchItemFailures)
		}
		per := (b.ledger.WriteUnits() - before) / 10
		t.Logf("%s template data: %.1f write units per e-mail delivered (claim, complete, index removal)", c.name, per)
		if per != c.want {
			t.Errorf("%s template data: %.1f write units per delivery, want %.0f", c.name, per, c.want)
		}
	}
}
