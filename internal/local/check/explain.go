package check

import (
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/failure"
)

// What a kill explains, and only where the evidence shows it did
// (docs/reliability.md, "The fault model").

// killedDuring reports whether the instance named was killed while the
// invocation that sent a request arriving at t could still be running:
// from just before t (a request in flight when its sender died arrives
// after) to the consumer's timeout after it. A repeat of a delivery whose
// acceptance was answered to an instance killed before it recorded the
// send is the duplicate a provider without idempotency keys would deliver;
// any other repeat is a violation.
func killedDuring(kills []Kill, instance string, t time.Time, timeout time.Duration) bool {
	from, to := t.Add(-100*time.Millisecond), t.Add(timeout)
	for _, k := range kills {
		if instance != "" && instance == k.Instance && k.At.After(from) && k.At.Before(to) {
			return true
		}
	}
	return false
}

// reviewedAfterLapse reports whether a delivery of a provider that reviews
// was dead-lettered for review because an earlier attempt never recorded
// an end (lapsed).
func reviewedAfterLapse(k message.DeliveryKey, d ledger.Delivery) bool {
	return reviews(k.Provider) && d.Status == ledger.StatusDead && d.LastErrorClass == failure.ClassAmbiguous && lapsed(d)
}

// lapsed reports whether d's history shows an attempt that never recorded
// an end: a claim took over its lapsed lease (two sending entries in a
// row), or the repair handed it back to the queue meanwhile (the ledger
// marks that attempt as never ended: UnendedAttempt).
func lapsed(d ledger.Delivery) bool {
	h := d.Transitions()
	for i := 1; i < len(h); i++ {
		if h[i].Status == ledger.StatusSending && h[i-1].Status == ledger.StatusSending {
			return true
		}
	}
	return d.UnendedAttempt > d.BudgetFrom
}

// unsettled reports whether a delivery of a provider that records (SES),
// dead as ambiguous, may have ended so: its record could not settle a send
// that may have gone out within the longest wait (no report of it, and
// none of a later message: at the end of a run, say), so an operator
// reviews it. That holds only for a send that was ambiguous: after the
// fault "500" or "hang" (which never reach the provider, so its record
// holds no copy: Check wants none), after "drop" where the record holds
// the message, or after an attempt a kill ended (killedMidSend).
func unsettled(want Planned, d ledger.Delivery, copies int, kills []Kill, timeout time.Duration) bool {
	if !records(want.Key.Provider) || d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassAmbiguous {
		return false
	}
	switch want.Fault {
	case "500", "hang":
		return true
	case "drop":
		if copies > 0 {
			return true
		}
	}
	return killedMidSend(d, kills, timeout)
}

// killedMidSend reports whether d's history shows an attempt that a kill
// may have ended: one that never recorded an end (lapsed), or one followed
// by a wait for the provider's record (a claim that took over its lapsed
// lease waits, and the history keeps the attempt's sending entry and the
// wait) that started while a kill could end it: the kill landed from just
// before the attempt's sending entry to the consumer's timeout after it.
func killedMidSend(d ledger.Delivery, kills []Kill, timeout time.Duration) bool {
	if lapsed(d) {
		return true
	}
	h := d.Transitions()
	for i := 0; i+1 < len(h); i++ {
		if h[i].Status != ledger.StatusSending || !waits(h[i+1]) {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, h[i].At)
		if err != nil {
			continue
		}
		from, to := at.Add(-100*time.Millisecond), at.Add(timeout)
		for _, k := range kills {
			if k.At.After(from) && k.At.Before(to) {
				return true
			}
		}
	}
	return false
}

// exhaustedByKills reports whether a delivery planned to be sent was
// dead-lettered with its attempt budget spent only because kills ended its
// attempts. An attempt spends the budget when it claims the delivery,
// before its request, so a runtime killed in between spends an attempt the
// provider never saw; the budget is checked when an attempt fails. So a
// delivery of a provider that retries or records (SES under review sends
// the attempt after an unended one to review instead) with a transient
// fault can end dead `exhausted` when kills end every attempt but the
// budget's last, which meets the fault. That holds only where the evidence
// says exactly that:
//   - the provider saw one request for it (requests), the one its fault
//     failed: a killed attempt that had reached the provider would have
//     met the fault, and the next been answered; and it holds the delivery
//     only if that fault was a lost answer (recorded);
//   - the budget since the last redrive is spent (BudgetUsed);
//   - in the ledger's history since the last dead-lettering, no attempt
//     recorded a failure (retrying), every attempt but the last never
//     ended (a sending followed by another claim of the lapsed lease, by
//     the repair's hand-back, queued, or, at a provider that records, by
//     the wait for its record that the claim taking the lapsed lease
//     left), and the last ended dead.
//
// The history keeps the last HistoryLimit transitions; a kill is credited
// only with attempts whose visible record shows they never ended.
func exhaustedByKills(want Planned, d ledger.Delivery, requests, recorded, budget int) bool {
	if reviews(want.Key.Provider) || want.Expect != ledger.StatusSent || want.Fault == "" || Repeats(want.Fault) ||
		d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassExhausted || budget == 0 || d.BudgetUsed() < budget ||
		requests != 1 || recorded > 0 && want.Fault != "drop" {
		return false
	}
	h := d.Transitions()
	if n := len(h); n < 2 || h[n-1].Status != ledger.StatusDead || h[n-2].Status != ledger.StatusSending {
		return false
	}
	h = h[:len(h)-1]
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Status == ledger.StatusDead {
			h = h[i+1:]
			break
		}
	}
	// After an unended attempt, a provider that records has its claim wait
	// for the record.
	wait := func(e ledger.Entry) bool { return records(want.Key.Provider) && waits(e) }
	unended := 0
	for i, e := range h[:len(h)-1] {
		next := h[i+1].Status
		switch {
		case e.Status == ledger.StatusRetrying && !(wait(e) && i > 0 && h[i-1].Status == ledger.StatusSending):
			return false
		case e.Status == ledger.StatusSending && next != ledger.StatusSending && next != ledger.StatusQueued && !wait(h[i+1]):
			return false
		case e.Status == ledger.StatusSending:
			unended++
		}
	}
	return unended > 0
}
