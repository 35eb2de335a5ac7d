package consumer_test

// The failure table of the design, against DynamoDB Local, fauxqs and the
// provider sink. Time is a fake clock; the queue is real.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/provider/webhook"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/awsclient"
	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/batchtest"
	"github.com/nudgehq/nudge/internal/local/sink"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/internal/retry"
	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/heartbeat"
	"github.com/nudgehq/nudge/pkg/provider"
)

var secret = []byte("test-secret-0123456789")

type bundle struct {
	t        testing.TB
	counter  *standin.Counter
	ctx      context.Context
	clk      *clock.Fake
	sqs      *sqs.Client
	q        standintest.Queues
	ledger   *ledger.Ledger
	sink     *sink.Sink
	fn       *consumer.Function
	metrics  *metrics.Recorder
	logs     *syncBuffer
	provider provider.Provider
	// deadline, when set, is the invocation deadline the processor sees.
	deadline time.Time
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type options struct {
	script      string
	maxAttempts int
	concurrency int
	wrapLedger  func(consumer.Ledger) consumer.Ledger
	wrapSend    func(provider.Provider) provider.Provider
	visibility  time.Duration
	heartbeat   bool
	middleware  []batch.Middleware // inside the heartbeat's
}

func setup(t testing.TB, o options) *bundle {
	t.Helper()
	if tt, ok := t.(*testing.T); ok {
		tt.Parallel()
	}
	b := &bundle{t: t, ctx: context.Background(), logs: &syncBuffer{}, counter: &standin.Counter{}}
	b.clk = clock.NewFake(time.Now().UTC().Truncate(time.Second))
	cfg := standintest.AWSConfig(t)
	b.counter.Attach(&cfg)
	db := awsclient.DynamoDB(cfg)
	b.sqs = awsclient.SQS(cfg)
	if o.visibility == 0 {
		o.visibility = 30 * time.Second
	}
	b.q = standintest.QueuePair(t, b.sqs, o.visibility, 10)
	var err error
	b.ledger, err = ledger.New(db, ledger.Config{Table: standintest.Table(t, db), Clock: b.clk})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sink.ParseScript(o.script)
	if err != nil {
		t.Fatal(err)
	}
	b.sink = &sink.Sink{Secret: secret, Plan: plan}
	srv := httptest.NewServer(b.sink)
	t.Cleanup(srv.Close)
	hook, err := webhook.New(webhook.Config{URL: srv.URL, Secret: secret, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b.provider = hook
	if o.wrapSend != nil {
		b.provider = o.wrapSend(hook)
	}
	backoff, _ := retry.New(retry.Config{Base: 10 * time.Second, Cap: time.Hour, Rand: func() float64 { return 0.5 }})
	var l consumer.Ledger = b.ledger
	if o.wrapLedger != nil {
		l = o.wrapLedger(l)
	}
	log := slog.New(slog.NewJSONHandler(b.logs, nil))
	var hb *heartbeat.Heartbeat
	if o.heartbeat { // real time: visibility is real in the queue
		hb, err = heartbeat.New(heartbeat.Config{Visibility: b.sqs, Extension: 2 * o.visibility, Threshold: o.visibility / 4, Interval: o.visibility / 2, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
	}
	b.metrics = metrics.New(map[string]string{"Function": "consumer"})
	c, err := consumer.New(consumer.Config{
		Ledger: l, Providers: map[string]provider.Provider{"webhook": b.provider, "ses": accepts},
		Queue: b.sqs, QueueURL: b.q.WorkURL, DLQURL: b.q.DLQURL,
		MaxAttempts: o.maxAttempts, MaxReceiveCount: 10, Backoff: backoff,
		Clock: b.clk, Logger: log, Metrics: b.metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	var mw []batch.Middleware
	if hb != nil {
		mw = append(mw, hb.Middleware(func(events.SQSMessage) string { return b.q.WorkURL }))
	}
	mw = append(mw, o.middleware...)
	proc, err := batch.New(c, batch.Config{
		Concurrency: o.concurrency, Visibility: b.sqs, Clock: b.clk, Logger: log, Middleware: mw,
		QueueURL: func(string) string { return b.q.WorkURL },
		Deadline: func(context.Context) (time.Time, bool) { return b.deadline, !b.deadline.IsZero() },
	})
	if err != nil {
		t.Fatal(err)
	}
	b.fn, err = consumer.NewFunction(consumer.FunctionConfig{Processor: proc, Metrics: b.metrics, MetricsOut: b.logs, Clock: b.clk, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", b.logs.String())
		}
	})
	return b
}

// schedule creates a queued delivery due at dueAt and publishes its message.
func (b *bundle) schedule(id string, dueAt time.Time) message.DeliveryKey {
	b.t.Helper()
	d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", RecipientRef: "acct-1/contact-" + id, TemplateRef: "renewal-v3",
		DueAt: dueAt, ExpiresAt: dueAt.Add(24 * time.Hour), Status: ledger.StatusQueued}
	if err := b.ledger.Create(b.ctx, d); err != nil {
		b.t.Fatal(err)
	}
	b.publish(b.body(id, dueAt))
	return d.Key()
}

// accepts stands for a provider that sends everything (SES, in the cost
// tests: what is measured is the ledger's side).
var accepts = provider.Func(func(context.Context, provider.Request, string) (provider.Receipt, error) {
	return provider.Receipt{ID: "0100018c-accepted"}, nil
})

func (b *bundle) body(id string, dueAt time.Time) string {
	body, err := message.Encode(message.Message{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: dueAt})
	if err != nil {
		b.t.Fatal(err)
	}
	return string(body)
}

func (b *bundle) publish(body string) {
	b.t.Helper()
	if _, err := b.sqs.SendMessage(b.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(b.q.WorkURL), MessageBody: aws.String(body)}); err != nil {
		b.t.Fatal(err)
	}
}

// receive collects want records from the work queue, as the event source
// mapping would hand them to one invocation.
func (b *bundle) receive(want int) events.SQSEvent {
	b.t.Helper()
	var ev events.SQSEvent
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := batchtest.Receive(b.ctx, b.sqs, b.q.WorkURL, b.q.WorkARN, int32(max(want-len(ev.Records), 1)), 0)
		if err != nil {
			b.t.Fatal(err)
		}
		ev.Records = append(ev.Records, got.Records...)
		if len(ev.Records) >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(ev.Records) != want {
		b.t.Fatalf("received %d records, want %d", len(ev.Records), want)
	}
	return ev
}

// poll does what the event source mapping does once: receive a batch,
// invoke, delete what succeeded. It returns the event and the response.
func (b *bundle) poll(want int) (events.SQSEvent, events.SQSEventResponse) {
	b.t.Helper()
	ev := b.receive(want)
	resp, err := b.fn.Handle(b.ctx, ev)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := batchtest.Acknowledge(b.ctx, b.sqs, b.q.WorkURL, ev, resp); err != nil {
		b.t.Fatal(err)
	}
	return ev, resp
}

// expireVisibility makes the given records visible again now, standing in
// for their visibility timeout or backoff having passed.
func (b *bundle) expireVisibility(ev events.SQSEvent, resp events.SQSEventResponse) {
	b.t.Helper()
	for _, f := range resp.BatchItemFailures {
		for _, r := range ev.Records {
			if r.MessageId == f.ItemIdentifier {
				if _, err := b.sqs.ChangeMessageVisibility(b.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(b.q.WorkURL), ReceiptHandle: aws.String(r.ReceiptHandle), VisibilityTimeout: 0}); err != nil {
					b.t.Fatal(err)
				}
			}
		}
	}
}

func (b *bundle) delivery(k message.DeliveryKey) ledger.Delivery {
	b.t.Helper()
	d, err := b.ledger.Get(b.ctx, k)
	if err != nil {
		b.t.Fatal(err)
	}
	return d
}

func (b *bundle) queueDepth(url string) (visible, delayed, inFlight int) {
	b.t.Helper()
	out, err := b.sqs.GetQueueAttributes(b.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		b.t.Fatal(err)
	}
	var n [3]int
	for i, a := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed", "ApproximateNumberOfMessagesNotVisible"} {
		fmt.Sscan(out.Attributes[a], &n[i])
	}
	return n[0], n[1], n[2]
}

func (b *bundle) dlq() []types.Message {
	b.t.Helper()
	// A receive whose answer was lost (fauxqs under make test's load; the
	// SDK retries it) hides its messages for their visibility timeout: while
	// the queue still counts any, read again (docs/reliability.md, "Found by
	// the chaos run").
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := b.sqs.ReceiveMessage(b.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(b.q.DLQURL), MaxNumberOfMessages: 10,
			MessageAttributeNames: []string{"All"}, VisibilityTimeout: 5, WaitTimeSeconds: 1})
		if err != nil {
			b.t.Fatal(err)
		}
		if len(out.Messages) > 0 {
			return out.Messages
		}
		a, err := b.sqs.GetQueueAttributes(b.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(b.q.DLQURL), AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			b.t.Fatal(err)
		}
		if a.Attributes["ApproximateNumberOfMessages"] == "0" && a.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0" || time.Now().After(deadline) {
			return nil
		}
	}
}

