package feedback_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/feedback"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

// store is what these tests need of a ledger: the function's, and what
// sets the delivery up and reads it and the mark back.
type store interface {
	feedback.Recorder
	Create(ctx context.Context, d ledger.Delivery) error
	Claim(ctx context.Context, c ledger.Claim) (ledger.Delivery, error)
	DeadLetter(ctx context.Context, d ledger.Delivery, f ledger.Failure) (ledger.Delivery, error)
	AwaitRecord(ctx context.Context, d ledger.Delivery, w ledger.Await) (ledger.Delivery, error)
	Cancel(ctx context.Context, key message.DeliveryKey, note string) (ledger.Delivery, error)
	Expire(ctx context.Context, d ledger.Delivery) (ledger.Delivery, error)
	Get(ctx context.Context, key message.DeliveryKey) (ledger.Delivery, error)
	FeedbackMark(ctx context.Context, provider string) (time.Time, error)
	ClaimProbe(ctx context.Context, provider string, since, now time.Time, every time.Duration) (bool, error)
}

// onBoth runs test on the Memory ledger and on DynamoDB Local.
func onBoth(t *testing.T, test func(t *testing.T, l store, clk *clock.Fake)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(t0)
		m, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		test(t, m, clk)
	})
	t.Run("dynamodb", func(t *testing.T) {
		t.Parallel()
		db := standintest.DynamoDB(t)
		clk := clock.NewFake(t0)
		l, err := ledger.New(db, ledger.Config{Table: standintest.Table(t, db), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		test(t, l, clk)
	})
}

func newFunction(t *testing.T, l store, clk clock.Clock) (*feedback.Function, *lockedBuffer) {
	t.Helper()
	metrics := &lockedBuffer{}
	fn, err := feedback.NewFunction(feedback.Config{Ledger: l, Stage: "dev", Clock: clk, MetricsOut: metrics,
		Logger: slog.New(slog.NewJSONHandler(&lockedBuffer{}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return fn, metrics
}

// TestAnEventSettlesADeliveryDeadAsAmbiguous: an ambiguous send reviewed
// (dead, class ambiguous) that SES reports is recorded sent with SES's
// message id, once; a redrive of its DLQ copy then finds it sent. A
// delivery dead for another reason stays dead.
func TestAnEventSettlesADeliveryDeadAsAmbiguous(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, l store, clk *clock.Fake) {
		ctx := context.Background()
		d := ledger.Delivery{ReminderID: fixtureKey.ReminderID, Channel: "email", Provider: "ses", Address: recipient, RecipientRef: "r", TemplateRef: "t",
			DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour), Status: ledger.StatusQueued}
		if err := l.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		c, err := l.Claim(ctx, ledger.Claim{Key: fixtureKey, Token: "tok", LeaseUntil: t0.Add(time.Minute), DueBy: t0})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.DeadLetter(ctx, c, ledger.Failure{Class: failure.ClassAmbiguous, Message: "may have been sent"}); err != nil {
			t.Fatal(err)
		}
		fn, metrics := newFunction(t, l, clk)
		s := &setup{t: t, fn: fn, metrics: metrics}
		if failed := s.run(fixture(t, "delivery.json"), fixture(t, "send.json")); len(failed) != 0 {
			t.Fatalf("failed %v", failed)
		}
		got, err := l.Get(ctx, fixtureKey)
		if err != nil {
			t.Fatal(err)
		}
		last := got.Transitions()[len(got.Transitions())-1]
		if got.Status != ledger.StatusSent || got.Receipt != sesMessageID || last.Note != "sent, by SES's record" {
			t.Fatalf("the delivery: status %s, receipt %q, last transition %+v; want sent by SES's record", got.Status, got.Receipt, last)
		}
		if n := s.counts()["FeedbackSettled"]; n != 1 {
			t.Fatalf("FeedbackSettled %v, want 1", n)
		}
		_, err = l.Claim(ctx, ledger.Claim{Key: fixtureKey, Token: "redrive", LeaseUntil: clk.Now().Add(time.Minute), DueBy: clk.Now(), Revive: true})
		if !errors.Is(err, ledger.ErrAlreadySent) {
			t.Fatalf("a redrive of its DLQ copy: %v, want already sent", err)
		}
	})
}

// TestTheFeedbackMarkFollowsTheLatestAcceptedEmail: a batch marks the
// latest mail.timestamp among its events; a mark less than MarkEvery newer
// than the container's last write is not written, a later one is.
func TestTheFeedbackMarkFollowsTheLatestAcceptedEmail(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, l store, clk *clock.Fake) {
		ctx := context.Background()
		fn, metrics := newFunction(t, l, clk)
		s := &setup{t: t, fn: fn, metrics: metrics}
		mailAt := func(ts string) []byte {
			return edit(t, "delivery.json", func(_, _, mail map[string]any) { mail["timestamp"] = ts })
		}
		mark := func() time.Time {
			at, err := l.FeedbackMark(ctx, "ses")
			if err != nil {
				t.Fatal(err)
			}
			return at
		}
		// Events of deliveries the ledger does not hold still show the path works.
		s.run(mailAt("2026-11-30T09:00:00.000Z"), mailAt("2026-11-30T09:00:05.000Z"))
		if got := mark(); !got.Equal(at("2026-11-30T09:00:05.000Z")) {
			t.Fatalf("mark %v after the first batch, want its latest e-mail's 09:00:05", got)
		}
		s.run(mailAt("2026-11-30T09:00:08.000Z"))
		if got := mark(); !got.Equal(at("2026-11-30T09:00:05.000Z")) {
			t.Fatalf("mark %v: one 3 s newer than this container's last was written", got)
		}
		s.run(mailAt("2026-11-30T09:00:10.000Z"))
		if got := mark(); !got.Equal(at("2026-11-30T09:00:10.000Z")) {
			t.Fatalf("mark %v, want 09:00:10 (MarkEvery %v newer)", got, feedback.MarkEvery)
		}
	})
}

