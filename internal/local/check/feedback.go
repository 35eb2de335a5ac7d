package check

import (
	"time"

	"fmt"
	"slices"

	"github.com/nudgehq/nudge/internal/ledger"
)

// feedback checks each planned delivery's standing feedback (what its
// provider reported after it took the message: SES's events, recorded on
// the delivery by the feedback function) against the plan and the
// provider's own record, and counts the ledger's feedback:
//
//   - a delivery its provider sent (the provider's record holds it), whose
//     plan expects feedback, ends with that feedback standing: bounced for
//     good from bounce@ and suppressionlist@, complained of from
//     complaint@, delivered from success@, ooto@ and an ordinary address.
//     Checked once the run waited for the events (Evidence.FeedbackRead);
//   - a delivery its provider never sent has none: feedback on an e-mail
//     the provider never accepted is feedback it cannot have given;
//   - a delivery of a provider that reports none has none.
//
// A delivery dead-lettered for review as ambiguous (the send timed out, or
// its answer was lost) that the provider's record holds did go out: its
// feedback is expected as any sent delivery's, and tells the operator so.
func (v *Verdict) feedback(p Plan, ev Evidence) []string {
	var out []string
	violate := func(format string, args ...any) {
		if len(out) < 20 {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	v.Feedback = map[ledger.FeedbackKind]int{}
	var delays []time.Duration
	for _, d := range ev.Ledger {
		if delay, ok := firstReportDelay(d); ok {
			delays = append(delays, delay)
		}
		if d.Feedback.Kind == "" {
			continue
		}
		v.Feedback[d.Feedback.Kind]++
		if d.Failed() {
			v.FeedbackFailed++
		}
	}
	slices.Sort(delays)
	v.ReportDelayP50, v.ReportDelayP99, v.ReportDelayMax = quantile(delays, 0.5), quantile(delays, 0.99), quantile(delays, 1)
	for _, k := range sortedKeys(p.Deliveries) {
		want := p.Deliveries[k]
		got, ok := ev.Ledger[k]
		if !ok {
			continue // lost: violations names it
		}
		sent, has, to := ev.Recorded[k] > 0, got.Feedback.Kind != "", ""
		if want.Simulator != "" {
			to = " to " + want.Simulator
			if sent {
				v.Simulated++
			}
		}
		switch {
		case has && !sent:
			violate("feedback on a delivery never sent: %s%s (%s) has %q standing, but %s never accepted it", k, to, got.Status, got.Feedback.Note(), title(k.Provider))
		case has && want.Feedback.Kind == "":
			violate("%s has %q standing, but %s reports no feedback", k, got.Feedback.Note(), title(k.Provider))
		case sent && want.Feedback.Kind != "" && !has && ev.FeedbackRead:
			violate("no feedback: %s was sent%s (%s), and none of %s's events about it was recorded; they say %s", k, to, got.Status, title(k.Provider),
				expected(want.Feedback))
		case sent && has && (got.Feedback.Kind != want.Feedback.Kind || got.Feedback.Permanent != want.Feedback.Permanent):
			violate("%s was sent%s and has %q standing; %s's events say %s", k, to, got.Feedback.Note(), title(k.Provider), expected(want.Feedback))
		}
	}
	return out
}

// expected is how a violation names the feedback f a plan expects.
func expected(f ledger.Feedback) string {
	if f.Kind == ledger.FeedbackBounced && f.Permanent {
		return "bounced for good (a permanent bounce)"
	}
	return string(f.Kind)
}

// firstReportDelay is how long after d was recorded sent the provider's
// first report of it was recorded (both the ledger's times), for a sent
// delivery with a report recorded after its send; false otherwise (a
// report that came first, while the send's answer was lost, is not one).
func firstReportDelay(d ledger.Delivery) (time.Duration, bool) {
	if d.Status != ledger.StatusSent || d.SentAt.IsZero() {
		return 0, false
	}
	for _, e := range d.History {
		if !e.Feedback {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, e.At)
		if err != nil || at.Before(d.SentAt) {
			return 0, false
		}
		return at.Sub(d.SentAt), true
	}
	return 0, false
}