func attr(m types.Message, name string) string {
	return aws.ToString(m.MessageAttributes[name].StringValue)
}

func failures(resp events.SQSEventResponse) int { return len(resp.BatchItemFailures) }

func TestHappyPathSendsOnceWithTwoLedgerWrites(t *testing.T) {
	b := setup(t, options{})
	k := b.schedule("rem-1", b.clk.Now())
	_, resp := b.poll(1)
	if failures(resp) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	d := b.delivery(k)
	if d.Status != ledger.StatusSent || d.Receipt != "sink-1" || b.sink.Sends(k.String()) != 1 {
		t.Fatalf("delivery %+v, sink sends %d", d, b.sink.Sends(k.String()))
	}
	if a, _ := b.sink.Accepted(k.String()); a.Request.RecipientRef != "acct-1/contact-rem-1" {
		t.Fatalf("provider got %+v", a.Request)
	}
	if v, _, f := b.queueDepth(b.q.WorkURL); v+f != 0 {
		t.Fatalf("work queue still holds %d messages", v+f)
	}
	if b.metrics.Count(consumer.MetricSent) != 0 || !strings.Contains(b.logs.String(), `"Sent":1`) {
		t.Fatalf("EMF line missing or metrics not flushed:\n%s", b.logs.String())
	}
	if strings.Contains(b.logs.String(), "acct-1/contact") {
		t.Fatal("a recipient reference reached the logs")
	}
	// The transition line carries the due time; the metric is split by
	// channel beside the function.
	if !strings.Contains(b.logs.String(), `"dueAt":"`+ledger.Format(d.DueAt)+`"`) || !strings.Contains(b.logs.String(), `"Channel":"email"`) ||
		!strings.Contains(b.logs.String(), `[["Function"],["Function","Channel"]]`) {
		t.Fatalf("the transition's dueAt or the metric's channel split is missing:\n%s", b.logs.String())
	}
}

