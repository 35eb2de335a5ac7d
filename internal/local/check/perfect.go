package check

import (
	"fmt"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/recur"
)

// perfectEnd is the end of the run Perfect describes.
var perfectEnd = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// Perfect returns the evidence of a run of p that kept every invariant,
// ended at a fixed time (End): each delivery in the ledger as planned (a
// pending one due a month later), each one sent in its provider's record
// once, and so each one a provider that reviews accepted before its answer
// was lost (drop); at a provider that records (SES), each send that may
// have gone out settled by its record, with the history that says how
// (recordHistory); each one its provider sent with the feedback its plan
// expects standing, and the feedback read (FeedbackRead); a DLQ message
// for each dead delivery, and for each poison message (ids poison-0, …);
// the work queue empty; each delivery that names a send window due at its
// opening (and sent then); each series in the ledger, extended as far as
// its rule and the bounds allow, each occurrence due at its rule's time.
// A test breaks it one way at a time and checks that
// Check says so.
func Perfect(p Plan) Evidence {
	ev := Evidence{End: perfectEnd, Ledger: map[message.DeliveryKey]ledger.Delivery{}, Recorded: map[message.DeliveryKey]int{}, FeedbackRead: true}
	due := map[message.DeliveryKey]time.Time{}
	for id, s := range p.Series {
		if ev.Series == nil {
			ev.Series = map[string]ledger.Series{}
		}
		ev.Series[id] = ledger.Series{ExtendAt: perfectEnd.Add(24 * time.Hour)}
		for _, o := range occurrences(s.Series, perfectEnd, p.SeriesAhead, p.SeriesCount) {
			due[message.DeliveryKey{ReminderID: recur.OccurrenceID(id, o), Channel: s.Channel, Provider: s.Provider}] = o.At
		}
	}
	for k, w := range p.Windows {
		due[k] = w.Opens
	}
	p, _ = withSeries(p, ev)
	for k, d := range p.Deliveries {
		got := ledger.Delivery{ReminderID: k.ReminderID, Channel: k.Channel, Provider: k.Provider, Status: d.Expect, LastErrorClass: d.Class}
		if d.Expect == ledger.StatusPending {
			got.DueAt = perfectEnd.Add(30 * 24 * time.Hour)
		}
		if at, ok := due[k]; ok {
			got.DueAt = at
			if d.Expect == ledger.StatusSent {
				got.SentAt = at
			}
		}
		if w, ok := p.Windows[k]; ok {
			got.Window = w.Window.String()
		}
		if d.Fault == "drop" && reviews(k.Provider) {
			ev.Recorded[k] = 1 // it went out; the answer was lost, so it waits for review
		}
		if d.Expect == ledger.StatusSent && records(k.Provider) {
			got.History = recordHistory(k.Provider, d.Fault)
		}
		switch d.Expect {
		case ledger.StatusSent:
			ev.Recorded[k] = 1
		case ledger.StatusDead:
			ev.DLQ = append(ev.DLQ, DeadLetter{Key: k, Class: d.Class})
		}
		if ev.Recorded[k] > 0 && d.Feedback.Kind != "" {
			got.Feedback = ledger.Feedback{Kind: d.Feedback.Kind, Permanent: d.Feedback.Permanent, At: perfectEnd.Add(-time.Minute)}
		}
		if d.FallbackOf != (message.DeliveryKey{}) {
			got.FallbackOf = ledger.FallbackRef{Channel: d.FallbackOf.Channel, Provider: d.FallbackOf.Provider}
		}
		ev.Ledger[k] = got
	}
	// Each delivery names its fallback, as the intake writes it.
	for k, d := range p.Deliveries {
		if d.FallbackOf != (message.DeliveryKey{}) {
			primary := ev.Ledger[d.FallbackOf]
			primary.Fallback = ledger.FallbackRef{Channel: k.Channel, Provider: k.Provider}
			ev.Ledger[d.FallbackOf] = primary
		}
	}
	for i := range p.Poison {
		id := fmt.Sprint("poison-", i)
		ev.DLQ = append(ev.DLQ, DeadLetter{Class: failure.ClassDecode, Source: id})
		ev.PoisonIDs = append(ev.PoisonIDs, id)
	}
	return ev
}

// recordHistory is the ledger history of a delivery of provider prov, which
// records, sent after fault: nil but for a send that may have gone out.
// "drop" reached the provider, whose record then shows it: the attempt
// waits for the record, and is settled sent by it, not sent again. "500"
// and "hang" never reached it: the attempt waits, the record shows
// nothing while it shows later messages, and the next attempt sends again,
// answered.
func recordHistory(prov, fault string) []ledger.Entry {
	r := drivers[prov].Contract.Reports
	if r == nil {
		return nil
	}
	start := perfectEnd.Add(-time.Hour)
	at := func(d time.Duration) string { return ledger.Format(start.Add(d)) }
	wait := ledger.Entry{At: at(2 * time.Second), Status: ledger.StatusRetrying, Attempt: 1, Class: failure.ClassAmbiguous,
		Note: waitNote + prov + " record to " + start.Add(r.Window+time.Second).Format("15:04:05Z")}
	h := []ledger.Entry{{At: at(0), Status: ledger.StatusPending}, {At: at(0), Status: ledger.StatusQueued},
		{At: at(time.Second), Status: ledger.StatusSending, Attempt: 1}, wait}
	switch fault {
	case "drop":
		return append(h, ledger.Entry{At: at(r.Window + time.Second), Status: ledger.StatusSent, Attempt: 1, Note: settledNote + r.Record})
	case "500", "hang":
		return append(h, ledger.Entry{At: at(r.Window + time.Second), Status: ledger.StatusSending, Attempt: 2},
			ledger.Entry{At: at(r.Window + 2*time.Second), Status: ledger.StatusSent, Attempt: 2})
	}
	return nil
}
