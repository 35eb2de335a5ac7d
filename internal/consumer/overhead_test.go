package consumer_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/provider"
)

// memLedger is an in-memory ledger that grants every claim: enough to
// measure the consumer's own overhead.
type memLedger struct{ consumer.Ledger }

func (memLedger) Claim(_ context.Context, c ledger.Claim) (ledger.Delivery, error) {
	return ledger.Delivery{ReminderID: c.Key.ReminderID, Channel: c.Key.Channel, Provider: c.Key.Provider, Status: ledger.StatusSending,
		ClaimToken: c.Token, DueAt: c.DueBy.Add(-time.Minute), Attempts: 1}, nil
}

func (memLedger) Complete(_ context.Context, d ledger.Delivery, receipt string) (ledger.Delivery, error) {
	d.Status, d.Receipt = ledger.StatusSent, receipt
	return d, nil
}

type noSQS struct{}

func (noSQS) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return &sqs.SendMessageOutput{}, nil
}

func fakeFunction(b *testing.B, latency time.Duration) (*consumer.Function, events.SQSEvent) {
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	send := provider.Func(func(ctx context.Context, _ provider.Request, _ string) (provider.Receipt, error) {
		if latency > 0 {
			time.Sleep(latency)
		}
		return provider.Receipt{ID: "r"}, nil
	})
	rec := metrics.New(nil)
	c, err := consumer.New(consumer.Config{Ledger: memLedger{}, Providers: map[string]provider.Provider{"webhook": send},
		Queue: noSQS{}, QueueURL: "q", DLQURL: "d", Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	proc, _ := batch.New(c, batch.Config{Logger: quiet})
	ev := events.SQSEvent{}
	for i := 0; i < 10; i++ {
		body, _ := message.Encode(message.Message{ReminderID: fmt.Sprint("rem-", i), Channel: "email", Provider: "webhook", DueAt: time.Now().Add(-time.Minute)})
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprint(i), Body: string(body), Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	fn, err := consumer.NewFunction(consumer.FunctionConfig{Processor: proc, Metrics: rec, MetricsOut: io.Discard, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	return fn, ev
}

// BenchmarkConsumerOverheadPerRecord is the consumer's and the processor's
// own cost per record (decode, claim, send, complete, log) with in-memory
// fakes for DynamoDB, SQS and the provider.
func BenchmarkConsumerOverheadPerRecord(b *testing.B) {
	fn, ev := fakeFunction(b, 0)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fn.Handle(ctx, ev)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ev.Records)), "ns/record")
}

// BenchmarkBatchOf10WithFakeLatency50ms shows the batch's parallelism alone:
// ten records whose provider takes 50 ms, with in-memory fakes elsewhere.
func BenchmarkBatchOf10WithFakeLatency50ms(b *testing.B) {
	fn, ev := fakeFunction(b, 50*time.Millisecond)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fn.Handle(ctx, ev)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/50000, "x-provider-latency")
}