func TestCrashBeforeAcknowledgeIsRedeliveredWithoutASecondSend(t *testing.T) {
	b := setup(t, options{})
	k := b.schedule("rem-2", b.clk.Now())
	ev, _ := batchtest.Receive(b.ctx, b.sqs, b.q.WorkURL, b.q.WorkARN, 1, 0)
	if _, err := b.fn.Handle(b.ctx, ev); err != nil { // sent, then the process dies: no delete
		t.Fatal(err)
	}
	b.expireVisibility(ev, events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: ev.Records[0].MessageId}}})
	_, resp := b.poll(1)
	if failures(resp) != 0 || b.sink.Requests(k.String()) != 1 || b.metrics.Count(consumer.MetricDuplicate) != 0 {
		t.Fatalf("failures %v, sink requests %d", resp.BatchItemFailures, b.sink.Requests(k.String()))
	}
	if !strings.Contains(b.logs.String(), `"outcome":"duplicate"`) {
		t.Fatal("redelivery not recognised as a duplicate")
	}
}

// failComplete fails the ledger's Complete once: the provider accepted, then
// the consumer died before recording it.
type failComplete struct {
	consumer.Ledger
	once sync.Once
}

func (f *failComplete) Complete(ctx context.Context, d ledger.Delivery, receipt string) (ledger.Delivery, error) {
	var err error
	f.once.Do(func() { err = errors.New("crash after the provider accepted") })
	if err != nil {
		return ledger.Delivery{}, err
	}
	return f.Ledger.Complete(ctx, d, receipt)
}

