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
// (SES) was dead-lettered for review because an earlier attempt never
// recorded an end: a claim took over its lapsed lease (two sending entries
// in a row in its history), or the repair handed it back to the queue
// meanwhile (UnendedAttempt).
func reviewedAfterLapse(k message.DeliveryKey, d ledger.Delivery) bool {
	if !reviews(k.Provider) || d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassAmbiguous {
		return false
	}
	for i := 1; i < len(d.History); i++ {
		if d.History[i].Status == ledger.StatusSending && d.History[i-1].Status == ledger.StatusSending {
			return true
		}
	}
	// Or the repair handed it back to the queue while an attempt held it
	// (the attempt's runtime was killed): the ledger marks that attempt as
	// never ended, and the next claim sent it to review.
	return d.UnendedAttempt > d.BudgetFrom
}

// exhaustedByKills reports whether a delivery planned to be sent was
// dead-lettered with its attempt budget spent only because kills ended its
// attempts. An attempt spends the budget when it claims the delivery,
// before its request, so a runtime killed in between spends an attempt the
// provider never saw; the budget is checked when an attempt fails. So a
// delivery of a provider that retries (the webhook, SNS: SES sends the
// attempt after an unended one to review instead) with a transient fault
// can end dead `exhausted` when kills end every attempt but the budget's
// last, which meets the fault. That holds only where the evidence says
// exactly that:
//   - the provider saw one request for it (requests), the one its fault
//     failed: a killed attempt that had reached the provider would have
//     met the fault, and the next been answered; and it holds the delivery
//     only if that fault was a lost answer (recorded);
//   - the budget since the last redrive is spent (BudgetUsed);
//   - in the ledger's history since the last dead-lettering, no attempt
//     recorded a failure (retrying), every attempt but the last never
//     ended (a sending followed by another claim of the lapsed lease, or
//     by the repair's hand-back, queued), and the last ended dead.
//
// The history keeps the last HistoryLimit transitions; a kill is credited
// only with attempts whose visible record shows they never ended.
func exhaustedByKills(want Planned, d ledger.Delivery, requests, recorded, budget int) bool {
	if reviews(want.Key.Provider) || want.Expect != ledger.StatusSent || want.Fault == "" || Repeats(want.Fault) ||
		d.Status != ledger.StatusDead || d.LastErrorClass != failure.ClassExhausted || budget == 0 || d.BudgetUsed() < budget ||
		requests != 1 || recorded > 0 && want.Fault != "drop" {
		return false
	}
	h := d.History
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
	unended := 0
	for i, e := range h[:len(h)-1] {
		switch {
		case e.Status == ledger.StatusRetrying:
			return false
		case e.Status == ledger.StatusSending && h[i+1].Status != ledger.StatusSending && h[i+1].Status != ledger.StatusQueued:
			return false
		case e.Status == ledger.StatusSending:
			unended++
		}
	}
	return unended > 0
}
