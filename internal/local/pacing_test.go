package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/esm"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/internal/ratelimit"
	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/provider"
)

// pacedRun is one backlog drained through a paced provider's own queue:
// what was sent, when, and what the queue and the consumers did.
type pacedRun struct {
	N     int
	Rate  float64
	Queue deployment.ProviderQueue
	// Elapsed is from the first receive's chance (the mapping's start) to
	// the last send.
	Elapsed time.Duration
	// Receives are the SQS receives of the e-mails' messages: records in
	// invocations, and receives the mapping never saw.
	Receives int64
	// Republished counts the consumers' sends to a work queue; DeadLetters
	// their sends to the DLQ.
	Republished, DeadLetters int64
	// Sends are the provider's calls, in order; Distinct the e-mails among
	// them.
	Sends    []pacedSend
	Distinct int
	// Returned are records an invocation returned to the queue (no turn).
	Returned int64
	// Invocations is how many batches the function got.
	Invocations int64
}

type pacedSend struct {
	key string
	due time.Time
	at  time.Time
}

// DrainRatio is the drain time over N/R.
func (r pacedRun) DrainRatio() float64 { return r.Elapsed.Seconds() / (float64(r.N) / r.Rate) }

// ReceivesPerEmail is the SQS receives per e-mail.
func (r pacedRun) ReceivesPerEmail() float64 { return float64(r.Receives) / float64(r.N) }

// MaxDisplacement is the largest distance, in seconds at the rate, of an
// e-mail's place in the send order from its place in the due order.
func (r pacedRun) MaxDisplacement() time.Duration {
	byDue := slices.Clone(r.Sends)
	slices.SortStableFunc(byDue, func(a, b pacedSend) int { return a.due.Compare(b.due) })
	rank := map[string]int{}
	for i, s := range byDue {
		rank[s.key] = i
	}
	worst := 0
	for i, s := range r.Sends {
		worst = max(worst, int(math.Abs(float64(i-rank[s.key]))))
	}
	return time.Duration(float64(worst) / r.Rate * float64(time.Second))
}