func TestCrashAfterProviderAcceptedReusesTheIdempotencyKey(t *testing.T) {
	b := setup(t, options{wrapLedger: func(l consumer.Ledger) consumer.Ledger { return &failComplete{Ledger: l} }})
	k := b.schedule("rem-3", b.clk.Now())
	ev, resp := b.poll(1)
	if failures(resp) != 1 {
		t.Fatalf("the unrecorded send was acknowledged: %v", resp)
	}
	b.clk.Advance(6 * time.Minute) // the dead attempt's lease lapses
	b.expireVisibility(ev, resp)
	_, resp = b.poll(1)
	a, _ := b.sink.Accepted(k.String())
	if failures(resp) != 0 || b.delivery(k).Status != ledger.StatusSent || b.sink.Sends(k.String()) != 1 || a.Repeats != 1 {
		t.Fatalf("failures %v, status %s, sink %+v", resp.BatchItemFailures, b.delivery(k).Status, a)
	}
}

func TestAcceptedThenConnectionDroppedIsOneLogicalSend(t *testing.T) {
	b := setup(t, options{script: "rem-4=drop"})
	k := b.schedule("rem-4", b.clk.Now())
	ev, resp := b.poll(1)
	if failures(resp) != 1 || b.delivery(k).Status != ledger.StatusRetrying {
		t.Fatalf("ambiguous failure: failures %v, status %s", resp.BatchItemFailures, b.delivery(k).Status)
	}
	b.expireVisibility(ev, resp)
	b.poll(1)
	d := b.delivery(k)
	if d.Status != ledger.StatusSent || d.Receipt != "sink-1" || b.sink.Sends(k.String()) != 1 || b.sink.Requests(k.String()) != 2 {
		t.Fatalf("delivery %+v; sink requests %d", d, b.sink.Requests(k.String()))
	}
}

func TestSameDeliveryTwiceInOneBatch(t *testing.T) {
	b := setup(t, options{script: "rem-5=ok+300ms"})
	k := b.schedule("rem-5", b.clk.Now())
	b.publish(b.body("rem-5", b.clk.Now()))
	ev, resp := b.poll(2)
	if b.sink.Requests(k.String()) != 1 || b.delivery(k).Status != ledger.StatusSent {
		t.Fatalf("sink requests %d, status %s", b.sink.Requests(k.String()), b.delivery(k).Status)
	}
	// The copy that found the delivery leased comes back after the lease.
	if failures(resp) == 1 {
		b.clk.Advance(6 * time.Minute)
		b.expireVisibility(ev, resp)
		_, resp = b.poll(1)
	}
	if failures(resp) != 0 || b.sink.Requests(k.String()) != 1 {
		t.Fatalf("failures %v, sink requests %d", resp.BatchItemFailures, b.sink.Requests(k.String()))
	}
}

