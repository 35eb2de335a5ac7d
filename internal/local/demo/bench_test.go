package demo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/local/standin/standintest"
)

// BenchmarkEndToEnd drains 500 deliveries through the event source
// mapping, two consumer instances under the emulator, DynamoDB Local and
// the provider sink, at batch sizes 1, 10 and 100 and provider latencies 0
// and 20 ms; then sends each message again as a duplicate. It reports the
// throughput, the AWS requests and write units per delivered message and
// per duplicate, both functions' cold starts (process start to first
// answered invocation, and its parts: the runtime's init, with the
// warm-up's connections, and the first invocation) and their peak memory.
func BenchmarkEndToEnd(b *testing.B) {
	standintest.AWSConfig(b)
	bins := standintest.Bootstraps(b, "consumer", "enqueue", "outcomes")
	for _, batch := range []int{1, 10, 100} {
		for _, latency := range []time.Duration{0, 20 * time.Millisecond} {
			b.Run(fmt.Sprintf("batch=%d/latency=%v", batch, latency), func(b *testing.B) {
				var r drainResult
				for i := 0; i < b.N; i++ {
					var err error
					r, err = drain(context.Background(), drainConfig{
						BatchSize: batch, Latency: latency, Bootstraps: bins,
						Stage:            strings.TrimPrefix(standintest.Name("drain"), "drain-"),
						DynamoDBEndpoint: os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), SQSEndpoint: os.Getenv("AWS_ENDPOINT_URL_SQS"), SESEndpoint: os.Getenv("AWS_ENDPOINT_URL_SESV2"),
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(r.PerSecond, "deliveries/s")
				b.ReportMetric(r.DynamoDBPerDelivery, "ddb-req/delivery")
				b.ReportMetric(r.WriteUnitsPerDelivery, "wcu/delivery")
				b.ReportMetric(r.SQSPerDelivery, "sqs-req/delivery")
				b.ReportMetric(float64(r.Invocations)/float64(r.Deliveries), "invocations/delivery")
				b.ReportMetric(r.DynamoDBPerDuplicate, "ddb-req/duplicate")
				b.ReportMetric(r.WriteUnitsPerDuplicate, "wcu/duplicate")
				b.ReportMetric(r.SQSPerDuplicate, "sqs-req/duplicate")
				b.ReportMetric(float64(r.ConsumerColdStart.Milliseconds()), "consumer-cold-ms")
				b.ReportMetric(float64(r.EnqueueColdStart.Milliseconds()), "enqueue-cold-ms")
				b.ReportMetric(float64(r.EmulatorStart.Milliseconds()), "emulator-start-ms")
				ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
				b.ReportMetric(ms(r.ConsumerInit), "consumer-init-ms")
				b.ReportMetric(ms(r.ConsumerFirst), "consumer-first-batch-ms")
				b.ReportMetric(ms(r.EnqueueInit), "enqueue-init-ms")
				b.ReportMetric(ms(r.EnqueueFirst), "enqueue-first-tick-ms")
				b.ReportMetric(float64(r.ConsumerPeakRSS)/(1<<20), "consumer-rss-MB")
				b.ReportMetric(float64(r.EnqueuePeakRSS)/(1<<20), "enqueue-rss-MB")
			})
		}
	}
}
