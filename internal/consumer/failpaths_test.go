package consumer_test

// Failure paths the random chaos run reaches only by chance, each made to
// happen here: a DLQ send that fails, a dead-letter that reached the DLQ but
// not the ledger, an early message whose re-publish fails. In each, the
// record is retried and nothing is lost or sent twice.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/provider/webhook"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// flakyQueue records sends and fails the next failures[url] of them to
// that queue.
type flakyQueue struct {
	mu       sync.Mutex
	failures map[string]int
	sent     []*sqs.SendMessageInput
}

func (q *flakyQueue) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.failures[aws.ToString(in.QueueUrl)] > 0 {
		q.failures[aws.ToString(in.QueueUrl)]--
		return nil, errors.New("SQS: service unavailable")
	}
	q.sent = append(q.sent, in)
	return &sqs.SendMessageOutput{MessageId: aws.String("m")}, nil
}

func (q *flakyQueue) to(url string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, in := range q.sent {
		if aws.ToString(in.QueueUrl) == url {
			n++
		}
	}
	return n
}

// deadLetterFails fails the ledger's next DeadLetter writes.
type deadLetterFails struct {
	consumer.Ledger
	left int
}

func (l *deadLetterFails) DeadLetter(ctx context.Context, d ledger.Delivery, f ledger.Failure) (ledger.Delivery, error) {
	if l.left > 0 {
		l.left--
		return ledger.Delivery{}, errors.New("ledger: dead-letter: ProvisionedThroughputExceededException")
	}
	return l.Ledger.DeadLetter(ctx, d, f)
}

type failPath struct {
	c     *consumer.Consumer
	mem   *ledger.Memory
	q     *flakyQueue
	clk   *clock.Fake
	sends int
}

