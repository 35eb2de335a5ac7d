package consumer_test

// The record policy: an ambiguous SES send waits for SES's record, and is
// recorded sent by it, sent again when SES reported later e-mails but not
// it, or dead-lettered for review when nothing settles it.

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
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

func newRecord(t *testing.T) *contractFixture {
	t.Helper()
	return newRecordWith(t, nil)
}

// newRecordWith is newRecord with records (nil: the ledger) for
// Config.Records.
func newRecordWith(t *testing.T, records func(*ledger.Memory) consumer.RecordLedger) *contractFixture {
	t.Helper()
	t.Parallel()
	f := &contractFixture{q: &captureSQS{}, clk: clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)), logs: &bytes.Buffer{}}
	f.l = mustMemory(f.clk)
	f.m = metrics.New(nil)
	var rl consumer.RecordLedger
	if records != nil {
		rl = records(f.l)
	}
	var err error
	f.c, err = consumer.New(consumer.Config{
		Records: rl,
		Ledger:  f.l, Queue: f.q, QueueURL: "work", DLQURL: "dlq", Clock: f.clk, MaxAttempts: 3, Metrics: f.m,
		Logger:      slog.New(slog.NewJSONHandler(f.logs, nil)),
		Providers:   map[string]provider.Provider{"ses": probing{f}},
		Ambiguous:   map[string]provider.AmbiguousPolicy{"ses": provider.AmbiguousRecord},
		RecordWaits: map[string]provider.RecordWait{"ses": {Record: "SES's record", Window: 15 * time.Minute, MaxWait: 40 * time.Minute}},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.seed(t)
	return f
}

// probing is the fixture's SES: it records sends and probes.
type probing struct{ f *contractFixture }

func (p probing) Send(_ context.Context, req provider.Request, _ string) (provider.Receipt, error) {
	p.f.got = append(p.f.got, req)
	return provider.Receipt{ID: "msg-1"}, p.f.err
}

func (p probing) Probe(_ context.Context, key string) (provider.Receipt, error) {
	p.f.probes = append(p.f.probes, key)
	return provider.Receipt{ID: "probe-1"}, p.f.probeErr
}

// ambiguous makes the first send time out after the request was written,
// and checks that it waits for the record: retrying as ambiguous for the
// window, its message re-published with that delay, nothing dead-lettered.
func (f *contractFixture) ambiguous(t *testing.T) {
	t.Helper()
	f.err = failure.Ambiguous(failure.WithClass(context.DeadlineExceeded, failure.ClassTimeout))
	if err := f.handle("1"); err != nil {
		t.Fatalf("the wait is a re-published copy, the record acknowledged: %v", err)
	}
	f.err = nil
	d := f.status(t)
	if d.Status != ledger.StatusRetrying || d.LastErrorClass != failure.ClassAmbiguous || !d.NextAttemptAt.Equal(f.clk.Now().Add(15*time.Minute)) ||
		d.LastError != "awaits ses record to "+f.clk.Now().Add(15*time.Minute).Format("15:04:05Z") || len(d.LastError) > 32 ||
		d.History[len(d.History)-1].Note != d.LastError {
		t.Fatalf("after the ambiguous send: %+v; want a wait until the window's end, noted in at most 32 bytes", d)
	}
	if len(f.q.sent) != 1 || aws.ToString(f.q.sent[0].QueueUrl) != "work" || f.q.sent[0].DelaySeconds != 900 {
		t.Fatalf("want one copy on the work queue in 900 s, got %d sends", len(f.q.sent))
	}
}

func (f *contractFixture) metric(name string) string {
	var emf bytes.Buffer
	_ = f.m.Flush(&emf, f.clk.Now())
	return emf.String()
}

// Case a: SES's record came: sent, with SES's id, and not sent again.
func TestAnAmbiguousSendSESRecordedIsRecordedSentWithoutASend(t *testing.T) {
	f := newRecord(t)
	f.ambiguous(t)
	f.clk.Advance(20 * time.Second)
	if _, err := f.l.RecordFeedback(context.Background(), sesKey, ledger.Feedback{Kind: ledger.FeedbackSentByProvider, At: f.clk.Now().Add(-19 * time.Second),
		ID: "ses-9:Send", MessageID: "ses-9"}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(15 * time.Minute)
	if err := f.handle("1"); err != nil {
		t.Fatal(err)
	}
	d := f.status(t)
	last := d.History[len(d.History)-1]
	if len(f.got) != 1 || d.Status != ledger.StatusSent || d.Receipt != "ses-9" || d.Attempts != 1 || last.Note != "sent, by SES's record" {
		t.Fatalf("sends %d, delivery %+v; want one send, sent with ses-9 by the record", len(f.got), d)
	}
	if !strings.Contains(f.metric(""), consumer.MetricAmbiguousSettled) {
		t.Error("AmbiguousSettled not counted")
	}
	f.noAddressLeaks(t)
}

// Case b: the window passed, SES reported a later e-mail but not this one:
// sent again, once, under the same key.
func TestAnAmbiguousSendSESDidNotReportIsSentAgainOnceTheWindowPassed(t *testing.T) {
	f := newRecord(t)
	start := f.clk.Now()
	f.ambiguous(t)
	// A later e-mail's report, accepted 2 s after the attempt started.
	if err := f.l.RecordFeedbackMark(context.Background(), "ses", start.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(15 * time.Minute)
	if err := f.handle("1"); err != nil {
		t.Fatal(err)
	}
	d := f.status(t)
	if len(f.got) != 2 || f.got[1].DeliveryKey != sesKey.String() || d.Status != ledger.StatusSent || d.Receipt != "msg-1" {
		t.Fatalf("sends %d, delivery %+v; want it sent again", len(f.got), d)
	}
	if !strings.Contains(f.metric(""), consumer.MetricAmbiguousResent) {
		t.Error("AmbiguousResent not counted")
	}
}

// Case c: no report yet, or only of e-mails accepted before the attempt
// (the path may be behind): it waits again, spending no attempt, and the
// history keeps the attempt's start.
func TestAnAmbiguousSendWaitsWhileThePathShowsNothingLater(t *testing.T) {
	f := newRecord(t)
	start := f.clk.Now()
	f.ambiguous(t)
	if err := f.l.RecordFeedbackMark(context.Background(), "ses", start.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	for look := range 2 {
		f.clk.Advance(15 * time.Minute)
		if err := f.handle("1"); err != nil {
			t.Fatal(err)
		}
		d := f.status(t)
		if len(f.got) != 1 || d.Status != ledger.StatusRetrying || d.Attempts != 1 || d.LastErrorClass != failure.ClassAmbiguous {
			t.Fatalf("look %d: sends %d, delivery %+v; want it waiting, attempt 1", look, len(f.got), d)
		}
		if h := d.Transitions(); h[len(h)-2].At != ledger.Format(start) {
			t.Fatalf("look %d: the attempt's start is gone from %+v", look, h)
		}
		// A probe each window, since its report did not come.
		if len(f.probes) != look+1 {
			t.Fatalf("look %d: %d probes, want %d", look, len(f.probes), look+1)
		}
	}
	// The last wait ends at MaxWait (40 min), not a window later.
	if d := f.status(t); !d.NextAttemptAt.Equal(start.Add(40 * time.Minute)) {
		t.Fatalf("next look at %v, want MaxWait's end %v", d.NextAttemptAt, start.Add(40*time.Minute))
	}
}

// Case d: MaxWait passed with nothing settled: dead-lettered as ambiguous,
// for review, having been sent once.
func TestAnAmbiguousSendNothingSettlesIsReviewedAfterMaxWait(t *testing.T) {
	f := newRecord(t)
	f.ambiguous(t)
	for range 3 {
		f.clk.Advance(15 * time.Minute)
		if err := f.handle("1"); err != nil {
			t.Fatal(err)
		}
	}
	d := f.status(t)
	letter := deadletter.Read(f.q.sent[len(f.q.sent)-1].MessageAttributes)
	// A probe at each look but the last, whose report nothing would read.
	if len(f.probes) != 2 {
		t.Errorf("%d probes, want 2 (none at the look that ends the wait)", len(f.probes))
	}
	if len(f.got) != 1 || d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassAmbiguous ||
		letter.Class != failure.ClassAmbiguous || !strings.Contains(letter.Reason, "did not settle it within 40m0s") {
		t.Fatalf("sends %d, delivery %+v, letter %+v; want dead as ambiguous after 40 min", len(f.got), d, letter)
	}
}

// A claim that takes over a lapsed lease (the attempt's consumer died,
// maybe after SES accepted) waits for the record too, and is settled by it.
func TestALapsedLeaseWaitsForTheRecordAndIsSettledByIt(t *testing.T) {
	f := newRecord(t)
	ctx := context.Background()
	start := f.clk.Now()
	if _, err := f.l.Claim(ctx, ledger.Claim{Key: sesKey, Token: "dead-consumer", LeaseUntil: start.Add(time.Minute), DueBy: start}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(2 * time.Minute)
	if err := f.handle("2"); err != nil {
		t.Fatal(err)
	}
	d := f.status(t)
	if len(f.got) != 0 || d.Status != ledger.StatusRetrying || d.Attempts != 1 || !d.NextAttemptAt.Equal(start.Add(15*time.Minute)) {
		t.Fatalf("sends %d, delivery %+v; want a wait until the window's end, nothing sent", len(f.got), d)
	}
	delivered := ledger.Feedback{Kind: ledger.FeedbackDelivered, At: start.Add(3 * time.Second), ID: "ses-7:Delivery", MessageID: "ses-7"}
	if _, err := f.l.RecordFeedback(ctx, sesKey, delivered); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(13 * time.Minute)
	if err := f.handle("1"); err != nil {
		t.Fatal(err)
	}
	if d = f.status(t); len(f.got) != 0 || d.Status != ledger.StatusSent || d.Receipt != "ses-7" {
		t.Fatalf("sends %d, delivery %+v; want sent by the record", len(f.got), d)
	}
}

// Record is refused for a provider that reports nothing, and without the
// wait.
func TestTheRecordPolicyNeedsItsWait(t *testing.T) {
	t.Parallel()
	_, err := consumer.New(consumer.Config{Ledger: mustMemory(clock.Real{}), Queue: &captureSQS{}, QueueURL: "w", DLQURL: "d",
		Providers: map[string]provider.Provider{"ses": provider.Func(nil)}, Ambiguous: map[string]provider.AmbiguousPolicy{"ses": provider.AmbiguousRecord}})
	if err == nil || !strings.Contains(err.Error(), "without a window") {
		t.Fatalf("New = %v", err)
	}
}

// Whatever brings a claim, a delivery SES reported is recorded sent by the
// record, not sent again: here the DLQ copy of a delivery reviewed (dead
// as ambiguous), redriven after the feedback function recorded SES's
// report and before it settled the delivery.
func TestARedriveOfADeliverySESReportedIsSettledNotSent(t *testing.T) {
	f := newRecord(t)
	ctx := context.Background()
	f.ambiguous(t)
	for range 3 {
		f.clk.Advance(15 * time.Minute)
		if err := f.handle("1"); err != nil {
			t.Fatal(err)
		}
	}
	if d := f.status(t); d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassAmbiguous {
		t.Fatalf("want it reviewed, dead as ambiguous: %+v", d)
	}
	letter := f.q.sent[len(f.q.sent)-1]
	if _, err := f.l.RecordFeedback(ctx, sesKey, ledger.Feedback{Kind: ledger.FeedbackDelivered, At: f.clk.Now(), ID: "ses-5:Delivery",
		MessageID: "ses-5"}); err != nil {
		t.Fatal(err)
	}
	attrs := map[string]events.SQSMessageAttribute{}
	for k, v := range letter.MessageAttributes {
		attrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
	}
	err := f.c.Handle(ctx, events.SQSMessage{MessageId: "m-redriven", ReceiptHandle: "h", Body: aws.ToString(letter.MessageBody),
		MessageAttributes: attrs, Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	d := f.status(t)
	if len(f.got) != 1 || d.Status != ledger.StatusSent || d.Receipt != "ses-5" || d.Transitions()[len(d.Transitions())-1].Note != "sent, by SES's record" {
		t.Fatalf("sends %d, delivery %s with receipt %q, history %+v; want one send, then sent by the record", len(f.got), d.Status, d.Receipt, d.History)
	}
}

// markUnread is a ledger whose feedback mark cannot be read.
type markUnread struct{ *ledger.Memory }

func (markUnread) FeedbackMark(context.Context, string) (time.Time, error) {
	return time.Time{}, errors.New("ledger: read ses's feedback mark: throttled")
}

// A feedback mark that cannot be read once the window has passed: the
// delivery waits again, not sent again, and the failure is counted.
func TestAFeedbackMarkThatCannotBeReadIsCountedAndWaitedOn(t *testing.T) {
	f := newRecordWith(t, func(m *ledger.Memory) consumer.RecordLedger { return markUnread{m} })
	f.ambiguous(t)
	f.clk.Advance(15 * time.Minute)
	if err := f.handle("1"); err != nil {
		t.Fatal(err)
	}
	if d := f.status(t); len(f.got) != 1 || d.Status != ledger.StatusRetrying {
		t.Fatalf("sends %d, delivery %s; want it waiting again", len(f.got), d.Status)
	}
	if !strings.Contains(f.metric(""), consumer.MetricFeedbackMarkUnread) {
		t.Errorf("%s not counted", consumer.MetricFeedbackMarkUnread)
	}
}

// A quiet stage: the window passed and SES reported nothing accepted after
// the attempt. The consumer sends a probe (once per window for the stage),
// and once the probe's report moved the mark, the delivery is sent again.
func TestAQuietStageProbesAndSendsAgainOnceTheProbeIsReported(t *testing.T) {
	f := newRecord(t)
	ctx := context.Background()
	f.ambiguous(t)
	f.clk.Advance(15 * time.Minute)
	probeAt := f.clk.Now()
	if err := f.handle("1"); err != nil {
		t.Fatal(err)
	}
	want := ledger.ProbeKey("ses", "email", probeAt)
	if d := f.status(t); len(f.got) != 1 || d.Status != ledger.StatusRetrying || len(f.probes) != 1 || f.probes[0] != want.String() ||
		!ledger.IsProbe(want) {
		t.Fatalf("sends %d, delivery %s, probes %q; want it waiting, one probe under %s", len(f.got), d.Status, f.probes, want)
	}
	if !strings.Contains(f.metric(""), consumer.MetricProbe) {
		t.Errorf("%s not counted", consumer.MetricProbe)
	}
	// Another consumer's delivery waiting in the same window: no second
	// probe for the stage.
	if ok, err := f.l.ClaimProbe(ctx, "ses", probeAt.Add(-time.Minute), probeAt.Add(time.Minute), 15*time.Minute); err != nil || ok {
		t.Fatalf("a second probe in the window: granted %v, %v", ok, err)
	}
	// The probe's report: the feedback function moves the mark.
	if err := f.l.RecordFeedbackMark(ctx, "ses", probeAt.Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(15 * time.Minute)
	if err := f.handle("1"); err != nil {
		t.Fatal(err)
	}
	if d := f.status(t); len(f.got) != 2 || d.Status != ledger.StatusSent || len(f.probes) != 1 {
		t.Fatalf("sends %d, delivery %s, probes %d; want it sent again, no second probe", len(f.got), d.Status, len(f.probes))
	}
}

// A probe that fails is counted; the delivery waits, and the next window
// probes again.
func TestAFailedProbeIsCountedAndTriedAgainAWindowLater(t *testing.T) {
	f := newRecord(t)
	f.ambiguous(t)
	f.probeErr = errors.New("ses: answered 500")
	f.clk.Advance(15 * time.Minute)
	if err := f.handle("1"); err != nil {
		t.Fatal(err)
	}
	if d := f.status(t); d.Status != ledger.StatusRetrying || len(f.probes) != 1 || !strings.Contains(f.metric(""), `"Outcome":"failed"`) {
		t.Fatalf("delivery %s, probes %d, metrics %s; want it waiting after one failed probe", d.Status, len(f.probes), f.metric(""))
	}
	f.probeErr = nil
	f.clk.Advance(15 * time.Minute)
	if err := f.handle("1"); err != nil {
		t.Fatal(err)
	}
	if len(f.probes) != 2 || len(f.got) != 1 {
		t.Fatalf("probes %d, sends %d; want a second probe, no send", len(f.probes), len(f.got))
	}
}
