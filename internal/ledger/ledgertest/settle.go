package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/failure"
)

// An ambiguous send settled by the provider's own record: the wait for it
// (AwaitRecord), the settlement (SettleSent) and the feedback mark.

// testAWaitForTheRecordKeepsTheAmbiguousAttempt: the first wait is the
// attempt's retry (class ambiguous); a claim that only looked and waits
// again is taken back, so that the history keeps the attempt's start and
// the attempts count only sends, however many looks.
func testAWaitForTheRecordKeepsTheAmbiguousAttempt(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-await")
	c, err := b.claim("tok-1", d)
	if err != nil {
		t.Fatal(err)
	}
	start := c.History[len(c.History)-1]
	w, err := b.l.AwaitRecord(ctx, c, ledger.Await{Note: "waits for the record", Next: b.clk.Now().Add(15 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if w.Status != ledger.StatusRetrying || w.LastErrorClass != failure.ClassAmbiguous || w.Attempts != 1 || w.ClaimToken != "" ||
		!w.NextAttemptAt.Equal(b.clk.Now().Add(15*time.Minute)) {
		t.Fatalf("after the wait: %+v", w)
	}
	for look := range 5 {
		b.clk.Advance(15 * time.Minute)
		c, err = b.claim("tok-look", d)
		if err != nil {
			t.Fatal(err)
		}
		if c.Attempts != 2 {
			t.Fatalf("look %d claims attempt %d, want 2", look, c.Attempts)
		}
		if w, err = b.l.AwaitRecord(ctx, c, ledger.Await{Note: "waits again", Next: b.clk.Now().Add(time.Minute), Looked: true}); err != nil {
			t.Fatal(err)
		}
	}
	h := w.Transitions()
	if w.Attempts != 1 || len(h) < 2 || h[len(h)-2] != start || h[len(h)-1].Status != ledger.StatusRetrying ||
		h[len(h)-1].Class != failure.ClassAmbiguous || h[len(h)-1].Note != "waits again" || h[len(h)-1].Attempt != 1 {
		t.Fatalf("after five looks: attempts %d, history %+v; want 1 and the attempt's start kept", w.Attempts, w.History)
	}
	// Without the lease, nothing is written.
	_, err = b.l.AwaitRecord(ctx, c, ledger.Await{Note: "late", Next: b.clk.Now()})
	refusal(t, err, ledger.ErrLeaseLost)

	// Cancelled (or expired) while it waits, it says that its attempt may
	// have been sent: the record never settled it.
	x, err := b.l.Cancel(ctx, d.Key(), "cancelled by the owner")
	if err != nil {
		t.Fatal(err)
	}
	if x.Status != ledger.StatusCancelled || x.EndedUnended() != 1 {
		t.Fatalf("cancelled while waiting for the record: %s, unended attempt %d, history %+v; want cancelled, attempt 1 may have been sent",
			x.Status, x.EndedUnended(), x.History)
	}
}

// testTheRecordSettlesAClaimedOrADeadAmbiguousDelivery: a claim that
// finds the record settles it sent with the provider's id, the claim taken
// back; a delivery dead as ambiguous is settled without a lease, once; any
// other dead one is refused, as is a claim no longer held.
func testTheRecordSettlesAClaimedOrADeadAmbiguousDelivery(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-settle-1")
	c, _ := b.claim("tok-1", d)
	if _, err := b.l.AwaitRecord(ctx, c, ledger.Await{Note: "waits", Next: b.clk.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Minute)
	c, _ = b.claim("tok-2", d)
	s, err := b.l.SettleSent(ctx, c, "ses-msg-1", "sent, by the record")
	if err != nil {
		t.Fatal(err)
	}
	last := s.History[len(s.History)-1]
	if s.Status != ledger.StatusSent || s.Receipt != "ses-msg-1" || s.Attempts != 1 || s.SentAt.IsZero() || s.Index != nil ||
		last.Status != ledger.StatusSent || last.Note != "sent, by the record" || last.Attempt != 1 {
		t.Fatalf("settled: %+v", s)
	}
	_, err = b.l.SettleSent(ctx, c, "ses-msg-1", "again")
	refusal(t, err, ledger.ErrAlreadySent)

	dead := b.create(t, "rem-settle-2")
	c, _ = b.claim("tok-3", dead)
	if _, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: failure.ClassAmbiguous, Message: "may have been sent"}); err != nil {
		t.Fatal(err)
	}
	read, err := b.l.Get(ctx, dead.Key())
	if err != nil {
		t.Fatal(err)
	}
	s, err = b.l.SettleSent(ctx, read, "ses-msg-2", "sent, by the record")
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != ledger.StatusSent || s.Receipt != "ses-msg-2" || s.Attempts != 1 || s.History[len(s.History)-1].Note != "sent, by the record" {
		t.Fatalf("settled from dead: %+v", s)
	}
	_, err = b.l.SettleSent(ctx, read, "ses-msg-2", "again")
	refusal(t, err, ledger.ErrAlreadySent)
	// Its DLQ copy, redriven, is a duplicate.
	_, err = b.revive("tok-r", dead)
	refusal(t, err, ledger.ErrAlreadySent)

	other := b.create(t, "rem-settle-3")
	c, _ = b.claim("tok-4", other)
	if _, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: failure.ClassRejected, Message: "400"}); err != nil {
		t.Fatal(err)
	}
	read, _ = b.l.Get(ctx, other.Key())
	_, err = b.l.SettleSent(ctx, read, "ses-msg-3", "x")
	refusal(t, err, ledger.ErrNotAmbiguous)
}

