package demo

// Isolation between providers, on the whole local system: the webhook's
// sink hangs on every request (until the consumer's provider timeout) while
// SES and SNS deliveries flow through fault fronts that note when each was
// accepted. The consumer's circuit for the webhook opens, and its records
// wait; the others are sent as if nothing happened.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/sink"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
)

// isoChannels are the channels of the run's deliveries, by provider.
var isoChannels = map[string]string{"webhook": "webhook", "ses": "email", "sns": "push"}

// isoRig is the local system with the three providers, the webhook's sink
// hanging while hanging is set, and the time each delivery was accepted.
type isoRig struct {
	h        *local.Harness
	led      *ledger.Ledger
	ses, sns *standin.FaultFront
	hanging  atomic.Bool
	logs     *lockedBuffer

	mu       sync.Mutex
	accepted map[string]time.Time // by delivery key, at SES's and SNS's fronts
	due      map[string]time.Time // by delivery key
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startIsoRig starts the system: two consumer instances, the stage's
// timings (a 10 s provider timeout), no rate limits, and the consumers'
// environment overrides.
func startIsoRig(tb testing.TB, overrides ...string) *isoRig {
	tb.Helper()
	standintest.AWSConfig(tb)
	bins := standintest.Bootstraps(tb, "consumer", "enqueue", "outcomes", "feedback")
	ctx := context.Background()
	// Stand-ins of its own: DynamoDB Local slows with every write it has
	// taken since it started, whatever table took it (a ledger claim's
	// p50 was 14 ms at first, 103 ms after 2,000 deliveries were created,
	// claimed and completed, 180 ms after 4,000, their tables deleted or
	// not), so a run after another would measure the one before it.
	dir, err := standin.DefaultDir()
	if err != nil {
		tb.Fatal(err)
	}
	stack, err := standin.Up(ctx, dir, io.Discard)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stack.Stop)
	stage := local.StandInStage(deployment.Dev())
	stage.Name = strings.TrimPrefix(standintest.Name("iso"), "iso-")
	stage.MaxConcurrency = 2
	stage.Rates = map[string]float64{"ses": 0, "sns": 0, "webhook": 0}
	r := &isoRig{accepted: map[string]time.Time{}, due: map[string]time.Time{}, logs: &lockedBuffer{}}
	sys, err := local.Start(ctx, local.Config{Stage: stage,
		DynamoDBEndpoint: stack.DynamoDB.Endpoint, SQSEndpoint: stack.SQS.Endpoint, SESEndpoint: stack.SES.Endpoint,
		Plan: func(string, int) sink.Fault {
			if r.hanging.Load() {
				return sink.Fault{Kind: "hang"}
			}
			return sink.Fault{Kind: "ok"}
		}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(sys.Close)
	note := func(key func([]byte) string) func([]byte, int) {
		return func(body []byte, status int) {
			// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
			now := time.Now()
			if k := key(body); k != "" && status == http.StatusOK {
				r.mu.Lock()
				if _, ok := r.accepted[k]; !ok {
					r.accepted[k] = now
				}
				r.mu.Unlock()
			}
		}
	}
	if r.ses, err = standin.NewFaultFront(sys.SESSendEndpoint(), func(*http.Request, []byte) *standin.Fault { return nil }); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.ses.Close() })
	if r.sns, err = standin.NewFaultFront(sys.SQSEndpoint, func(*http.Request, []byte) *standin.Fault { return nil }); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.sns.Close() })
	r.ses.OnAnswer, r.sns.OnAnswer = note(sesKey), note(snsKey)
	r.h, err = sys.StartHarness(ctx, local.HarnessConfig{Bootstraps: bins, Consumers: 2, PollWait: time.Second,
		ConsumerFronts: local.Endpoints{SES: r.ses.Endpoint, SNS: r.sns.Endpoint}, ConsumerOverrides: overrides,
		Output: func(name string) io.Writer {
			if strings.HasPrefix(name, "consumer") {
				return r.logs
			}
			return nil
		}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.h.Close)
	if r.led, err = ledger.New(r.h.DB, ledger.Config{Table: r.h.Resources.Table, Shards: stage.Shards}); err != nil {
		tb.Fatal(err)
	}
	return r
}

