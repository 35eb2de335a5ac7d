package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/esm"
	"github.com/nudgehq/nudge/internal/local/sink"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/provider/registry"
)

// drainConfig configures a drain: a measurement of the consumer path alone.
// Deliveries due now are in the ledger and their messages on the work queue
// before the mapping starts; the drain times the event source mapping,
// the consumer bootstraps under the emulator, DynamoDB Local and the
// provider until every delivery is accepted, then sends every message a
// second time to count what a recognised duplicate costs.
type drainConfig struct {
	// Deliveries is how many deliveries to drain. Default 500.
	Deliveries int
	// BatchSize is the event source mapping's batch size. Default 10.
	BatchSize int
	// BatchingWindow is the mapping's window. Default none up to a batch
	// of 10, 1s above (Lambda's minimum there).
	BatchingWindow time.Duration
	// Instances is the number of consumer instances (the mapping's
	// maximum concurrency). Default 2.
	Instances int
	// Latency is the provider's answer time, the same for every request.
	// Default none.
	Latency time.Duration
	// Stage names the resources. Default "drain".
	Stage string
	// Dir is the stand-ins' folder (for the emulator). Default
	// standin.DefaultDir().
	Dir string
	// Bootstraps holds consumer/bootstrap and enqueue/bootstrap for this
	// machine. Default "build/local" (local.HarnessConfig's).
	Bootstraps string
	// DynamoDBEndpoint and SQSEndpoint are the running stand-ins. Required.
	DynamoDBEndpoint, SQSEndpoint, SESEndpoint string
}

// drainResult is what a drain measured.
type drainResult struct {
	Deliveries int
	// Elapsed runs from the mapping's start to the provider's last
	// acceptance; PerSecond is Deliveries over it.
	Elapsed   time.Duration
	PerSecond float64
	// Per delivered message: the consumer's DynamoDB requests and write
	// units, and the SQS requests of the consumer and the mapping.
	DynamoDBPerDelivery, WriteUnitsPerDelivery, SQSPerDelivery float64
	// The same per recognised duplicate.
	DynamoDBPerDuplicate, WriteUnitsPerDuplicate, SQSPerDuplicate float64
	// Invocations counts the consumer invocations of the drain.
	Invocations int64
	// ColdStart is a function's start (its emulator's, until it accepted a
	// connection) and its first answered invocation (its runtime's start
	// and the invocation): a one-record batch for the consumer, a schedule
	// tick for the enqueue.
	ConsumerColdStart, EnqueueColdStart time.Duration
	// Init and First split a function's cold start after the emulator's
	// start, as Lambda reports it: the runtime's init (the emulator's INIT
	// REPORT: the Go runtime, the configuration, the clients, the
	// warm-up's connections) and the first invocation (its REPORT's
	// Duration: the consumer's one-record batch, the enqueue's tick).
	ConsumerInit, ConsumerFirst, EnqueueInit, EnqueueFirst time.Duration
	// EmulatorStart is the part of the consumer's cold start spent before
	// the emulator accepted a connection (the runtime starts after that,
	// on the first invocation).
	EmulatorStart time.Duration
	// PeakRSS is the largest runtime peak resident memory, in bytes.
	ConsumerPeakRSS, EnqueuePeakRSS int64
}