func newFailPath(t *testing.T, answer error, wrap func(consumer.Ledger) consumer.Ledger) *failPath {
	t.Helper()
	t.Parallel()
	f := &failPath{q: &flakyQueue{failures: map[string]int{}}, clk: clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))}
	f.mem = mustMemory(f.clk)
	var l consumer.Ledger = f.mem
	if wrap != nil {
		l = wrap(l)
	}
	var err error
	f.c, err = consumer.New(consumer.Config{
		Ledger: l, Queue: f.q, QueueURL: "work", DLQURL: "dlq", Clock: f.clk, Lease: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Providers: map[string]provider.Provider{"webhook": provider.Func(func(context.Context, provider.Request, string) (provider.Receipt, error) {
			f.sends++
			return provider.Receipt{ID: "r"}, answer
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var failKey = message.DeliveryKey{ReminderID: "rem-f", Channel: "email", Provider: "webhook"}

func (f *failPath) seed(t *testing.T, due time.Time) {
	t.Helper()
	if err := f.mem.Create(context.Background(), ledger.Delivery{ReminderID: failKey.ReminderID, Channel: "email", Provider: "webhook", DueAt: due, ExpiresAt: due.Add(time.Hour), Status: ledger.StatusQueued}); err != nil {
		t.Fatal(err)
	}
}

func (f *failPath) handle(receive string, due time.Time) error {
	body, _ := message.Encode(message.Message{ReminderID: failKey.ReminderID, Channel: "email", Provider: "webhook", DueAt: due})
	return f.c.Handle(context.Background(), eventRecord("m-1", string(body), receive))
}

func (f *failPath) delivery(t *testing.T) ledger.Delivery {
	t.Helper()
	d, err := f.mem.Get(context.Background(), failKey)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func deadEntries(d ledger.Delivery) int {
	n := 0
	for _, e := range d.History {
		if e.Status == ledger.StatusDead {
			n++
		}
	}
	return n
}

// TestDLQSendFailsThenTheRecordIsRetried: the provider rejects a delivery
// (400) and the DLQ send fails. The record is not acknowledged and the
// ledger is not marked dead (nothing says why yet); its retry, once the
// failed attempt's lease lapses, dead-letters it with its reason, once.
func TestDLQSendFailsThenTheRecordIsRetried(t *testing.T) {
	f := newFailPath(t, &provider.StatusError{Code: 400}, nil)
	now := f.clk.Now()
	f.seed(t, now)
	f.q.failures["dlq"] = 1
	if err := f.handle("1", now); err == nil {
		t.Fatal("the record was acknowledged though its dead letter was not sent")
	}
	if d := f.delivery(t); d.Status == ledger.StatusDead || f.q.to("dlq") != 0 {
		t.Fatalf("after the failed DLQ send: delivery %s, %d DLQ messages", d.Status, f.q.to("dlq"))
	}
	f.clk.Advance(2 * time.Minute) // the failed attempt's lease lapses
	if err := f.handle("2", now); err != nil {
		t.Fatalf("retry: %v", err)
	}
	d := f.delivery(t)
	if d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassRejected || deadEntries(d) != 1 || f.q.to("dlq") != 1 {
		t.Fatalf("after the retry: delivery %s (%s), %d dead entries, %d DLQ messages", d.Status, d.LastErrorClass, deadEntries(d), f.q.to("dlq"))
	}
}

// TestDeadLetterReachedTheDLQButNotTheLedger: the DLQ send succeeds and
// the ledger write after it fails. The record is retried; the retry claims
// again, calls the provider once more with the same key (the 400 answers
// the same), sends a second DLQ copy and marks the ledger: the delivery is
// dead once, the DLQ holds two copies of it (nudge dlq list shows them as
// one delivery, see internal/redrive), and nothing is lost.
func TestDeadLetterReachedTheDLQButNotTheLedger(t *testing.T) {
	f := newFailPath(t, &provider.StatusError{Code: 400}, func(l consumer.Ledger) consumer.Ledger { return &deadLetterFails{Ledger: l, left: 1} })
	now := f.clk.Now()
	f.seed(t, now)
	if err := f.handle("1", now); err == nil {
		t.Fatal("the record was acknowledged though the ledger did not record the dead letter")
	}
	if d := f.delivery(t); d.Status == ledger.StatusDead || f.q.to("dlq") != 1 {
		t.Fatalf("after the failed ledger write: delivery %s, %d DLQ messages", d.Status, f.q.to("dlq"))
	}
	f.clk.Advance(2 * time.Minute)
	if err := f.handle("2", now); err != nil {
		t.Fatalf("retry: %v", err)
	}
	d := f.delivery(t)
	if d.Status != ledger.StatusDead || deadEntries(d) != 1 || f.q.to("dlq") != 2 || f.sends != 2 {
		t.Fatalf("after the retry: delivery %s, %d dead entries, %d DLQ copies, %d provider requests", d.Status, deadEntries(d), f.q.to("dlq"), f.sends)
	}
	for _, in := range f.q.sent {
		if aws.ToString(in.MessageAttributes[deadletter.AttrDeliveryKey].StringValue) != failKey.String() {
			t.Fatalf("a DLQ copy does not name its delivery: %v", in.MessageAttributes)
		}
	}
}

// TestEarlyMessageWhoseRepublishFailsIsRetried: a message arrives two
// minutes early and its delayed re-publish fails. It is not acknowledged
// (acknowledging would lose it), so it comes back and is deferred again.
func TestEarlyMessageWhoseRepublishFailsIsRetried(t *testing.T) {
	f := newFailPath(t, nil, nil)
	due := f.clk.Now().Add(2 * time.Minute)
	f.seed(t, due)
	f.q.failures["work"] = 1
	if err := f.handle("1", due); err == nil {
		t.Fatal("the early message was acknowledged though its re-publish failed: lost")
	}
	if f.q.to("work") != 0 || f.sends != 0 {
		t.Fatalf("re-published %d, sent %d", f.q.to("work"), f.sends)
	}
	if err := f.handle("2", due); err != nil || f.q.to("work") != 1 || f.q.sent[0].DelaySeconds != 120 {
		t.Fatalf("the retry: %v; re-published %d", err, f.q.to("work"))
	}
	f.clk.Advance(2 * time.Minute)
	if err := f.handle("1", due); err != nil || f.sends != 1 || f.delivery(t).Status != ledger.StatusSent {
		t.Fatalf("at due: %v, %d sends, delivery %s", err, f.sends, f.delivery(t).Status)
	}
}

func eventRecord(id, body, receive string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, ReceiptHandle: "h-" + receive, Body: body, Attributes: map[string]string{"ApproximateReceiveCount": receive}}
}

// TestNoStoredOrLoggedFieldCarriesTheWebhookURLsSecrets: a webhook URL
// with a token in its path and query is refused at every attempt until the
// budget ends. Nothing stored (the ledger's last error and history, the
// DLQ message's attributes) or logged carries the path or the query.
func TestNoStoredOrLoggedFieldCarriesTheWebhookURLsSecrets(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL + "/hooks/s3cr3t-path?token=s3cr3t-query"
	closed.Close()
	hook, err := webhook.New(webhook.Config{URL: url, Secret: []byte("0123456789abcdef-secret")})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	mem := mustMemory(clk)
	q := &flakyQueue{failures: map[string]int{}}
	c, err := consumer.New(consumer.Config{Ledger: mem, Queue: q, QueueURL: "work", DLQURL: "dlq", Clock: clk, MaxAttempts: 2,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Providers: map[string]provider.Provider{"webhook": hook}})
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	if err := mem.Create(context.Background(), ledger.Delivery{ReminderID: "rem-url", Channel: "email", Provider: "webhook", DueAt: now, ExpiresAt: now.Add(time.Hour), Status: ledger.StatusQueued}); err != nil {
		t.Fatal(err)
	}
	body, _ := message.Encode(message.Message{ReminderID: "rem-url", Channel: "email", Provider: "webhook", DueAt: now})
	for i := range 2 {
		_ = c.Handle(context.Background(), eventRecord("m-url", string(body), fmt.Sprint(i+1)))
		clk.Advance(10 * time.Minute)
	}
	d, _ := mem.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-url", Channel: "email", Provider: "webhook"})
	if d.Status != ledger.StatusDead || q.to("dlq") != 1 {
		t.Fatalf("delivery %s, %d DLQ messages; want it dead-lettered after two refused connections", d.Status, q.to("dlq"))
	}
	stored := []string{d.LastError, logs.String()}
	for _, e := range d.History {
		stored = append(stored, e.Note)
	}
	for _, a := range q.sent[0].MessageAttributes {
		stored = append(stored, aws.ToString(a.StringValue))
	}
	for _, s := range stored {
		if strings.Contains(s, "s3cr3t") {
			t.Fatalf("a stored or logged field carries the URL's path or query: %s", s)
		}
	}
	if !strings.Contains(d.LastError, "/…") {
		t.Fatalf("the last error %q does not name the endpoint (scheme and host)", d.LastError)
	}
}