// run runs the mapping until ctx ends.
func (r *isoRig) run(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.h.RunMappings(ctx) }() // every work queue's, as the stack runs them
	return func() { cancel(); <-done }
}

// isoDelivery is one delivery of the run.
type isoDelivery struct {
	key  message.DeliveryKey
	due  time.Time
	body string
	item ledger.Delivery
}

// seed creates n deliveries of each provider, the i-th of each due at
// start + i/perSecond, in the ledger, and returns them in due order.
func (r *isoRig) seed(ctx context.Context, prefix string, n int, perSecond float64, start time.Time) ([]isoDelivery, error) {
	var out []isoDelivery
	for i := range n {
		due := start.Add(time.Duration(float64(i) / perSecond * float64(time.Second)))
		for _, prov := range []string{"webhook", "ses", "sns"} {
			d := ledger.Delivery{ReminderID: fmt.Sprintf("%s-%s-%05d", prefix, prov, i), Channel: isoChannels[prov], Provider: prov,
				RecipientRef: "acct-iso/contact", TemplateRef: "renewal-notice-v3", DueAt: due, ExpiresAt: due.Add(time.Hour), Status: ledger.StatusQueued}
			if prov == "ses" {
				d.TemplateRef, d.Address = "renewal-notice", d.ReminderID+"@customers.example"
			}
			body, err := message.Encode(message.Message{ReminderID: d.ReminderID, Channel: d.Channel, Provider: prov, DueAt: due})
			if err != nil {
				return nil, err
			}
			out = append(out, isoDelivery{key: d.Key(), due: due, body: string(body), item: d})
			r.mu.Lock()
			r.due[d.Key().String()] = due
			r.mu.Unlock()
		}
	}
	errs := make(chan error, len(out))
	jobs := make(chan isoDelivery)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range jobs {
				if err := r.led.Create(ctx, d.item); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, d := range out {
		jobs <- d
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	return out, nil
}

// feed puts each delivery's message on the work queue at its due time
// (or at once, if that has passed), ten at a time, as the enqueue's
// hand-off makes it visible then.
func (r *isoRig) feed(ctx context.Context, ds []isoDelivery) error {
	for len(ds) > 0 {
		// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
		now := time.Now()
		n := 0
		for n < len(ds) && n < 10 && !ds[n].due.After(now) {
			n++
		}
		if n == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(ds[0].due.Sub(now), 50*time.Millisecond)):
			}
			continue
		}
		// Each to its provider's work queue, as the enqueue publishes.
		byQueue := map[string][]sqstypes.SendMessageBatchRequestEntry{}
		for i, d := range ds[:n] {
			url := r.h.Resources.WorkURL
			if q, ok := r.h.Resources.Own[d.key.Provider]; ok {
				url = q.URL
			}
			byQueue[url] = append(byQueue[url], sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(d.body)})
		}
		for url, entries := range byQueue {
			out, err := r.h.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
			if err != nil {
				return err
			}
			if len(out.Failed) > 0 {
				return fmt.Errorf("feed: %d refused: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
			}
		}
		ds = ds[n:]
	}
	return nil
}