// MaxIn is the most sends in any window of length w.
func (r pacedRun) MaxIn(w time.Duration) int {
	most := 0
	for i, s := range r.Sends {
		j := i
		for j < len(r.Sends) && r.Sends[j].at.Sub(s.at) < w {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// countingQueue counts the consumers' sends by queue.
type countingQueue struct {
	*sqs.Client
	work, dlq          map[string]bool
	republished, deads atomic.Int64
}

func (q *countingQueue) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	switch url := aws.ToString(in.QueueUrl); {
	case q.work[url]:
		q.republished.Add(1)
	case q.dlq[url]:
		q.deads.Add(1)
	}
	return q.Client.SendMessage(ctx, in, opts...)
}

// drainPaced provisions a stage running ses at rate on the stand-ins,
// puts n e-mails due in the last second (a millisecond apart, published
// in due order ten at a time, four requests at once, as the enqueue does)
// on ses's own work queue, and drains it with the stage's mapping for that
// queue (its batch size, its maximum concurrency of instances, the stage's
// batching window) into consumers that run in-process, each with its own
// share of the rate, as Lambda's instances do.
func drainPaced(t testing.TB, n int, rate float64) pacedRun {
	t.Helper()
	ctx := context.Background()
	db, client := standintest.DynamoDB(t), standintest.SQS(t)
	stage := deployment.Dev()
	stage.Name = strings.TrimPrefix(standintest.Name("pace"), "pace-")
	stage.Providers = []string{"webhook", "ses"}
	stage.ProviderSettings = map[string]string{"sesFrom": "reminders@example.com"}
	stage.Rates = map[string]float64{"ses": rate}
	p, err := local.Provision(ctx, stage, db, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(p.Table)})
		for _, url := range append(p.WorkURLs(), p.DLQURL) {
			_, _ = client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		}
	})
	paced := p.Own["ses"]
	run := pacedRun{N: n, Rate: rate, Queue: paced.ProviderQueue}
	led, err := ledger.New(db, ledger.Config{Table: p.Table, Shards: stage.Shards})
	if err != nil {
		t.Fatal(err)
	}

	// The backlog, due over the last n milliseconds.
	// wall clock: the consumers run on it, against real stand-ins
	now := time.Now().UTC().Add(-time.Second)
	bodies := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		due := now.Add(time.Duration(i-n) * time.Millisecond)
		d := ledger.Delivery{ReminderID: fmt.Sprintf("rem-pace-%05d", i), Channel: "email", Provider: "ses", RecipientRef: "acct/contact",
			TemplateRef: "renewal", Address: "success@simulator.amazonses.com", DueAt: due, ExpiresAt: due.Add(time.Hour), Status: ledger.StatusQueued}
		body, err := message.Encode(message.Message{ReminderID: d.ReminderID, Channel: d.Channel, Provider: d.Provider, DueAt: due})
		if err != nil {
			t.Fatal(err)
		}
		bodies[i] = string(body)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := led.Create(ctx, d); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	routes := p.Routes()
	for start := 0; start < n; start += 40 {
		for b := start; b < min(start+40, n); b += 10 {
			wg.Go(func() {
				var entries []types.SendMessageBatchRequestEntry
				for i := b; i < min(b+10, n); i++ {
					entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(bodies[i])})
				}
				if _, err := client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(routes.For("ses")), Entries: entries}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if t.Failed() {
		t.FailNow()
	}

	// The consumers: one per instance of the queue's mapping.
	q := &countingQueue{Client: client, work: map[string]bool{}, dlq: map[string]bool{p.DLQURL: true}}
	for _, url := range routes.URLs() {
		q.work[url] = true
	}
	var mu sync.Mutex
	provide := provider.Func(func(_ context.Context, req provider.Request, key string) (provider.Receipt, error) {
		mu.Lock()
		defer mu.Unlock()
		// wall clock: as above
		run.Sends = append(run.Sends, pacedSend{key: key, due: req.DueAt, at: time.Now()})
		return provider.Receipt{ID: "ses-" + key}, nil
	})
	queueOf := func(arn string) string {
		url, _ := routes.FromARN(arn)
		return url
	}
	var invokers []esm.Invoker
	for range paced.MaxConcurrency {
		lim, err := ratelimit.New(ratelimit.Config{PerSecond: ratelimit.Share(rate, paced.MaxConcurrency)})
		if err != nil {
			t.Fatal(err)
		}
		c, err := consumer.New(consumer.Config{Ledger: led, Providers: map[string]provider.Provider{"ses": provide}, Queue: q,
			QueueURL: routes.Default, Routes: routes, DLQURL: p.DLQURL, Limits: map[string]*ratelimit.Limiter{"ses": lim},
			SendTime: stage.ProviderTimeout + consumer.LedgerAllowance, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		proc, err := batch.New(c, batch.Config{Concurrency: stage.RecordConcurrency, CutoffMargin: consumer.DefaultCutoffMargin(stage.ProviderTimeout),
			Visibility: client, QueueURL: queueOf, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		fn, err := consumer.NewFunction(consumer.FunctionConfig{Processor: proc, Metrics: metrics.New(nil), MetricsOut: io.Discard,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		invokers = append(invokers, esm.InvokerFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
			var ev events.SQSEvent
			if err := json.Unmarshal(payload, &ev); err != nil {
				return nil, err
			}
			ctx, cancel := context.WithTimeout(ctx, stage.ConsumerTimeout) // Lambda's deadline
			defer cancel()
			resp, err := fn.Handle(ctx, ev)
			if err != nil {
				return nil, err
			}
			return json.Marshal(resp)
		}))
	}
	m, err := esm.New(esm.Config{Queue: client, QueueURL: paced.URL, QueueARN: paced.ARN, BatchSize: paced.BatchSize,
		BatchingWindow: stage.BatchingWindow, Invokers: invokers, PollWait: time.Second, FunctionTimeout: stage.ConsumerTimeout})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	// wall clock: as above
	started := time.Now()
	go func() { defer close(done); m.Run(runCtx) }()
	limit := time.Duration(3*float64(n)/rate*float64(time.Second)) + 30*time.Second
	for {
		mu.Lock()
		sent := len(run.Sends)
		mu.Unlock()
		if sent >= n && m.Stats().Deleted >= int64(n) {
			break
		}
		if time.Since(started) > limit { // wall clock: as above
			stop()
			<-done
			t.Fatalf("after %v: %d of %d sent, mapping %+v", limit, sent, n, m.Stats())
		}
		time.Sleep(20 * time.Millisecond) // wall clock: as above
	}
	stop()
	<-done
	st := m.Stats()
	run.Elapsed = run.Sends[len(run.Sends)-1].at.Sub(started)
	run.Receives, run.Returned, run.Invocations = st.Records+st.UnseenReceives, st.Returned, st.Invocations
	run.Republished, run.DeadLetters = q.republished.Load(), q.deads.Load()
	seen := map[string]bool{}
	for _, s := range run.Sends {
		seen[s.key] = true
	}
	run.Distinct = len(seen)
	return run
}

// TestAPacedBacklogDrainsAtTheRateWithoutChurn: the pacing design's bound.
// A backlog of e-mails due at once drains through ses's own queue,
// each e-mail sent once, with at most 1.2 SQS receives each and
// nothing re-published, never above the rate, in due order within the
// limit's resolution (a batch per instance).
func TestAPacedBacklogDrainsAtTheRateWithoutChurn(t *testing.T) {
	t.Parallel()
	const n, rate = 150, 30.0
	r := drainPaced(t, n, rate)
	t.Logf("%d e-mails at %v/s (batch %d, %d instances): %v (%.2f × N/R), %.2f receives per e-mail, %d returned, %d republished, %d invocations, most in a second %d, order within %v",
		n, rate, r.Queue.BatchSize, r.Queue.MaxConcurrency, r.Elapsed.Round(time.Millisecond), r.DrainRatio(), r.ReceivesPerEmail(), r.Returned,
		r.Republished, r.Invocations, r.MaxIn(time.Second), r.MaxDisplacement())
	if len(r.Sends) != n || r.Distinct != n {
		t.Errorf("%d sends of %d e-mails; want each of the %d sent once", len(r.Sends), r.Distinct, n)
	}
	if r.ReceivesPerEmail() > 1.2 {
		t.Errorf("%.2f SQS receives per e-mail; the bound is 1.2", r.ReceivesPerEmail())
	}
	if r.Republished != 0 || r.DeadLetters != 0 {
		t.Errorf("%d republished, %d dead-lettered; want none", r.Republished, r.DeadLetters)
	}
	// The drain time is measured by BenchmarkPacedBacklog, not asserted
	// here: on a loaded machine, under -race, it is the machine's. A drain
	// much faster than N/R would be pacing broken, which the rate check
	// below catches.
	// Not above the rate, over three seconds: the limiter spaces the
	// records before their claims, so a claim's latency (up to half a
	// second on a loaded machine, against DynamoDB Local) moves a send
	// either way; a burst of one per instance is allowed. Pacing at twice
	// the rate would send the whole backlog inside the window.
	if most := r.MaxIn(3 * time.Second); float64(most) > 3.5*rate+float64(r.Queue.MaxConcurrency) {
		t.Errorf("%d sends in three seconds at %v/s", most, rate)
	}
	// The order: within a batch per instance, plus what a standard queue
	// reorders. The bound asked is "within the limit's resolution"; a
	// batch of 10 at 30/s is a third of a second per instance.
	if d := r.MaxDisplacement(); d > 3*time.Second {
		t.Errorf("an e-mail went %v from its place in due order", d)
	}
}

// BenchmarkPacedBacklog is the pacing benchmark at compressed rates that
// keep the production ratios (docs/performance.md): NUDGE_PACE_N e-mails
// (default 1,000) due at once at NUDGE_PACE_RATE per second (default 20:
// N/R = 50 s), run once:
//
//	go build -o build/nudge ./cmd/nudge && build/nudge local exec -- go test -run '^$' -bench BenchmarkPacedBacklog -benchtime 1x ./internal/local/
func BenchmarkPacedBacklog(b *testing.B) {
	n, rate := 1000, 20.0
	if v := os.Getenv("NUDGE_PACE_N"); v != "" {
		fmt.Sscan(v, &n)
	}
	if v := os.Getenv("NUDGE_PACE_RATE"); v != "" {
		fmt.Sscan(v, &rate)
	}
	for b.Loop() {
		r := drainPaced(b, n, rate)
		b.ReportMetric(r.DrainRatio(), "drain/(N/R)")
		b.ReportMetric(r.ReceivesPerEmail(), "receives/email")
		b.ReportMetric(float64(r.Republished), "republishes")
		b.ReportMetric(r.MaxDisplacement().Seconds(), "max-displacement-s")
		b.ReportMetric(float64(r.MaxIn(time.Second)), "max-sends/s")
		b.Logf("%d e-mails at %v/s, batch %d × %d instances: drained in %v = %.3f × N/R (%v); %.3f receives per e-mail (%d returned); %d republished; %d sent of %d distinct; largest displacement from due order %v; most sends in a second %d; %d invocations",
			n, rate, r.Queue.BatchSize, r.Queue.MaxConcurrency, r.Elapsed.Round(time.Millisecond), r.DrainRatio(),
			time.Duration(float64(n)/rate*float64(time.Second)), r.ReceivesPerEmail(), r.Returned, r.Republished, len(r.Sends), r.Distinct,
			r.MaxDisplacement().Round(time.Millisecond), r.MaxIn(time.Second), r.Invocations)
	}
}
