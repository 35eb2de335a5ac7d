package consumer_test

// The per-provider contract in the consumer: the ambiguous policy, the
// rate limit, and the recipient's address, which reaches the provider and
// nothing else.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/internal/ratelimit"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

const secretAddress = "ana.secret@example.com"

type contractFixture struct {
	c    *consumer.Consumer
	l    *ledger.Memory
	q    *captureSQS
	clk  *clock.Fake
	logs *bytes.Buffer
	m    *metrics.Recorder
	got  []provider.Request
	err  error // what the provider answers
	// probes are the keys of the probes sent (record policy), probeErr
	// what a probe answers.
	probes   []string
	probeErr error
}

func newContract(t *testing.T, policy provider.AmbiguousPolicy, limit *ratelimit.Limiter) *contractFixture {
	t.Helper()
	t.Parallel()
	f := &contractFixture{q: &captureSQS{}, clk: clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)), logs: &bytes.Buffer{}}
	f.l = mustMemory(f.clk)
	f.m = metrics.New(nil)
	cfg := consumer.Config{
		Ledger: f.l, Queue: f.q, QueueURL: "work", DLQURL: "dlq", Clock: f.clk, MaxAttempts: 3, Metrics: f.m,
		Logger: slog.New(slog.NewJSONHandler(f.logs, nil)),
		Providers: map[string]provider.Provider{"ses": provider.Func(func(_ context.Context, req provider.Request, _ string) (provider.Receipt, error) {
			f.got = append(f.got, req)
			return provider.Receipt{ID: "msg-1"}, f.err
		})},
		Ambiguous: map[string]provider.AmbiguousPolicy{"ses": policy},
	}
	if limit != nil {
		cfg.Limits = map[string]*ratelimit.Limiter{"ses": limit}
	}
	var err error
	if f.c, err = consumer.New(cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

var sesKey = message.DeliveryKey{ReminderID: "rem-1", Channel: "email", Provider: "ses"}

func (f *contractFixture) seed(t *testing.T) {
	t.Helper()
	now := f.clk.Now()
	if err := f.l.Create(context.Background(), ledger.Delivery{ReminderID: "rem-1", Channel: "email", Provider: "ses", RecipientRef: "cust-1", TemplateRef: "renewal",
		Address: secretAddress, TemplateData: map[string]string{"plan": "Pro"}, DueAt: now, ExpiresAt: now.Add(time.Hour), Status: ledger.StatusQueued}); err != nil {
		t.Fatal(err)
	}
}

func (f *contractFixture) handle(receives string) error {
	body, _ := message.Encode(message.Message{ReminderID: "rem-1", Channel: "email", Provider: "ses", DueAt: f.clk.Now()})
	return f.c.Handle(context.Background(), events.SQSMessage{MessageId: "m-1", ReceiptHandle: "h", Body: string(body),
		Attributes: map[string]string{"ApproximateReceiveCount": receives}})
}

func (f *contractFixture) status(t *testing.T) ledger.Delivery {
	t.Helper()
	d, err := f.l.Get(context.Background(), sesKey)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// noAddressLeaks fails if the address appears anywhere but the ledger's
// delivery item: the log lines, the messages sent to SQS (DLQ and
// re-publishes, with their attributes), the stored error text, the metrics.
func (f *contractFixture) noAddressLeaks(t *testing.T) {
	t.Helper()
	if strings.Contains(f.logs.String(), secretAddress) {
		t.Errorf("a log line carries the address:\n%s", f.logs)
	}
	for _, in := range f.q.sent {
		if strings.Contains(aws.ToString(in.MessageBody), "@") {
			t.Errorf("a queue message carries the address: %s", aws.ToString(in.MessageBody))
		}
		for k, v := range in.MessageAttributes {
			if strings.Contains(aws.ToString(v.StringValue), "@") {
				t.Errorf("DLQ attribute %s carries the address: %s", k, aws.ToString(v.StringValue))
			}
		}
	}
	d := f.status(t)
	if strings.Contains(d.LastError, "@") {
		t.Errorf("the stored error carries the address: %s", d.LastError)
	}
	for _, e := range d.History {
		if strings.Contains(e.Note, "@") {
			t.Errorf("a history note carries the address: %s", e.Note)
		}
	}
	var emf bytes.Buffer
	_ = f.m.Flush(&emf, f.clk.Now())
	if strings.Contains(emf.String(), "@") {
		t.Errorf("the metrics carry the address: %s", emf.String())
	}
}

func TestTheAddressAndTemplateDataReachTheProviderAndNothingElse(t *testing.T) {
	f := newContract(t, provider.AmbiguousReview, nil)
	f.seed(t)
	if err := f.handle("1"); err != nil {
		t.Fatal(err)
	}
	if len(f.got) != 1 || f.got[0].Address != secretAddress || f.got[0].TemplateData["plan"] != "Pro" {
		t.Fatalf("the provider got %+v", f.got)
	}
	if d := f.status(t); d.Status != ledger.StatusSent {
		t.Fatalf("status %s", d.Status)
	}
	f.noAddressLeaks(t)
}

func TestAnAmbiguousSendUnderReviewIsDeadLetteredNotSentAgain(t *testing.T) {
	f := newContract(t, provider.AmbiguousReview, nil)
	f.seed(t)
	f.err = failure.Ambiguous(failure.WithClass(errors.New("ses: connection reset after the request was written"), failure.ClassNetwork))
	if err := f.handle("1"); err != nil {
		t.Fatalf("Handle = %v; want the record acknowledged once dead-lettered", err)
	}
	d := f.status(t)
	if d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassAmbiguous || len(f.q.sent) != 1 {
		t.Fatalf("status %s class %s, %d DLQ messages; want dead, ambiguous, 1", d.Status, d.LastErrorClass, len(f.q.sent))
	}
	letter := deadletter.Read(f.q.sent[0].MessageAttributes)
	if letter.Class != failure.ClassAmbiguous || !strings.Contains(letter.Reason, "may have been sent") {
		t.Fatalf("dead letter %+v", letter)
	}
	// The same message again (SQS redelivers): nothing is sent.
	if err := f.handle("2"); err != nil || len(f.got) != 1 {
		t.Fatalf("redelivery: %v, %d sends; want none more", err, len(f.got))
	}
	f.noAddressLeaks(t)
}

func TestAnAmbiguousSendUnderRetryIsRetried(t *testing.T) {
	f := newContract(t, provider.AmbiguousRetry, nil)
	f.seed(t)
	f.err = failure.Ambiguous(failure.WithClass(errors.New("timeout after write"), failure.ClassTimeout))
	err := f.handle("1")
	var fe *failure.Error
	if !errors.As(err, &fe) || fe.Kind != failure.KindAmbiguous {
		t.Fatalf("Handle = %v; want an ambiguous retry", err)
	}
	if d := f.status(t); d.Status != ledger.StatusRetrying {
		t.Fatalf("status %s, want retrying", d.Status)
	}
}

func TestALapsedLeaseUnderReviewIsDeadLetteredWithoutASend(t *testing.T) {
	for _, tc := range []struct {
		policy provider.AmbiguousPolicy
		sends  int
		status ledger.Status
	}{
		{provider.AmbiguousReview, 0, ledger.StatusDead},
		{provider.AmbiguousRetry, 1, ledger.StatusSent},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			f := newContract(t, tc.policy, nil)
			f.seed(t)
			now := f.clk.Now()
			// An earlier consumer claimed it and died mid-send.
			if _, err := f.l.Claim(context.Background(), ledger.Claim{Key: sesKey, Token: "dead-consumer", LeaseUntil: now.Add(time.Minute), DueBy: now}); err != nil {
				t.Fatal(err)
			}
			f.clk.Advance(2 * time.Minute)
			if err := f.handle("2"); err != nil {
				t.Fatal(err)
			}
			d := f.status(t)
			if len(f.got) != tc.sends || d.Status != tc.status {
				t.Fatalf("%d sends, status %s; want %d, %s", len(f.got), d.Status, tc.sends, tc.status)
			}
			if tc.policy == provider.AmbiguousReview && d.LastErrorClass != failure.ClassAmbiguous {
				t.Fatalf("class %s, want ambiguous", d.LastErrorClass)
			}
		})
	}
}