// acceptedAt is when the provider accepted the delivery: the SES or SNS
// front's answer, or the sink's acceptance.
func (r *isoRig) acceptedAt(k message.DeliveryKey) (time.Time, bool) {
	if k.Provider == "webhook" {
		a, ok := r.h.Sink.Accepted(k.String())
		return a.At, ok
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.accepted[k.String()]
	return t, ok
}

// allAccepted reports whether every delivery of ds whose provider is in
// provs was accepted.
func (r *isoRig) allAccepted(ds []isoDelivery, provs ...string) bool {
	for _, d := range ds {
		if slices.Contains(provs, d.key.Provider) {
			if _, ok := r.acceptedAt(d.key); !ok {
				return false
			}
		}
	}
	return true
}

// circuitLines returns the consumers' "provider circuit" lines.
func (r *isoRig) circuitLines() []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(r.logs.String(), "\n") {
		if !strings.Contains(line, `"msg":"provider circuit"`) {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestAHangingWebhookWaitsAndTheOthersAreSent: with the webhook hanging
// on every request, every SES and SNS delivery is sent; the webhook's
// circuit opens, and its deliveries wait (none dead-lettered, none sent
// twice) until the webhook answers again, when every one is sent. The
// cool-down is shortened to 2 s so that the probe comes soon; nothing
// here asserts on time.
func TestAHangingWebhookWaitsAndTheOthersAreSent(t *testing.T) {
	r := startIsoRig(t, "NUDGE_CIRCUIT_COOLDOWN=2s", "NUDGE_CIRCUIT_MAX_COOLDOWN=4s")
	ctx := context.Background()
	r.hanging.Store(true)
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	ds, err := r.seed(ctx, "rem-iso", 30, 5, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer r.run(ctx)()
	if err := r.feed(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, 3*time.Minute, func() bool { return r.allAccepted(ds, "ses", "sns") }); err != nil {
		t.Fatalf("SES and SNS deliveries while the webhook hangs: %v", err)
	}
	// With a queue of its own, the webhook holds only its own instances:
	// SES and SNS may be done before its circuit has seen five hung sends.
	opened := func() bool {
		for _, l := range r.circuitLines() {
			if l["provider"] == "webhook" && l["to"] == "open" {
				return true
			}
		}
		return false
	}
	if err := waitFor(ctx, 3*time.Minute, opened); err != nil {
		t.Fatalf("the webhook's circuit never opened (%v); consumer log:\n%s", err, r.logs.String())
	}
	for _, d := range ds {
		if d.key.Provider != "webhook" {
			continue
		}
		got, err := r.led.Get(ctx, d.key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == ledger.StatusDead || got.Status == ledger.StatusSent {
			t.Fatalf("%s is %s while the webhook hangs; want it waiting", d.key, got.Status)
		}
	}
	r.hanging.Store(false)
	if err := waitFor(ctx, 3*time.Minute, func() bool { return r.allAccepted(ds, "webhook") }); err != nil {
		t.Fatalf("webhook deliveries after it recovered: %v", err)
	}
	for _, d := range ds {
		if err := waitFor(ctx, time.Minute, func() bool {
			got, err := r.led.Get(ctx, d.key)
			return err == nil && got.Status == ledger.StatusSent
		}); err != nil {
			got, _ := r.led.Get(ctx, d.key)
			t.Fatalf("%s is %s, want sent", d.key, got.Status)
		}
	}
	if resent := r.h.Sink.Resent(); len(resent) > 0 {
		t.Fatalf("the webhook was sent some deliveries twice after accepting them: %v", resent)
	}
	visible, err := r.h.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(r.h.Resources.DLQURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	if n := visible.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]; n != "0" {
		t.Fatalf("%s messages in the DLQ; want none", n)
	}
	var closed bool
	for _, l := range r.circuitLines() {
		closed = closed || l["provider"] == "webhook" && l["to"] == "closed"
	}
	if !closed {
		t.Fatal("no line says the webhook's circuit closed")
	}
}

// isoResult is what one isolation run measured of the SES and SNS
// deliveries.
type isoResult struct {
	// Stream: deliveries due at a steady rate after the warm-up, due →
	// accepted.
	StreamP50, StreamP99, StreamMax time.Duration
	StreamSent                      int
	// WarmupMax is the worst lateness during the warm-up (the circuits
	// opening, with the webhook hanging).
	WarmupMax time.Duration
	// Burst: a backlog due at once, drained at PerSecond.
	BurstPerSecond float64
	// Opened counts the webhook circuit's openings in the consumers' logs;
	// WebhookRequests the requests the webhook received.
	Opened, WebhookRequests int
}

// isolation runs a warm-up stream (in which a hanging webhook opens the
// consumers' circuits), a measured stream, then a backlog due at once, and
// measures the SES and SNS deliveries.
func isolation(tb testing.TB, hang bool) isoResult {
	const perSecond, warmup, stream, burst = 8.0, 20 * time.Second, 40 * time.Second, 300
	r := startIsoRig(tb)
	r.hanging.Store(hang)
	ctx := context.Background()
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	start := time.Now().Add(15 * time.Second) // after the seeding
	nWarm, nStream := int(perSecond*warmup.Seconds()), int(perSecond*stream.Seconds())
	warm, err := r.seed(ctx, "rem-warm", nWarm, perSecond, start)
	if err != nil {
		tb.Fatal(err)
	}
	steady, err := r.seed(ctx, "rem-steady", nStream, perSecond, start.Add(warmup))
	if err != nil {
		tb.Fatal(err)
	}
	defer r.run(ctx)()
	if err := r.feed(ctx, append(warm, steady...)); err != nil {
		tb.Fatal(err)
	}
	if err := waitFor(ctx, 5*time.Minute, func() bool { return r.allAccepted(steady, "ses", "sns") }); err != nil {
		tb.Fatalf("stream: %v", err)
	}
	var res isoResult
	var late []time.Duration
	for _, d := range warm {
		if at, ok := r.acceptedAt(d.key); ok && d.key.Provider != "webhook" {
			res.WarmupMax = max(res.WarmupMax, at.Sub(d.due))
		}
	}
	for _, d := range steady {
		if d.key.Provider == "webhook" {
			continue
		}
		at, _ := r.acceptedAt(d.key)
		late = append(late, at.Sub(d.due))
	}
	slices.Sort(late)
	res.StreamSent = len(late)
	res.StreamP50, res.StreamP99, res.StreamMax = late[len(late)/2], late[(len(late)*99+99)/100-1], late[len(late)-1]

	// The backlog: burst deliveries of each provider due now, on the queue
	// at once.
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	now := time.Now()
	backlog, err := r.seed(ctx, "rem-burst", burst, 1e9, now)
	if err != nil {
		tb.Fatal(err)
	}
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	began := time.Now()
	if err := r.feed(ctx, backlog); err != nil {
		tb.Fatal(err)
	}
	if err := waitFor(ctx, 5*time.Minute, func() bool { return r.allAccepted(backlog, "ses", "sns") }); err != nil {
		tb.Fatalf("backlog: %v", err)
	}
	var last time.Time
	for _, d := range backlog {
		if at, ok := r.acceptedAt(d.key); ok && d.key.Provider != "webhook" && at.After(last) {
			last = at
		}
	}
	res.BurstPerSecond = float64(2*burst) / last.Sub(began).Seconds()
	for _, l := range r.circuitLines() {
		if l["provider"] == "webhook" && l["to"] == "open" {
			res.Opened++
		}
	}
	res.WebhookRequests = r.h.Sink.RequestTotal()
	return res
}

// BenchmarkProviderIsolation measures SES and SNS deliveries with a
// healthy webhook and with one that hangs on every request until the
// consumer's 10 s provider timeout: two consumer instances, batches of 10,
// the stage's timings, 8 deliveries a second of each provider (a 20 s
// warm-up, then 40 s measured: due → accepted p50/p99/max), then a
// backlog of 300 of each due at once (SES and SNS drained per second).
func BenchmarkProviderIsolation(b *testing.B) {
	for _, hang := range []bool{false, true} {
		name := "webhook=healthy"
		if hang {
			name = "webhook=hanging"
		}
		b.Run(name, func(b *testing.B) {
			var r isoResult
			for range b.N {
				r = isolation(b, hang)
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(r.StreamP50), "others-p50-ms")
			b.ReportMetric(ms(r.StreamP99), "others-p99-ms")
			b.ReportMetric(ms(r.StreamMax), "others-max-ms")
			b.ReportMetric(ms(r.WarmupMax), "warmup-max-ms")
			b.ReportMetric(r.BurstPerSecond, "others-backlog/s")
			b.ReportMetric(float64(r.Opened), "circuit-opened")
			b.ReportMetric(float64(r.WebhookRequests), "webhook-requests")
		})
	}
}