// TestAnEventSettlesAnExpiryOrCancelAfterAnAmbiguousAttempt: a delivery
// that waited for SES's record and was cancelled, or expired, says its
// attempt may have been sent (class ambiguous); SES's event of it shows it
// went out, and it is recorded sent, its end kept in the history before.
func TestAnEventSettlesAnExpiryOrCancelAfterAnAmbiguousAttempt(t *testing.T) {
	t.Parallel()
	for _, end := range []ledger.Status{ledger.StatusCancelled, ledger.StatusExpired} {
		t.Run(string(end), func(t *testing.T) {
			t.Parallel()
			onBoth(t, func(t *testing.T, l store, clk *clock.Fake) {
				ctx := context.Background()
				d := ledger.Delivery{ReminderID: fixtureKey.ReminderID, Channel: "email", Provider: "ses", Address: recipient, RecipientRef: "r",
					TemplateRef: "t", DueAt: t0, ExpiresAt: t0.Add(time.Minute), Status: ledger.StatusQueued}
				if err := l.Create(ctx, d); err != nil {
					t.Fatal(err)
				}
				c, err := l.Claim(ctx, ledger.Claim{Key: fixtureKey, Token: "tok", LeaseUntil: t0.Add(time.Minute), DueBy: t0})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := l.AwaitRecord(ctx, c, ledger.Await{Note: "awaits ses record to 08:59:10Z", Next: t0.Add(10 * time.Second)}); err != nil {
					t.Fatal(err)
				}
				clk.Advance(2 * time.Minute)
				if end == ledger.StatusCancelled {
					_, err = l.Cancel(ctx, fixtureKey, "cancelled by the owner")
				} else {
					_, err = l.Expire(ctx, d)
				}
				if err != nil {
					t.Fatal(err)
				}
				fn, metrics := newFunction(t, l, clk)
				s := &setup{t: t, fn: fn, metrics: metrics}
				if failed := s.run(fixture(t, "send.json")); len(failed) != 0 {
					t.Fatalf("failed %v", failed)
				}
				got, err := l.Get(ctx, fixtureKey)
				if err != nil {
					t.Fatal(err)
				}
				h := got.Transitions()
				if got.Status != ledger.StatusSent || got.Receipt != sesMessageID || len(h) < 2 || h[len(h)-2].Status != end ||
					h[len(h)-1].Note != "sent, by SES's record" {
					t.Fatalf("the delivery: status %s, receipt %q, history %+v; want %s, then sent by SES's record", got.Status, got.Receipt, got.History, end)
				}
				if n := s.counts()["FeedbackSettled"]; n != 1 {
					t.Fatalf("FeedbackSettled %v, want 1", n)
				}
			})
		})
	}
}