// testTheFeedbackMarkOnlyMovesForward: absent is zero; a later time moves
// it, an earlier one does not; each provider has its own.
func testTheFeedbackMarkOnlyMovesForward(t *testing.T, b bundle) {
	ctx := context.Background()
	if at, err := b.l.FeedbackMark(ctx, "ses"); err != nil || !at.IsZero() {
		t.Fatalf("no mark yet: %v, %v", at, err)
	}
	for _, at := range []time.Time{t0.Add(time.Minute), t0.Add(3 * time.Minute), t0.Add(2 * time.Minute)} {
		if err := b.l.RecordFeedbackMark(ctx, "ses", at); err != nil {
			t.Fatal(err)
		}
	}
	if at, err := b.l.FeedbackMark(ctx, "ses"); err != nil || !at.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("mark %v, %v; want %v", at, err, t0.Add(3*time.Minute))
	}
	if at, _ := b.l.FeedbackMark(ctx, "other"); !at.IsZero() {
		t.Fatalf("another provider's mark %v", at)
	}
	if err := b.l.RecordFeedbackMark(ctx, "ses", time.Time{}); err == nil {
		t.Fatal("a mark without a time was taken")
	}
}

// testASendReportOfTheRecordedMessageIsRedundant: SES's Send event of the
// message a sent delivery records as its receipt adds nothing, and is
// refused without a write; on any other status, or of another message, it
// is recorded (what the consumer's record policy reads).
func testASendReportOfTheRecordedMessageIsRedundant(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.sent(t, "rem-redundant") // receipt msg-0
	send0 := ledger.Feedback{Kind: ledger.FeedbackSentByProvider, At: t0.Add(time.Second), ID: "msg-0:Send", MessageID: "msg-0"}
	_, err := b.l.RecordFeedback(ctx, d.Key(), send0)
	re := refusal(t, err, ledger.ErrFeedbackRedundant)
	if len(re.Current.History) != len(d.History) || re.Current.Feedback.Kind != "" {
		t.Fatalf("a redundant report changed the delivery: %+v", re.Current)
	}
	// A delivery a consumer is sending, or retrying, takes it.
	live := b.create(t, "rem-redundant-live")
	if _, err := b.claim("tok-live", live); err != nil {
		t.Fatal(err)
	}
	if got := b.feedback(t, live.Key(), send0); got.Feedback.Kind != ledger.FeedbackSentByProvider || got.Feedback.MessageID != "msg-0" {
		t.Fatalf("a sending delivery's report: %+v", got.Feedback)
	}
}

