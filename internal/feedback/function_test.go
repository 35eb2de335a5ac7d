package feedback_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/smithy-go"

	"github.com/nudgehq/nudge/internal/feedback"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
)

var t0 = time.Date(2026, 11, 30, 8, 59, 0, 0, time.UTC)

// setup is a Memory ledger holding the fixtures' delivery, sent with SES's
// message id as its receipt, and the function over it with its logs and
// metrics in buffers.
type setup struct {
	t       *testing.T
	led     *ledger.Memory
	fn      *feedback.Function
	logs    *lockedBuffer
	metrics *lockedBuffer
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

func newSetup(t *testing.T, rec func(*ledger.Memory) feedback.Recorder) *setup {
	t.Helper()
	clk := clock.NewFake(t0)
	led, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d := ledger.Delivery{ReminderID: fixtureKey.ReminderID, Channel: "email", Provider: "ses", Address: recipient, RecipientRef: "acct-1/contact-2",
		TemplateRef: "renewal-notice", DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour), Status: ledger.StatusQueued}
	if err := led.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	c, err := led.Claim(ctx, ledger.Claim{Key: d.Key(), Token: "tok", LeaseUntil: t0.Add(time.Minute), DueBy: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := led.Complete(ctx, c, sesMessageID); err != nil {
		t.Fatal(err)
	}
	s := &setup{t: t, led: led, logs: &lockedBuffer{}, metrics: &lockedBuffer{}}
	var r feedback.Recorder = led
	if rec != nil {
		r = rec(led)
	}
	s.fn, err = feedback.NewFunction(feedback.Config{Ledger: r, Stage: "dev", Clock: clk, MetricsOut: s.metrics,
		Logger: slog.New(slog.NewJSONHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run hands the function one SQS event of bodies, record i with message
// id "m-<i>", and returns the ids it reported failed.
func (s *setup) run(bodies ...[]byte) []string {
	s.t.Helper()
	var ev events.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprint("m-", i), Body: string(b), ReceiptHandle: fmt.Sprint("h-", i),
			EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:nudge-dev-feedback"})
	}
	resp, err := s.fn.Handle(context.Background(), ev)
	if err != nil {
		s.t.Fatal(err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	slices.Sort(failed)
	return failed
}

// counts sums the EMF lines' metrics written so far, by name, and by
// name/dimension=value for the split ones.
func (s *setup) counts() map[string]float64 {
	s.t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(s.metrics.String()))
	for sc.Scan() {
		var doc map[string]any
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			s.t.Fatalf("an EMF line is not JSON: %v", err)
		}
		aws := doc["_aws"].(map[string]any)
		cw := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
		if cw["Namespace"] != "Nudge" || doc["Function"] != "feedback" {
			s.t.Fatalf("EMF line %v: want namespace Nudge, Function feedback", doc)
		}
		for _, m := range cw["Metrics"].([]any) {
			name := m.(map[string]any)["Name"].(string)
			v := doc[name].(float64)
			out[name] += v
			for _, dim := range []string{"Kind", "ErrorClass"} {
				if d, ok := doc[dim].(string); ok {
					out[name+"/"+dim+"="+d] += v
				}
			}
		}
	}
	return out
}

func (s *setup) delivery() ledger.Delivery {
	s.t.Helper()
	d, err := s.led.Get(context.Background(), fixtureKey)
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

// TestOutOfOrderLateAndRepeatedEventsLeaveTheFailingOneStanding: SES's
// events for one e-mail, in an order SES does not promise and with a
// repeat: the complaint stands over an earlier hard bounce arriving late
// and a delivery; the status stays sent; each event is in the history
// once.
func TestOutOfOrderLateAndRepeatedEventsLeaveTheFailingOneStanding(t *testing.T) {
	t.Parallel()
	s := newSetup(t, nil)
	if failed := s.run(fixture(t, "delivery.json"), fixture(t, "send.json")); len(failed) != 0 {
		t.Fatalf("failed %v", failed)
	}
	if d := s.delivery(); d.Feedback.Kind != ledger.FeedbackDelivered || d.Failed() {
		t.Fatalf("delivered, then an older send: %+v", d.Feedback)
	}
	// One at a time, so that the order is the one written.
	for _, name := range []string{"complaint.json", "delivery-delay.json", "bounce-permanent.json", "complaint.json", "bounce-transient.json"} {
		if failed := s.run(fixture(t, name)); len(failed) != 0 {
			t.Fatalf("%s failed", name)
		}
	}
	d := s.delivery()
	if d.Status != ledger.StatusSent || d.Feedback.Kind != ledger.FeedbackComplained || d.Feedback.Detail != "abuse" || !d.Failed() ||
		d.Feedback.MessageID != sesMessageID {
		t.Fatalf("the delivery: status %s, feedback %+v", d.Status, d.Feedback)
	}
	notes := []string{}
	for _, e := range d.History {
		if e.Feedback {
			notes = append(notes, e.Note)
		}
	}
	// The history keeps 8 entries, the last two transitions among them.
	want := []string{"delayed TransientCommunicationFailure; complained abuse stands", "bounced Permanent/General 5.1.1; complained abuse stands",
		"bounced Transient/MailboxFull 4.2.2; complained abuse stands"}
	if !slices.Equal(notes[len(notes)-3:], want) {
		t.Errorf("feedback entries %q; want them to end %q", notes, want)
	}
	c := s.counts()
	// The Send event of the message the delivery records sent adds nothing:
	// not written.
	if c["FeedbackRecorded"] != 5 || c["FeedbackRedundant"] != 1 ||
		c["FeedbackRepeated"] != 1 || c["FeedbackRecorded/Kind=complained"] != 1 || c["FeedbackRecorded/Kind=bounced"] != 2 {
		t.Errorf("metrics %v", c)
	}
}

// failing is a ledger that answers as told for the record whose event
// names a given message id, and records the rest in the Memory ledger.
type failing struct {
	*ledger.Memory
	by map[string]error // by feedback kind
}

func (f failing) RecordFeedback(ctx context.Context, k message.DeliveryKey, fb ledger.Feedback) (ledger.Delivery, error) {
	if err, ok := f.by[string(fb.Kind)]; ok {
		return ledger.Delivery{}, err
	}
	return f.Memory.RecordFeedback(ctx, k, fb)
}

// httpStatus is an error with the HTTP status DynamoDB answered it with,
// as the SDK's response errors carry it.
type httpStatus struct {
	error
	code int
}

func (h httpStatus) StatusCode() int { return h.code }
func (h httpStatus) Unwrap() error   { return h.error }

// TestThePartialBatchResponseRetriesOnlyLedgerFailures: of one batch, the
// records the ledger failed on (throttled, a 5xx) are reported for retry;
// the recorded, repeated, unmatched, foreign and unreadable ones are
// acknowledged, each counted.
func TestThePartialBatchResponseRetriesOnlyLedgerFailures(t *testing.T) {
	t.Parallel()
	throttled := &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException", Message: "Rate of requests exceeds the allowed throughput."}
	server := httpStatus{code: 500, error: &smithy.GenericAPIError{Code: "InternalServerError", Message: "Internal server error", Fault: smithy.FaultServer}}
	s := newSetup(t, func(m *ledger.Memory) feedback.Recorder {
		return failing{Memory: m, by: map[string]error{
			string(ledger.FeedbackDelayed):  fmt.Errorf("ledger: feedback: %w", throttled),
			string(ledger.FeedbackRejected): fmt.Errorf("ledger: feedback: %w", server),
		}}
	})
	unknown := edit(t, "complaint.json", func(_, _, mail map[string]any) {
		mail["tags"].(map[string]any)["nudge_reminder"] = []any{"rem-purged"}
	})
	other := edit(t, "delivery.json", func(_, _, mail map[string]any) {
		mail["tags"].(map[string]any)["ses:configuration-set"] = []any{"nudge-prod"}
	})
	failed := s.run(
		fixture(t, "bounce-permanent.json"), // m-0 recorded
		fixture(t, "bounce-permanent.json"), // m-1 a repeat (or the first, whichever runs first)
		fixture(t, "delivery-delay.json"),   // m-2 throttled: retried
		fixture(t, "reject.json"),           // m-3 5xx: retried
		unknown,                             // m-4 unmatched
		other,                               // m-5 another stage's
		fixture(t, "open.json"),             // m-6 not recorded
		[]byte(`{"source":"aws.ses","detail-type":"Email Bounced","detail":{"eventType":"Bounce"}}`), // m-7 malformed
	)
	if !slices.Equal(failed, []string{"m-2", "m-3"}) {
		t.Fatalf("batch item failures %v; want m-2 and m-3, the ledger's failures", failed)
	}
	c := s.counts()
	for name, n := range map[string]float64{"FeedbackRecorded": 1, "FeedbackRepeated": 1, "FeedbackRetried": 2, "FeedbackRetried/ErrorClass=throttled": 1,
		"FeedbackRetried/ErrorClass=server": 1, "FeedbackUnmatched": 1, "FeedbackIgnored": 2, "FeedbackUndecodable": 1} {
		if c[name] != n {
			t.Errorf("%s = %v, want %v (all: %v)", name, c[name], n, c)
		}
	}
	if d := s.delivery(); !d.Failed() || d.Feedback.Detail != "Permanent/General 5.1.1" {
		t.Errorf("the delivery's feedback: %+v", d.Feedback)
	}
	logs := s.logs.String()
	if !strings.Contains(logs, `"msg":"feedback for a delivery the ledger does not hold"`) || !strings.Contains(logs, sesMessageID) {
		t.Errorf("the unmatched event's line is missing or lacks the message id:\n%s", logs)
	}
}

// TestNoAddressReachesTheLogsOrTheMetrics runs every fixture and variant
// through the function, recorded, repeated and unmatched, and finds no
// address in what it wrote.
func TestNoAddressReachesTheLogsOrTheMetrics(t *testing.T) {
	t.Parallel()
	s := newSetup(t, nil)
	var bodies [][]byte
	for _, name := range []string{"send.json", "delivery.json", "bounce-permanent.json", "bounce-transient.json", "complaint.json", "reject.json",
		"delivery-delay.json", "rendering-failure.json", "open.json"} {
		b := fixture(t, name)
		bodies = append(bodies, b, b, edit(t, name, func(_, _, mail map[string]any) {
			dropHeader(mail)
			mail["tags"].(map[string]any)["nudge_reminder"] = []any{"rem-unknown"}
		}))
	}
	for _, v := range variants(t) {
		bodies = append(bodies, v.body)
	}
	if failed := s.run(bodies...); len(failed) != 0 {
		t.Fatalf("failed %v", failed)
	}
	if c := s.counts(); c["FeedbackRecorded"]+c["FeedbackRedundant"] != 9 || c["FeedbackUnmatched"] != 8 {
		t.Fatalf("metrics %v: the events did not all reach the ledger", c)
	}
	for what, out := range map[string]string{"logs": s.logs.String(), "metrics": s.metrics.String()} {
		if strings.Contains(out, "@") {
			t.Errorf("the %s name an address:\n%s", what, out)
		}
	}
	d := s.delivery()
	if b, _ := json.Marshal(struct {
		F ledger.Feedback
		H []ledger.Entry
	}{d.Feedback, d.History}); strings.Contains(string(b), "@") {
		t.Errorf("the delivery's feedback or history names an address: %s", b)
	}
}

// TestSettingsComeFromTheEnvironment: the table and the stage are
// required, and the error names the variable.
func TestSettingsComeFromTheEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NUDGE_TABLE": "nudge-dev-ledger", "NUDGE_STAGE_NAME": "dev"}
	s, err := feedback.SettingsFromEnv(func(k string) string { return env[k] })
	if err != nil || s.Table != "nudge-dev-ledger" || s.Stage != "dev" {
		t.Fatalf("%+v, %v", s, err)
	}
	delete(env, "NUDGE_STAGE_NAME")
	if _, err := feedback.SettingsFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "NUDGE_STAGE_NAME") {
		t.Fatalf("without a stage: %v", err)
	}
	if _, err := feedback.NewFunction(feedback.Config{Stage: "dev"}); err == nil {
		t.Fatal("a function without a ledger was made")
	}
}

// markFailing is a Memory ledger whose feedback mark cannot be written.
type markFailing struct{ *ledger.Memory }

func (markFailing) RecordFeedbackMark(context.Context, string, time.Time) error {
	return errors.New("ledger: record ses's feedback mark: throttled")
}

// TestTheMarkNeverMovesPastAReportStillRetried: a batch one of whose
// records is left on the queue (the ledger throttled it) writes no mark,
// though a later e-mail's event of it was recorded: the retried report may
// be of an e-mail accepted earlier, which the consumer would otherwise send
// again. The batch that records it writes the mark. A mark the ledger
// cannot write is counted.
func TestTheMarkNeverMovesPastAReportStillRetried(t *testing.T) {
	t.Parallel()
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}
	fail := map[string]error{string(ledger.FeedbackDelayed): fmt.Errorf("ledger: feedback: %w", throttled)}
	s := newSetup(t, func(m *ledger.Memory) feedback.Recorder { return failing{Memory: m, by: fail} })
	mailAt := func(name, ts string) []byte {
		return edit(t, name, func(_, _, mail map[string]any) { mail["timestamp"] = ts })
	}
	earlier, later := mailAt("delivery-delay.json", "2026-11-30T09:00:00.000Z"), mailAt("delivery.json", "2026-11-30T09:00:30.000Z")
	if failed := s.run(earlier, later); !slices.Equal(failed, []string{"m-0"}) {
		t.Fatalf("batch item failures %v, want m-0", failed)
	}
	if at, _ := s.led.FeedbackMark(context.Background(), "ses"); !at.IsZero() {
		t.Fatalf("mark %v written by a batch whose report of an earlier e-mail is retried", at)
	}
	delete(fail, string(ledger.FeedbackDelayed))
	if failed := s.run(earlier); len(failed) != 0 {
		t.Fatalf("the retry failed: %v", failed)
	}
	if at, _ := s.led.FeedbackMark(context.Background(), "ses"); !at.Equal(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("mark %v after the retry, want its e-mail's 09:00:00", at)
	}

	m := newSetup(t, func(m *ledger.Memory) feedback.Recorder { return markFailing{m} })
	m.run(later)
	if n := m.counts()[feedback.MetricMarkFailed]; n != 1 {
		t.Fatalf("%s = %v, want 1 (all: %v)", feedback.MetricMarkFailed, n, m.counts())
	}
}