// TestAProbesReportMovesTheMarkAndTouchesNoDelivery: the events of a
// consumer's probe (ledger.ProbeKey) are counted as a probe's, move the
// feedback mark, and are not looked up in the ledger as a delivery's.
func TestAProbesReportMovesTheMarkAndTouchesNoDelivery(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, l store, clk *clock.Fake) {
		ctx := context.Background()
		fn, metrics := newFunction(t, l, clk)
		s := &setup{t: t, fn: fn, metrics: metrics}
		key := ledger.ProbeKey("ses", "email", at("2026-11-30T09:00:00.000Z"))
		probe := edit(t, "delivery.json", func(_, _, mail map[string]any) {
			mail["timestamp"] = "2026-11-30T09:00:00.200Z"
			for _, h := range mail["headers"].([]any) {
				if h := h.(map[string]any); h["name"] == ses.HeaderDeliveryKey {
					h["value"] = key.String()
				}
			}
			mail["tags"].(map[string]any)[ses.TagReminder] = []any{ses.TagValue(key.ReminderID)}
			mail["tags"].(map[string]any)[ses.TagProbe] = []any{"1"}
		})
		if failed := s.run(probe); len(failed) != 0 {
			t.Fatalf("a probe's report left on the queue: %v", failed)
		}
		if got, err := l.FeedbackMark(ctx, "ses"); err != nil || !got.Equal(at("2026-11-30T09:00:00.200Z")) {
			t.Fatalf("mark %v, %v; want the probe's 09:00:00.200", got, err)
		}
		if n := s.counts()[feedback.MetricProbe]; n != 1 {
			t.Fatalf("%s %v, want 1", feedback.MetricProbe, n)
		}
		if n := s.counts()[feedback.MetricUnmatched]; n != 0 {
			t.Fatalf("a probe counted as a report of a delivery the ledger does not hold (%v)", n)
		}
	})
}

// TestOneProbePerWindow: ClaimProbe grants one probe per window for the
// stage, another once a window has passed without its report, or for an
// attempt that started after the last probe; and leaves the mark alone.
func TestOneProbePerWindow(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, l store, clk *clock.Fake) {
		ctx := context.Background()
		const window = 15 * time.Minute
		mark := at("2026-11-30T08:00:00.000Z")
		if err := l.RecordFeedbackMark(ctx, "ses", mark); err != nil {
			t.Fatal(err)
		}
		for i, c := range []struct {
			since, now time.Time
			granted    bool
		}{
			{t0.Add(-time.Minute), t0, true},
			{t0.Add(-time.Minute), t0.Add(time.Minute), false},                   // within the window
			{t0.Add(-2 * time.Minute), t0.Add(14 * time.Minute), false},          // still within
			{t0.Add(-time.Minute), t0.Add(window), true},                         // a window later: the report did not come
			{t0.Add(window + time.Minute), t0.Add(window + 2*time.Minute), true}, // an attempt after the last probe
			{t0.Add(window + time.Minute), t0.Add(window + 3*time.Minute), false},
		} {
			ok, err := l.ClaimProbe(ctx, "ses", c.since, c.now, window)
			if err != nil || ok != c.granted {
				t.Fatalf("claim %d (since %v, now %v): granted %v, %v; want %v", i, c.since, c.now, ok, err, c.granted)
			}
		}
		if got, err := l.FeedbackMark(ctx, "ses"); err != nil || !got.Equal(mark) {
			t.Fatalf("mark %v, %v after the probes' claims, want %v", got, err, mark)
		}
	})
}

// TestAReminderNamedLikeAProbeIsADelivery: a caller may choose a reminder
// id of a probe's form; without the probe's tag its events are recorded on
// its delivery, as any other's.
func TestAReminderNamedLikeAProbeIsADelivery(t *testing.T) {
	t.Parallel()
	onBoth(t, func(t *testing.T, l store, clk *clock.Fake) {
		ctx := context.Background()
		fn, metrics := newFunction(t, l, clk)
		s := &setup{t: t, fn: fn, metrics: metrics}
		key := message.DeliveryKey{ReminderID: ledger.ProbePrefix + "42", Channel: "email", Provider: "ses"}
		if err := l.Create(ctx, ledger.Delivery{ReminderID: key.ReminderID, Channel: "email", Provider: "ses", Address: recipient, RecipientRef: "r",
			TemplateRef: "t", DueAt: t0, ExpiresAt: t0.Add(time.Hour), Status: ledger.StatusQueued}); err != nil {
			t.Fatal(err)
		}
		event := edit(t, "delivery.json", func(_, _, mail map[string]any) {
			for _, h := range mail["headers"].([]any) {
				if h := h.(map[string]any); h["name"] == ses.HeaderDeliveryKey {
					h["value"] = key.String()
				}
			}
			mail["tags"].(map[string]any)[ses.TagReminder] = []any{ses.TagValue(key.ReminderID)}
		})
		if failed := s.run(event); len(failed) != 0 {
			t.Fatalf("left on the queue: %v", failed)
		}
		d, err := l.Get(ctx, key)
		if err != nil || d.Feedback.Kind != ledger.FeedbackDelivered {
			t.Fatalf("the delivery's feedback %+v, %v; want its Delivery event recorded", d.Feedback, err)
		}
		if n := s.counts()[feedback.MetricProbe]; n != 0 {
			t.Fatalf("counted as a probe (%v)", n)
		}
	})
}