func TestSameDeliveryInTwoConcurrentBatches(t *testing.T) {
	b := setup(t, options{script: "rem-6=ok+300ms"})
	k := b.schedule("rem-6", b.clk.Now())
	b.publish(b.body("rem-6", b.clk.Now()))
	ev := b.receive(2)
	var wg sync.WaitGroup
	resps := make([]events.SQSEventResponse, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], _ = b.fn.Handle(b.ctx, events.SQSEvent{Records: ev.Records[i : i+1]})
		}()
	}
	wg.Wait()
	if b.sink.Requests(k.String()) != 1 || failures(resps[0])+failures(resps[1]) != 1 {
		t.Fatalf("sink requests %d; responses %v", b.sink.Requests(k.String()), resps)
	}
	if !strings.Contains(b.logs.String(), `"outcome":"leased"`) {
		t.Fatal("the second batch did not see the lease")
	}
}

func TestRedeliveryAfterSentIsADuplicate(t *testing.T) {
	b := setup(t, options{})
	k := b.schedule("rem-7", b.clk.Now())
	b.poll(1)
	b.publish(b.body("rem-7", b.clk.Now())) // e.g. a console redrive of an old copy
	_, resp := b.poll(1)
	if failures(resp) != 0 || b.sink.Requests(k.String()) != 1 {
		t.Fatalf("failures %v, sink requests %d", resp.BatchItemFailures, b.sink.Requests(k.String()))
	}
}

func TestTransientFailuresThenSuccess(t *testing.T) {
	b := setup(t, options{script: "rem-8=500,429/17s"})
	k := b.schedule("rem-8", b.clk.Now())
	ev, resp := b.poll(1)
	if failures(resp) != 1 {
		t.Fatal("a 500 was acknowledged")
	}
	// Backoff: attempt 1 ceiling 10s, jitter 0.5 → 5s, applied as visibility.
	if !strings.Contains(b.logs.String(), `"next":"5s"`) {
		t.Fatalf("backoff not applied:\n%s", b.logs.String())
	}
	if !strings.Contains(b.logs.String(), `"ErrorClass":"server","Function":"consumer","Retried":1,"_aws":{"CloudWatchMetrics":[{"Dimensions":[["Function"],["Function","ErrorClass"]]`) {
		t.Fatalf("Retried is not split by failure class:\n%s", b.logs.String())
	}
	b.expireVisibility(ev, resp)
	ev, resp = b.poll(1)
	if failures(resp) != 1 || !strings.Contains(b.logs.String(), `"next":"17s"`) {
		t.Fatal("Retry-After 17s not honoured")
	}
	d := b.delivery(k)
	if d.Status != ledger.StatusRetrying || d.LastErrorClass != "throttled" || d.Attempts != 2 {
		t.Fatalf("after two failures: %+v", d)
	}
	b.expireVisibility(ev, resp)
	_, resp = b.poll(1)
	d = b.delivery(k)
	if failures(resp) != 0 || d.Status != ledger.StatusSent || d.Attempts != 3 {
		t.Fatalf("after success: %+v", d)
	}
	var states []string
	for _, e := range d.History {
		states = append(states, string(e.Status))
	}
	if got := strings.Join(states, ","); got != "queued,sending,retrying,sending,retrying,sending,sent" {
		t.Fatalf("history %s", got)
	}
}

func TestTransientUntilTheBudgetRunsOutIsDeadLettered(t *testing.T) {
	b := setup(t, options{script: "rem-9=500,500,500", maxAttempts: 3})
	k := b.schedule("rem-9", b.clk.Now())
	for i := 0; i < 2; i++ {
		ev, resp := b.poll(1)
		b.expireVisibility(ev, resp)
	}
	_, resp := b.poll(1)
	if failures(resp) != 0 {
		t.Fatal("the last attempt was left to a silent redrive")
	}
	d := b.delivery(k)
	if d.Status != ledger.StatusDead || d.LastErrorClass != "exhausted" || !strings.Contains(d.LastError, "3 of 3") {
		t.Fatalf("delivery %+v", d)
	}
	msgs := b.dlq()
	if len(msgs) != 1 || attr(msgs[0], deadletter.AttrErrorClass) != "exhausted" || attr(msgs[0], deadletter.AttrAttempts) != "3" ||
		attr(msgs[0], deadletter.AttrDeliveryKey) != k.String() || aws.ToString(msgs[0].Body) != b.body("rem-9", d.DueAt) {
		t.Fatalf("DLQ holds %+v", msgs)
	}
}

