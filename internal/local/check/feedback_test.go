package check

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/pkg/failure"
)

// simulated are the mailbox simulator's addresses and the feedback SES's
// events about an e-mail to each leave standing.
var simulated = map[string]ledger.Feedback{
	"success@simulator.amazonses.com":         {Kind: ledger.FeedbackDelivered},
	"ooto@simulator.amazonses.com":            {Kind: ledger.FeedbackDelivered},
	"bounce@simulator.amazonses.com":          {Kind: ledger.FeedbackBounced, Permanent: true},
	"suppressionlist@simulator.amazonses.com": {Kind: ledger.FeedbackBounced, Permanent: true},
	"complaint@simulator.amazonses.com":       {Kind: ledger.FeedbackComplained},
}

// feedbackPlan is testPlan with SES's feedback expected: delivered for
// each of its deliveries, and one more delivery due now for each of the
// simulator's addresses (rem-ses-sim-<mailbox>), sent. The reviewer's
// deliveries expect it too, as an e-mail provider that reviews (SES run
// under review) would report.
func feedbackPlan() Plan {
	p := testPlan()
	for k, d := range p.Deliveries {
		if k.Provider == ses.Name || k.Provider == reviewer {
			d.Feedback = ledger.Feedback{Kind: ledger.FeedbackDelivered}
			p.Deliveries[k] = d
		}
	}
	for address, fb := range simulated {
		k := simKey(address)
		p.Deliveries[k] = Planned{Key: k, Kind: "due now", Expect: ledger.StatusSent, Feedback: fb, Simulator: address}
	}
	return p
}

// simKey is feedbackPlan's key of the delivery to address.
func simKey(address string) message.DeliveryKey {
	mailbox, _, _ := strings.Cut(address, "@")
	return key(ses.Name, "sim-"+mailbox)
}

// TestEverySentEmailEndsWithItsFeedback: each delivery SES sent ends with
// the feedback its recipient's mailbox calls for, checked once the run
// read the feedback; one never sent, and one of a provider that reports
// none, has none; one reviewed as ambiguous that did go out has its
// feedback like any sent one (and at SES, which settles by its record,
// is itself a violation).
func TestEverySentEmailEndsWithItsFeedback(t *testing.T) {
	t.Parallel()
	p := feedbackPlan()
	bounce, complaint, suppressed := simKey("bounce@simulator.amazonses.com"), simKey("complaint@simulator.amazonses.com"),
		simKey("suppressionlist@simulator.amazonses.com")
	sesSent, sesRejected, sesHang, sesCancelled, webhookSent := key(ses.Name, "ok"), key(ses.Name, "400"), key(ses.Name, "hang"),
		key(ses.Name, "cancelled"), key("webhook", "ok")
	rvHang := key(reviewer, "hang")
	feedback := func(k message.DeliveryKey, f ledger.Feedback) func(*Evidence) {
		return func(ev *Evidence) { set(ev, k, func(d *ledger.Delivery) { d.Feedback = f }) }
	}
	delivered := ledger.Feedback{Kind: ledger.FeedbackDelivered}
	for _, c := range []struct {
		name   string
		change func(*Evidence)
		want   string // "" when the rules hold
	}{
		{"every sent e-mail with its feedback", func(*Evidence) {}, ""},

		// A sent e-mail ends with the feedback its mailbox calls for.
		{"a bounce recorded delivered", feedback(bounce, delivered),
			bounce.String() + ` was sent to bounce@simulator.amazonses.com and has "delivered" standing; SES's events say bounced for good (a permanent bounce)`},
		{"a suppressed address's bounce recorded transient", feedback(suppressed, ledger.Feedback{Kind: ledger.FeedbackBounced, Detail: "Transient/General"}),
			suppressed.String() + ` was sent to suppressionlist@simulator.amazonses.com and has "bounced Transient/General" standing`},
		{"a complaint's feedback lost", feedback(complaint, ledger.Feedback{}),
			"no feedback: " + complaint.String() + " was sent to complaint@simulator.amazonses.com (sent), and none of SES's events about it was recorded; " +
				"they say complained"},
		{"a complaint recorded as a bounce", feedback(complaint, ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true}),
			complaint.String() + ` was sent to complaint@simulator.amazonses.com and has "bounced" standing; SES's events say complained`},
		{"an ordinary e-mail sent without feedback", feedback(sesSent, ledger.Feedback{}),
			"no feedback: " + sesSent.String() + " was sent (sent), and none of SES's events about it was recorded; they say delivered"},
		{"feedback not waited for: its absence is not judged", func(ev *Evidence) {
			feedback(complaint, ledger.Feedback{})(ev)
			ev.FeedbackRead = false
		}, ""},

		// One never sent has none.
		{"feedback on a delivery SES rejected", feedback(sesRejected, delivered),
			"feedback on a delivery never sent: " + sesRejected.String() + ` (dead) has "delivered" standing, but SES never accepted it`},
		{"feedback on a cancelled delivery", feedback(sesCancelled, ledger.Feedback{Kind: ledger.FeedbackComplained}),
			"feedback on a delivery never sent: " + sesCancelled.String() + ` (cancelled) has "complained" standing`},
		{"feedback on a webhook delivery", feedback(webhookSent, delivered),
			webhookSent.String() + ` has "delivered" standing, but the webhook reports no feedback`},

		// A review as ambiguous that did go out has its feedback.
		{"a timed-out send, reviewed, that went out, with its feedback", func(ev *Evidence) {
			ev.Recorded[rvHang] = 1
			feedback(rvHang, delivered)(ev)
		}, ""},
		{"a timed-out send, reviewed, that went out, without its feedback", func(ev *Evidence) { ev.Recorded[rvHang] = 1 },
			"no feedback: " + rvHang.String() + " was sent (dead)"},
		{"a timed-out send, reviewed, that never went out, with feedback", feedback(rvHang, delivered),
			"feedback on a delivery never sent: " + rvHang.String()},

		// At SES, its record settles what it accepted; a review has no copy
		// at SES, and so no feedback.
		{"a timed-out send SES's record could not settle: reviewed, no copy, no feedback", func(ev *Evidence) {
			reviewedUnsettled(sesHang, 0)(ev)
			feedback(sesHang, ledger.Feedback{})(ev)
		}, ""},
		{"a timed-out send reviewed, with a copy at SES and its feedback", func(ev *Evidence) {
			reviewedUnsettled(sesHang, 1)(ev)
		}, sesHang.String() + " is dead as ambiguous (reviewed), but SES accepted it"},
		{"a timed-out send reviewed, with a copy at SES and no feedback", func(ev *Evidence) {
			reviewedUnsettled(sesHang, 1)(ev)
			feedback(sesHang, ledger.Feedback{})(ev)
		}, "no feedback: " + sesHang.String() + " was sent (dead)"},
		{"a timed-out send reviewed, no copy at SES, with feedback", func(ev *Evidence) {
			reviewedUnsettled(sesHang, 0)(ev)
		}, "feedback on a delivery never sent: " + sesHang.String()},
	} {
		ev := Perfect(p)
		c.change(&ev)
		v := Check(p, ev)
		got := strings.Join(v.Violations, "\n")
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: violations\n%s\nwant %q", c.name, got, c.want)
		}
	}
}