func TestARevivedDeliveryIsNotMistakenForALapsedLease(t *testing.T) {
	f := newContract(t, provider.AmbiguousReview, nil)
	f.seed(t)
	f.err = failure.Ambiguous(errors.New("may have sent"))
	_ = f.handle("1") // dead-lettered for review
	f.err = nil
	// The operator checked and redrives from the console: the message
	// comes back with the dead letter's attributes.
	body, _ := message.Encode(message.Message{ReminderID: "rem-1", Channel: "email", Provider: "ses", DueAt: f.clk.Now()})
	attrs := map[string]events.SQSMessageAttribute{}
	for k, v := range f.q.sent[0].MessageAttributes {
		attrs[k] = events.SQSMessageAttribute{StringValue: v.StringValue, DataType: "String"}
	}
	if err := f.c.Handle(context.Background(), events.SQSMessage{MessageId: "m-2", Body: string(body), MessageAttributes: attrs,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}); err != nil {
		t.Fatal(err)
	}
	if d := f.status(t); d.Status != ledger.StatusSent || len(f.got) != 2 {
		t.Fatalf("after the redrive: status %s, %d sends; want sent, 2", d.Status, len(f.got))
	}
}

func TestAPausedAccountRetriesAfterItsLongBackoffAndIsCounted(t *testing.T) {
	f := newContract(t, provider.AmbiguousReview, nil)
	f.seed(t)
	f.err = failure.Retryable(failure.WithClass(errors.New("ses: SendingPausedException"), failure.ClassPaused), time.Hour)
	if got := after(f.handle("1")); got < time.Hour {
		t.Fatalf("retry after %v, want at least the hour SES's pause asks", got)
	}
	var emf bytes.Buffer
	_ = f.m.Flush(&emf, f.clk.Now())
	if !strings.Contains(emf.String(), consumer.MetricPaused) {
		t.Fatalf("no %s metric in %s", consumer.MetricPaused, emf.String())
	}
}