func TestPermanentFailureGoesToTheDLQAtOnce(t *testing.T) {
	b := setup(t, options{script: "rem-10=400"})
	k := b.schedule("rem-10", b.clk.Now())
	_, resp := b.poll(1)
	d := b.delivery(k)
	msgs := b.dlq()
	if failures(resp) != 0 || d.Status != ledger.StatusDead || d.LastErrorClass != "rejected" || len(msgs) != 1 ||
		attr(msgs[0], deadletter.AttrReason) != "provider answered 400" {
		t.Fatalf("failures %v, delivery %+v, DLQ %+v", resp.BatchItemFailures, d, msgs)
	}
}

// TestLateDuplicateOfADeadLetteredDeliveryDoesNotReviveIt: a second copy
// of the message (at-least-once delivery) arriving after its delivery was
// dead-lettered is a duplicate: it must not send what the first copy
// dead-lettered for review. Found by the chaos run, where duplicates of
// rejected deliveries ended sent.
func TestLateDuplicateOfADeadLetteredDeliveryDoesNotReviveIt(t *testing.T) {
	b := setup(t, options{script: "rem-12=400"}) // a second request would be accepted
	k := b.schedule("rem-12", b.clk.Now())
	b.poll(1)
	b.publish(b.body("rem-12", b.clk.Now()))
	_, resp := b.poll(1)
	if d := b.delivery(k); failures(resp) != 0 || d.Status != ledger.StatusDead || b.sink.Requests(k.String()) != 1 || len(b.dlq()) != 1 {
		t.Fatalf("failures %v, delivery %s, sink requests %d; want the copy acknowledged as a duplicate, the delivery still dead, one request",
			resp.BatchItemFailures, d.Status, b.sink.Requests(k.String()))
	}
}

func TestPoisonBodiesGoToTheDLQAtOnce(t *testing.T) {
	b := setup(t, options{})
	ev := batchtest.LoadEvent(t, "../../events/sqs-poison.json")
	for _, r := range ev.Records[:3] {
		b.publish(r.Body)
	}
	_, resp := b.poll(3)
	msgs := b.dlq()
	if failures(resp) != 0 || len(msgs) != 3 {
		t.Fatalf("failures %v, %d DLQ messages", resp.BatchItemFailures, len(msgs))
	}
	reasons := ""
	for _, m := range msgs {
		if attr(m, deadletter.AttrErrorClass) != "decode" || attr(m, deadletter.AttrSourceMessageID) == "" {
			t.Fatalf("DLQ message attributes %v", m.MessageAttributes)
		}
		reasons += attr(m, deadletter.AttrReason) + "\n"
	}
	for _, want := range []string{"not a JSON object", "unsupported schema version 2", "not an RFC 3339 time"} {
		if !strings.Contains(reasons, want) {
			t.Errorf("no DLQ reason mentions %q:\n%s", want, reasons)
		}
	}
}

func TestUnknownDeliveryIsDeadLettered(t *testing.T) {
	b := setup(t, options{})
	b.publish(b.body("rem-ghost", b.clk.Now()))
	_, resp := b.poll(1)
	if msgs := b.dlq(); failures(resp) != 0 || len(msgs) != 1 || attr(msgs[0], deadletter.AttrErrorClass) != "not-found" {
		t.Fatalf("failures %v, DLQ %v", resp.BatchItemFailures, msgs)
	}
}