// TestTheFeedbackFiguresAreReadFromTheLedger: the standing feedback by
// kind, the deliveries that failed after sending, and the e-mails sent to
// the simulator.
func TestTheFeedbackFiguresAreReadFromTheLedger(t *testing.T) {
	t.Parallel()
	p := feedbackPlan()
	ev := Perfect(p)
	// SES's hang, which its record could not settle, was reviewed: no
	// copy at SES, no feedback.
	reviewedUnsettled(key(ses.Name, "hang"), 0)(&ev)
	set(&ev, key(ses.Name, "hang"), func(d *ledger.Delivery) { d.Feedback = ledger.Feedback{} })
	v := Check(p, ev)
	if !v.OK() {
		t.Fatalf("violations %q", v.Violations)
	}
	// At SES ok, 429, 500 (sent again) and drop (settled by its record),
	// success@ and ooto@ delivered; at the reviewer ok, 429 and drop, which
	// went out before its answer was lost, reviewed; bounce@ and
	// suppressionlist@ bounced; complaint@ complained of.
	want := map[ledger.FeedbackKind]int{ledger.FeedbackDelivered: 9, ledger.FeedbackBounced: 2, ledger.FeedbackComplained: 1}
	if !maps.Equal(v.Feedback, want) || v.FeedbackFailed != 3 || v.Simulated != 5 {
		t.Errorf("feedback %v, %d failed, %d to the simulator; want %v, 3, 5", v.Feedback, v.FeedbackFailed, v.Simulated, want)
	}
	d := ev.Ledger[key(ses.Name, "drop")]
	if d.Status != ledger.StatusSent || d.Feedback.Kind != ledger.FeedbackDelivered {
		t.Errorf("the dropped answer's SES delivery: %s, feedback %q; want sent, delivered", d.Status, d.Feedback.Kind)
	}
	d = ev.Ledger[key(reviewer, "drop")]
	if d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassAmbiguous || d.Feedback.Kind != ledger.FeedbackDelivered {
		t.Errorf("the reviewer's dropped answer's delivery: %s %s, feedback %q; want dead ambiguous, delivered", d.Status, d.LastErrorClass, d.Feedback.Kind)
	}
}

// TestTheReportDelayIsMeasuredFromTheLedger: the feedback path's delay is
// a sent delivery's first report recorded, less its send recorded; a
// report recorded before the send (an answer lost) and a delivery without
// one do not count.
func TestTheReportDelayIsMeasuredFromTheLedger(t *testing.T) {
	sent := time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC)
	d := func(id string, reportAfter time.Duration, reports bool) ledger.Delivery {
		x := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "ses", Status: ledger.StatusSent, SentAt: sent,
			History: []ledger.Entry{{At: ledger.Format(sent), Status: ledger.StatusSent}}}
		if reports {
			x.History = append(x.History, ledger.Entry{At: ledger.Format(sent.Add(reportAfter)), Status: ledger.StatusSent, Feedback: true, Note: "delivered"},
				ledger.Entry{At: ledger.Format(sent.Add(time.Hour)), Status: ledger.StatusSent, Feedback: true, Note: "complained"})
		}
		return x
	}
	ev := Evidence{Ledger: map[message.DeliveryKey]ledger.Delivery{}}
	for i, x := range []ledger.Delivery{d("a", time.Second, true), d("e", 2*time.Second, true), d("b", 3*time.Second, true), d("c", 0, false), d("d", -time.Second, true)} {
		x.ReminderID = fmt.Sprint("rem-", i)
		ev.Ledger[x.Key()] = x
	}
	var v Verdict
	v.feedback(Plan{}, ev)
	if v.ReportDelayP50 != 2*time.Second || v.ReportDelayMax != 3*time.Second {
		t.Errorf("report delay p50 %v, max %v; want 2s, 3s (the first report of each, after its send)", v.ReportDelayP50, v.ReportDelayMax)
	}
}