// testAWriteUnderTheLeaseKeepsFeedbackRecordedSinceTheClaim: the feedback
// function records a report without a lease; a wait for the record or a
// settlement by the claim that holds the delivery, written from the
// history as the claim read it, keeps that report's entry.
func testAWriteUnderTheLeaseKeepsFeedbackRecordedSinceTheClaim(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-lease-feedback")
	c, err := b.claim("tok-1", d)
	if err != nil {
		t.Fatal(err)
	}
	delayed := ledger.Feedback{Kind: ledger.FeedbackDelayed, At: t0.Add(time.Second), ID: "msg-1:DeliveryDelay", MessageID: "msg-1"}
	b.feedback(t, d.Key(), delayed)
	w, err := b.l.AwaitRecord(ctx, c, ledger.Await{Note: "waits", Next: b.clk.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if fe := feedbackEntries(w); len(fe) != 1 || w.Status != ledger.StatusRetrying || w.Feedback.Kind != ledger.FeedbackDelayed {
		t.Fatalf("the wait dropped the report recorded since the claim: %s, history %+v", w.Status, w.History)
	}

	b.clk.Advance(time.Minute)
	c, err = b.claim("tok-2", d)
	if err != nil {
		t.Fatal(err)
	}
	send := ledger.Feedback{Kind: ledger.FeedbackSentByProvider, At: t0.Add(time.Second), ID: "msg-1:Send", MessageID: "msg-1"}
	b.feedback(t, d.Key(), send)
	s, err := b.l.SettleSent(ctx, c, "msg-1", "sent, by the record")
	if err != nil {
		t.Fatal(err)
	}
	last := s.History[len(s.History)-1]
	if fe := feedbackEntries(s); len(fe) != 2 || s.Status != ledger.StatusSent || s.Attempts != 1 || last.Status != ledger.StatusSent {
		t.Fatalf("the settlement dropped a report recorded since the claim: %s, attempts %d, history %+v", s.Status, s.Attempts, s.History)
	}
	// The lease still decides: a claim no longer held writes nothing.
	_, err = b.l.AwaitRecord(ctx, c, ledger.Await{Note: "late", Next: b.clk.Now()})
	refusal(t, err, ledger.ErrAlreadySent)
}

// testTheRecordSettlesAnExpiryOrCancelAfterAnAmbiguousAttempt: a delivery
// expired or cancelled while its attempt may have been sent (class
// ambiguous) is settled sent by the record without a lease, once, its end
// kept in the history; one ended without such an attempt is refused.
func testTheRecordSettlesAnExpiryOrCancelAfterAnAmbiguousAttempt(t *testing.T, b bundle) {
	ctx := context.Background()
	waiting := func(id string, expiresAt time.Time) ledger.Delivery {
		t.Helper()
		d := b.createExpiring(t, id, expiresAt)
		c, err := b.claim("tok-"+id, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.AwaitRecord(ctx, c, ledger.Await{Note: "waits", Next: b.clk.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	cancelled := waiting("rem-settle-cancelled", t0.Add(24*time.Hour))
	expired := waiting("rem-settle-expired", t0.Add(time.Minute))
	if _, err := b.l.Cancel(ctx, cancelled.Key(), "cancelled by the owner"); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(2 * time.Minute)
	read, err := b.l.Get(ctx, expired.Key())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.Expire(ctx, read); err != nil {
		t.Fatal(err)
	}
	for _, d := range []ledger.Delivery{cancelled, expired} {
		read, err := b.l.Get(ctx, d.Key())
		if err != nil {
			t.Fatal(err)
		}
		if !read.EndedAmbiguous() || read.LastErrorClass != failure.ClassAmbiguous {
			t.Fatalf("%s: %s, class %q; want an end that says its attempt may have been sent", d.ReminderID, read.Status, read.LastErrorClass)
		}
		end := read.Status
		s, err := b.l.SettleSent(ctx, read, "ses-"+d.ReminderID, "sent, by the record")
		if err != nil {
			t.Fatalf("%s %s: %v", d.ReminderID, end, err)
		}
		h := s.Transitions()
		if s.Status != ledger.StatusSent || s.Receipt != "ses-"+d.ReminderID || s.SentAt.IsZero() || s.Index != nil || len(h) < 2 ||
			h[len(h)-2].Status != end || h[len(h)-1].Status != ledger.StatusSent || h[len(h)-1].Note != "sent, by the record" {
			t.Fatalf("%s settled from %s: %s, history %+v", d.ReminderID, end, s.Status, s.History)
		}
		_, err = b.l.SettleSent(ctx, read, "ses-"+d.ReminderID, "again")
		refusal(t, err, ledger.ErrAlreadySent)
	}

	// Cancelled before any attempt: nothing may have gone out.
	plain := b.create(t, "rem-settle-plain")
	if _, err := b.l.Cancel(ctx, plain.Key(), "cancelled by the owner"); err != nil {
		t.Fatal(err)
	}
	read, _ = b.l.Get(ctx, plain.Key())
	_, err = b.l.SettleSent(ctx, read, "ses-plain", "x")
	refusal(t, err, ledger.ErrNotAmbiguous)
}