// drain runs a drain and returns its figures. It stops what it started.
func drain(ctx context.Context, cfg drainConfig) (drainResult, error) {
	if cfg.Deliveries == 0 {
		cfg.Deliveries = 500
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 10
	}
	if cfg.BatchingWindow == 0 && cfg.BatchSize > 10 {
		cfg.BatchingWindow = time.Second
	}
	if cfg.Instances == 0 {
		cfg.Instances = 2
	}
	if cfg.Stage == "" {
		cfg.Stage = "drain"
	}
	var res drainResult
	if cfg.DynamoDBEndpoint == "" || cfg.SQSEndpoint == "" || cfg.SESEndpoint == "" {
		return res, errors.New("demo: a drain needs running stand-ins: set DynamoDBEndpoint, SQSEndpoint and SESEndpoint (nudge local exec sets AWS_ENDPOINT_URL_*)")
	}
	stage := deployment.Dev()
	stage.Name, stage.BatchSize, stage.BatchingWindow, stage.MaxConcurrency = cfg.Stage, cfg.BatchSize, cfg.BatchingWindow, max(cfg.Instances, 2)
	// A big batch needs records run enough at a time to start them all
	// before the cut-off (deployment.Stage.Validate): half the batch at
	// once fits the stage's two rounds of the provider timeout.
	stage.RecordConcurrency = max(stage.RecordConcurrency, (cfg.BatchSize+1)/2)
	sys, err := local.Start(ctx, local.Config{Stage: stage, Dir: cfg.Dir,
		DynamoDBEndpoint: cfg.DynamoDBEndpoint, SQSEndpoint: cfg.SQSEndpoint, SESEndpoint: cfg.SESEndpoint,
		Plan: func(string, int) sink.Fault { return sink.Fault{Kind: "ok", Delay: cfg.Latency} }})
	if err != nil {
		return res, err
	}
	defer sys.Close()
	outputs := map[string]*reportLog{"consumer-1": {}, "enqueue": {}}
	h, err := sys.StartHarness(ctx, local.HarnessConfig{Bootstraps: cfg.Bootstraps, Consumers: cfg.Instances, PollWait: time.Second,
		Output: func(name string) io.Writer {
			if l, ok := outputs[name]; ok {
				return l
			}
			return nil
		}})
	if err != nil {
		return res, err
	}
	defer h.Close()
	led, err := ledger.New(h.DB, ledger.Config{Table: h.Resources.Table, Shards: stage.Shards})
	if err != nil {
		return res, err
	}

	// The deliveries, due now, and their messages.
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	now := time.Now().UTC().Add(-time.Second)
	bodies, err := seedQueued(ctx, led, "rem-drain", cfg.Deliveries+1, now)
	if err != nil {
		return res, err
	}
	cold, bodies := bodies[0], bodies[1:]

	// Cold start: the first instance's start, and its first answered
	// batch.
	first := h.Consumers[0]
	res.EmulatorStart = first.Startup
	ev, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: "cold-1", ReceiptHandle: "cold-1", Body: cold, EventSource: "aws:sqs",
		EventSourceARN: h.Resources.WorkARN, Attributes: map[string]string{"ApproximateReceiveCount": "1"}}}})
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	invoked := time.Now()
	out, err := first.Invoke(ctx, ev)
	if _, ferr := esm.Acknowledged(events.SQSEvent{Records: []events.SQSMessage{{MessageId: "cold-1"}}}, out); err != nil || ferr != nil {
		return res, fmt.Errorf("demo: the cold invocation failed: %v %v: %s", err, ferr, out)
	}
	res.ConsumerColdStart = first.Startup + time.Since(invoked)
	res.ConsumerInit, res.ConsumerFirst = outputs["consumer-1"].firstReport()
	if err := sendBodies(ctx, h.SQS, h.Resources.WorkURL, bodies); err != nil {
		return res, err
	}
	base := snapshotCounts(h.Proxies)

	// The drain.
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); h.Mapping.Run(runCtx) }()
	defer func() { stop(); wg.Wait() }()
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	started := time.Now()
	want := cfg.Deliveries + 1
	if err := waitFor(ctx, 10*time.Minute, func() bool { n, _ := h.Sink.Totals(); return n >= want }); err != nil {
		n, _ := h.Sink.Totals()
		return res, fmt.Errorf("demo: %d of %d deliveries accepted: %w", n-1, cfg.Deliveries, err)
	}
	res.Deliveries, res.Elapsed = cfg.Deliveries, time.Since(started)
	res.PerSecond = float64(cfg.Deliveries) / res.Elapsed.Seconds()
	// Let the mapping delete the last batches before counting.
	if err := waitFor(ctx, time.Minute, func() bool { st := h.Mapping.Stats(); return st.Deleted >= int64(cfg.Deliveries) }); err != nil {
		return res, fmt.Errorf("demo: the mapping deleted %d of %d: %w", h.Mapping.Stats().Deleted, cfg.Deliveries, err)
	}
	st := h.Mapping.Stats()
	delivered := snapshotCounts(h.Proxies)
	n := float64(cfg.Deliveries)
	res.DynamoDBPerDelivery = float64(delivered.ddb-base.ddb) / n
	res.WriteUnitsPerDelivery = (delivered.wcu - base.wcu) / n
	res.SQSPerDelivery = float64(delivered.sqs-base.sqs+st.ReceiveRequests+st.DeleteRequests) / n
	res.Invocations = st.Invocations

	// Every message again: each is a recognised duplicate.
	if err := sendBodies(ctx, h.SQS, h.Resources.WorkURL, bodies); err != nil {
		return res, err
	}
	if err := waitFor(ctx, 5*time.Minute, func() bool { return h.Mapping.Stats().Deleted >= 2*int64(cfg.Deliveries) }); err != nil {
		return res, fmt.Errorf("demo: duplicates: %w", err)
	}
	st2 := h.Mapping.Stats()
	dup := snapshotCounts(h.Proxies)
	res.DynamoDBPerDuplicate = float64(dup.ddb-delivered.ddb) / n
	res.WriteUnitsPerDuplicate = (dup.wcu - delivered.wcu) / n
	res.SQSPerDuplicate = float64(dup.sqs-delivered.sqs+st2.ReceiveRequests+st2.DeleteRequests-st.ReceiveRequests-st.DeleteRequests) / n
	if accepted, _ := h.Sink.Totals(); accepted != want || len(h.Sink.Resent()) > 0 {
		return res, fmt.Errorf("demo: the provider accepted %d deliveries and saw %d sent again; want %d and none", accepted, len(h.Sink.Resent()), want)
	}
	for _, fn := range h.Consumers {
		if rss, err := fn.PeakRSS(); err == nil {
			res.ConsumerPeakRSS = max(res.ConsumerPeakRSS, rss)
		}
	}

	// The enqueue's cold start, on the drained table: a tick with nothing
	// to hand off, its first invocation.
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	invoked = time.Now()
	out, err = h.Enqueue.Invoke(ctx, []byte(`{"source":"aws.scheduler","scheduledTime":"`+time.Now().UTC().Format(time.RFC3339)+`"}`))
	if err != nil || strings.Contains(string(out), "errorType") {
		return res, fmt.Errorf("demo: the enqueue's first tick failed: %v: %s", err, out)
	}
	res.EnqueueColdStart = h.Enqueue.Startup + time.Since(invoked)
	res.EnqueueInit, res.EnqueueFirst = outputs["enqueue"].firstReport()
	res.EnqueuePeakRSS, _ = h.Enqueue.PeakRSS()
	return res, nil
}