// TestTheRateLimitReturnsWhatItCannotFitWithoutClaiming: a record whose
// turn comes after its invocation leaves time to send goes back to its
// queue with that wait as its visibility: unclaimed, nothing re-published.
func TestTheRateLimitReturnsWhatItCannotFitWithoutClaiming(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	lim, err := ratelimit.New(ratelimit.Config{PerSecond: 0.1, Clock: clk}) // one send every 10 s
	if err != nil {
		t.Fatal(err)
	}
	f2 := newContractWithClock(t, clk, lim)
	f2.seed(t)
	if err := f2.handle("1"); err != nil || len(f2.got) != 1 {
		t.Fatalf("first send: %v, %d sends", err, len(f2.got))
	}
	// A second delivery now: its turn is 10 s away, and the invocation
	// leaves 15 s, of which the send needs 11 s.
	now := clk.Now()
	if err := f2.l.Create(context.Background(), ledger.Delivery{ReminderID: "rem-2", Channel: "email", Provider: "ses", RecipientRef: "c", TemplateRef: "t",
		Address: secretAddress, DueAt: now, ExpiresAt: now.Add(time.Hour), Status: ledger.StatusQueued}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	body, _ := message.Encode(message.Message{ReminderID: "rem-2", Channel: "email", Provider: "ses", DueAt: now})
	err = f2.c.Handle(ctx, events.SQSMessage{MessageId: "m-2", Body: string(body), Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	if after(err) != 10*time.Second || len(f2.got) != 1 || len(f2.q.sent) != 0 {
		t.Fatalf("Handle = %v (after %v), %d sends, %d re-published; want the record returned for 10 s, nothing re-published", err, after(err), len(f2.got), len(f2.q.sent))
	}
	d, _ := f2.l.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-2", Channel: "email", Provider: "ses"})
	if d.Attempts != 0 || d.Status != ledger.StatusQueued {
		t.Fatalf("the paced delivery has %d attempts, status %s; want unclaimed", d.Attempts, d.Status)
	}
	if !strings.Contains(f2.logs.String(), `"next":"10s","via":"visibility","reason":"rate limit"`) {
		t.Fatalf("no paced transition in %s", f2.logs.String())
	}
}

// TestARecordWaitsInProcessForATurnItsInvocationHolds: a turn 10 s away in
// an invocation that leaves a minute is waited for, then sent; no PaceWait
// of a second sends it back.
func TestARecordWaitsInProcessForATurnItsInvocationHolds(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	lim, _ := ratelimit.New(ratelimit.Config{PerSecond: 0.1, Clock: clk})
	f := newContractWithClock(t, clk, lim)
	f.seed(t)
	lim.Reserve(time.Hour) // the bucket is spent: the next turn is 10 s away
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		body, _ := message.Encode(message.Message{ReminderID: "rem-1", Channel: "email", Provider: "ses", DueAt: clk.Now()})
		done <- f.c.Handle(ctx, events.SQSMessage{MessageId: "m-1", Body: string(body), Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}()
	if !clk.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("the record did not wait for its turn")
	}
	if len(f.got) != 0 {
		t.Fatal("sent before its turn")
	}
	clk.Advance(10 * time.Second)
	if err := <-done; err != nil || len(f.got) != 1 || len(f.q.sent) != 0 {
		t.Fatalf("Handle = %v, %d sends, %d re-published; want one send after the wait", err, len(f.got), len(f.q.sent))
	}
}

func newContractWithClock(t *testing.T, clk *clock.Fake, lim *ratelimit.Limiter) *contractFixture {
	t.Helper()
	t.Parallel()
	f := &contractFixture{q: &captureSQS{}, clk: clk, logs: &bytes.Buffer{}, m: metrics.New(nil)}
	f.l = mustMemory(clk)
	var err error
	f.c, err = consumer.New(consumer.Config{
		Ledger: f.l, Queue: f.q, QueueURL: "work", DLQURL: "dlq", Clock: clk, MaxAttempts: 3, Metrics: f.m,
		Logger: slog.New(slog.NewJSONHandler(f.logs, nil)),
		Providers: map[string]provider.Provider{"ses": provider.Func(func(_ context.Context, req provider.Request, _ string) (provider.Receipt, error) {
			f.got = append(f.got, req)
			return provider.Receipt{}, nil
		})},
		Limits: map[string]*ratelimit.Limiter{"ses": lim},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestAnUnknownAmbiguousPolicyIsRefused(t *testing.T) {
	t.Parallel()
	_, err := consumer.New(consumer.Config{Ledger: memLedger{}, Queue: &captureSQS{}, QueueURL: "w", DLQURL: "d",
		Providers: map[string]provider.Provider{"ses": provider.Func(nil)}, Ambiguous: map[string]provider.AmbiguousPolicy{"ses": "maybe"}})
	if err == nil || !strings.Contains(err.Error(), "not retry, review or record") {
		t.Fatalf("New = %v", err)
	}
}

// TestARecordOnAnotherProvidersQueueIsForwardedNotSent: a paced
// provider's record that arrives on the default work queue (redriven there,
// or in flight across the deploy that added its queue) goes to its own
// queue, due when it was, with the dead letter's attributes its claim needs
// to revive the delivery; it is acknowledged and nothing is sent or
// claimed from the default queue.
func TestARecordOnAnotherProvidersQueueIsForwardedNotSent(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	lim, _ := ratelimit.New(ratelimit.Config{PerSecond: 0.1, Clock: clk})
	f := newContractWithClock(t, clk, lim)
	f.seed(t)
	sends := 0
	routes, err := envelope.ParseRoutes("https://sqs/nudge-dev-work", "ses=https://sqs/nudge-dev-work-ses")
	if err != nil {
		t.Fatal(err)
	}
	c, err := consumer.New(consumer.Config{Ledger: f.l, Queue: f.q, QueueURL: routes.Default, Routes: routes, DLQURL: "dlq", Clock: clk, Metrics: f.m,
		Logger: slog.New(slog.NewJSONHandler(f.logs, nil)), Limits: map[string]*ratelimit.Limiter{"ses": lim},
		Providers: map[string]provider.Provider{"ses": provider.Func(func(context.Context, provider.Request, string) (provider.Receipt, error) {
			sends++
			return provider.Receipt{}, nil
		})}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := message.Encode(message.Message{ReminderID: "rem-1", Channel: "email", Provider: "ses", DueAt: clk.Now().Add(30 * time.Second)})
	class := "ambiguous"
	err = c.Handle(context.Background(), events.SQSMessage{MessageId: "m-1", Body: string(body), EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:nudge-dev-work",
		MessageAttributes: map[string]events.SQSMessageAttribute{deadletter.AttrErrorClass: {StringValue: &class, DataType: "String"}},
		Attributes:        map[string]string{"ApproximateReceiveCount": "1"}})
	if err != nil || len(f.q.sent) != 1 || sends != 0 {
		t.Fatalf("Handle = %v, %d forwarded, %d sent from the default queue", err, len(f.q.sent), sends)
	}
	sent := f.q.sent[0]
	if aws.ToString(sent.QueueUrl) != "https://sqs/nudge-dev-work-ses" || sent.DelaySeconds != 30 || aws.ToString(sent.MessageBody) != string(body) {
		t.Fatalf("forwarded to %s with delay %d", aws.ToString(sent.QueueUrl), sent.DelaySeconds)
	}
	if got := sent.MessageAttributes[deadletter.AttrErrorClass]; aws.ToString(got.StringValue) != class {
		t.Fatalf("the forwarded copy lost the dead letter's attributes (%v): its claim could not revive the delivery", sent.MessageAttributes)
	}
	if d := f.status(t); d.Attempts != 0 || d.Status != ledger.StatusQueued {
		t.Fatalf("forwarding claimed the delivery: %d attempts, %s", d.Attempts, d.Status)
	}
	if !strings.Contains(f.logs.String(), `"via":"forward","reason":"to nudge-dev-work-ses"`) {
		t.Fatalf("no forward transition in %s", f.logs.String())
	}
	// On its own queue it is sent.
	clk.Advance(30 * time.Second)
	if err := c.Handle(context.Background(), events.SQSMessage{MessageId: "m-2", Body: string(body), EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:nudge-dev-work-ses",
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}); err != nil || sends != 1 || len(f.q.sent) != 1 {
		t.Fatalf("on its own queue: %v, %d sends, %d messages", err, sends, len(f.q.sent))
	}
}

// TestARepairAfterALapsedLeaseStillReviews: the repair hands a delivery
// whose attempt never ended back to the queue; under review its next
// claim must not send, though the history's last entries no longer show
// the lapsed lease.
func TestARepairAfterALapsedLeaseStillReviews(t *testing.T) {
	f := newContract(t, provider.AmbiguousReview, nil)
	f.seed(t)
	now := f.clk.Now()
	if _, err := f.l.Claim(context.Background(), ledger.Claim{Key: sesKey, Token: "dead-consumer", LeaseUntil: now.Add(time.Minute), DueBy: now}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(15 * time.Minute)
	stale, _ := f.l.Get(context.Background(), sesKey)
	if _, err := f.l.Requeue(context.Background(), stale, "repaired"); err != nil {
		t.Fatal(err)
	}
	if err := f.handle("1"); err != nil {
		t.Fatal(err)
	}
	if d := f.status(t); len(f.got) != 0 || d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassAmbiguous {
		t.Fatalf("%d sends, status %s %s; want none, dead as ambiguous", len(f.got), d.Status, d.LastErrorClass)
	}
}

// TestASecondDLQCopyDoesNotSendAgain: the DLQ holds two copies of one
// dead-lettering (the ledger write after the first DLQ send failed); a
// console redrive moves both. The first revives and sends; the second
// names the same dead-lettering, which is over, and sends nothing.
func TestASecondDLQCopyDoesNotSendAgain(t *testing.T) {
	f := newContract(t, provider.AmbiguousReview, nil)
	f.seed(t)
	f.err = failure.Ambiguous(errors.New("may have sent"))
	_ = f.handle("1") // dead-lettered for review: attempt 1
	letter := f.q.sent[0].MessageAttributes
	body, _ := message.Encode(message.Message{ReminderID: "rem-1", Channel: "email", Provider: "ses", DueAt: f.clk.Now()})
	redriven := func(id string) error {
		attrs := map[string]events.SQSMessageAttribute{}
		for k, v := range letter {
			attrs[k] = events.SQSMessageAttribute{StringValue: v.StringValue, DataType: aws.ToString(v.DataType)}
		}
		return f.c.Handle(context.Background(), events.SQSMessage{MessageId: id, Body: string(body), MessageAttributes: attrs,
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	// The first copy: the send is ambiguous again, so dead again.
	if err := redriven("copy-1"); err != nil || len(f.got) != 2 {
		t.Fatalf("first copy: %v, %d sends", err, len(f.got))
	}
	if err := redriven("copy-2"); err != nil || len(f.got) != 2 {
		t.Fatalf("second copy: %v, %d sends; want no third send", err, len(f.got))
	}
}