func TestEarlyMessageIsDeferredWithoutSpendingAReceive(t *testing.T) {
	b := setup(t, options{})
	due := b.clk.Now().Add(10 * time.Minute)
	k := b.schedule("rem-11", due)
	_, resp := b.poll(1)
	if _, delayed, _ := b.queueDepth(b.q.WorkURL); failures(resp) != 0 || delayed != 1 {
		t.Fatalf("failures %v, delayed messages %d; want a re-published, delayed copy", resp.BatchItemFailures, delayed)
	}
	if !strings.Contains(b.logs.String(), `"next":"10m0s","via":"republish"`) || b.sink.Requests(k.String()) != 0 {
		t.Fatalf("deferral not logged or sent early:\n%s", b.logs.String())
	}
	// The clock moves across dueAt: the deferred copy is sent.
	b.clk.Advance(10 * time.Minute)
	if _, err := b.fn.Handle(b.ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "deferred-copy", Body: b.body("rem-11", due), Attributes: map[string]string{"ApproximateReceiveCount": "1"}}}}); err != nil {
		t.Fatal(err)
	}
	if d := b.delivery(k); d.Status != ledger.StatusSent {
		t.Fatalf("after dueAt: %+v", d)
	}
}

func TestFarFutureMessageIsReleasedToTheCalendar(t *testing.T) {
	b := setup(t, options{})
	k := b.schedule("rem-12", b.clk.Now().Add(2*time.Hour))
	_, resp := b.poll(1)
	d := b.delivery(k)
	if v, delayed, f := b.queueDepth(b.q.WorkURL); failures(resp) != 0 || d.Status != ledger.StatusPending || v+delayed+f != 0 {
		t.Fatalf("failures %v, delivery %s, queue %d/%d/%d", resp.BatchItemFailures, d.Status, v, delayed, f)
	}
}

func TestRescheduledLaterIsDeferredByTheLedgersDueAt(t *testing.T) {
	b := setup(t, options{})
	now := b.clk.Now()
	d := ledger.Delivery{ReminderID: "rem-13", Channel: "email", Provider: "webhook", DueAt: now.Add(5 * time.Minute), ExpiresAt: now.Add(time.Hour), Status: ledger.StatusQueued}
	if err := b.ledger.Create(b.ctx, d); err != nil {
		t.Fatal(err)
	}
	b.publish(b.body("rem-13", now)) // the message still says "now"
	b.poll(1)
	if _, delayed, _ := b.queueDepth(b.q.WorkURL); delayed != 1 || b.sink.Requests(d.Key().String()) != 0 {
		t.Fatalf("delayed %d, sink requests %d", delayed, b.sink.Requests(d.Key().String()))
	}
}

func TestExpiredDeliveryIsNotSent(t *testing.T) {
	b := setup(t, options{})
	k := b.schedule("rem-14", b.clk.Now())
	b.clk.Advance(25 * time.Hour)
	_, resp := b.poll(1)
	if d := b.delivery(k); failures(resp) != 0 || d.Status != ledger.StatusExpired || b.sink.Requests(k.String()) != 0 {
		t.Fatalf("failures %v, status %s, sink requests %d", resp.BatchItemFailures, d.Status, b.sink.Requests(k.String()))
	}
}

func TestLateButValidIsSentAndCountedLate(t *testing.T) {
	b := setup(t, options{})
	k := b.schedule("rem-15", b.clk.Now())
	b.clk.Advance(10 * time.Minute)
	b.poll(1)
	if b.delivery(k).Status != ledger.StatusSent || !strings.Contains(b.logs.String(), `"Late":1`) {
		t.Fatalf("late send not counted:\n%s", b.logs.String())
	}
}

// clockProvider advances the fake clock by step on every send: a slow provider.
func clockProvider(clk *clock.Fake, step time.Duration, p provider.Provider) provider.Provider {
	return provider.Func(func(ctx context.Context, req provider.Request, key string) (provider.Receipt, error) {
		clk.Advance(step)
		return p.Send(ctx, req, key)
	})
}