// seedQueued creates n queued deliveries due at due and returns their
// message bodies.
func seedQueued(ctx context.Context, led *ledger.Ledger, prefix string, n int, due time.Time) ([]string, error) {
	bodies := make([]string, n)
	errs := make(chan error, n)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				d := ledger.Delivery{ReminderID: fmt.Sprintf("%s-%06d", prefix, i), Channel: "email", Provider: registry.Default(),
					RecipientRef: "acct-bench/contact", TemplateRef: "renewal-notice-v3", DueAt: due, ExpiresAt: due.Add(time.Hour), Status: ledger.StatusQueued}
				if err := led.Create(ctx, d); err != nil {
					errs <- err
					continue
				}
				body, err := message.Encode(message.Message{ReminderID: d.ReminderID, Channel: d.Channel, Provider: d.Provider, DueAt: due})
				if err != nil {
					errs <- err
					continue
				}
				bodies[i] = string(body)
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("demo: seed the drain: %w", err)
	}
	return bodies, nil
}

// sendBodies puts the bodies on the queue, ten to a request.
func sendBodies(ctx context.Context, q *sqs.Client, url string, bodies []string) error {
	for start := 0; start < len(bodies); start += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i, b := range bodies[start:min(start+10, len(bodies))] {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(b)})
		}
		out, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			return fmt.Errorf("demo: send: %w", err)
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("demo: send refused %d messages: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
		}
	}
	return nil
}

// counts are the consumers' proxies' totals at one moment.
type counts struct {
	ddb, sqs int64
	wcu      float64
}

func snapshotCounts(p map[string]*standin.Proxy) counts {
	_, w := p["consumer DynamoDB"].Units()
	return counts{ddb: p["consumer DynamoDB"].Total(), sqs: p["consumer SQS"].Total(), wcu: w}
}

// waitFor polls done every 20 ms until it is true or limit passes.
func waitFor(ctx context.Context, limit time.Duration, done func() bool) error {
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	deadline := time.Now().Add(limit)
	for !done() {
		// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %v", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// reportLog keeps a function instance's output, for its emulator's
// INIT REPORT and REPORT lines.
type reportLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *reportLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

var (
	initReport  = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)
	firstReport = regexp.MustCompile(`REPORT RequestId: [^\n]*?\tDuration: ([0-9.]+) ms`)
)

// firstReport returns the runtime's init duration and the first
// invocation's, as the emulator reported them (0 where it did not).
func (l *reportLog) firstReport() (init, first time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ms := func(re *regexp.Regexp) time.Duration {
		m := re.FindStringSubmatch(l.b.String())
		if m == nil {
			return 0
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return time.Duration(v * float64(time.Millisecond))
	}
	return ms(initReport), ms(firstReport)
}