func TestDeadlineCutOffReturnsUnstartedRecordsAtOnce(t *testing.T) {
	var b *bundle
	b = setup(t, options{concurrency: 1, wrapSend: func(p provider.Provider) provider.Provider {
		return provider.Func(func(ctx context.Context, req provider.Request, key string) (provider.Receipt, error) {
			return clockProvider(b.clk, 4*time.Second, p).Send(ctx, req, key)
		})
	}})
	b.deadline = b.clk.Now().Add(15 * time.Second) // cut-off at +10s with the 5s margin
	for i := 0; i < 6; i++ {
		b.schedule(fmt.Sprint("rem-cut-", i), b.clk.Now())
	}
	_, resp := b.poll(6)
	if failures(resp) != 3 {
		t.Fatalf("%d failures, want the 3 records not started before the cut-off", failures(resp))
	}
	if !strings.Contains(b.logs.String(), `"Unstarted":3`) {
		t.Fatalf("Unstarted metric missing:\n%s", b.logs.String())
	}
	// They were made visible at once: the next poll gets them immediately.
	b.deadline = time.Time{}
	_, resp = b.poll(3)
	if failures(resp) != 0 {
		t.Fatalf("second poll failures %v", resp.BatchItemFailures)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	base := consumer.Config{Ledger: &ledger.Ledger{}, Providers: map[string]provider.Provider{"webhook": provider.Func(nil)}, Queue: &sqs.Client{}, QueueURL: "q", DLQURL: "d"}
	for _, tc := range []struct {
		mod  func(*consumer.Config)
		want string
	}{
		{func(c *consumer.Config) { c.Ledger = nil }, "Ledger"},
		{func(c *consumer.Config) { c.Providers = nil }, "provider"},
		{func(c *consumer.Config) { c.DLQURL = "" }, "NUDGE_DLQ_URL"},
		{func(c *consumer.Config) { c.MaxAttempts, c.MaxReceiveCount = 8, 5 }, "maxReceiveCount 5 must be at least the attempt budget 8 plus 3"},
		{func(c *consumer.Config) { c.MaxAttempts, c.MaxReceiveCount = 8, 10 }, "maxReceiveCount 10 must be at least the attempt budget 8 plus 3"},
	} {
		cfg := base
		tc.mod(&cfg)
		if _, err := consumer.New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New = %v, want an error mentioning %q", err, tc.want)
		}
	}
}

func TestLongSendIsKeptInvisibleByTheHeartbeat(t *testing.T) {
	sending := make(chan struct{})
	var once sync.Once
	b := setup(t, options{script: "rem-16=ok+2500ms", visibility: time.Second, heartbeat: true,
		wrapSend: func(p provider.Provider) provider.Provider {
			return provider.Func(func(ctx context.Context, req provider.Request, key string) (provider.Receipt, error) {
				once.Do(func() { close(sending) })
				return p.Send(ctx, req, key)
			})
		}})
	k := b.schedule("rem-16", b.clk.Now())
	stop := make(chan struct{})
	redelivered := make(chan int, 1)
	go func() { // a second consumer polling while the first one sends
		n := 0
		defer func() { redelivered <- n }()
		select {
		case <-sending:
		case <-stop:
			return
		}
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			ev, _ := batchtest.Receive(b.ctx, b.sqs, b.q.WorkURL, b.q.WorkARN, 1, 0)
			n += len(ev.Records)
		}
	}()
	_, resp := b.poll(1)
	close(stop)
	if n := <-redelivered; n != 0 || failures(resp) != 0 {
		t.Fatalf("the message was redelivered %d times during a 2.5s send with a 1s visibility timeout", n)
	}
	if b.sink.Requests(k.String()) != 1 || b.delivery(k).Status != ledger.StatusSent {
		t.Fatalf("sink requests %d", b.sink.Requests(k.String()))
	}
}
