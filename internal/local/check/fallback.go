package check

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/sesevents"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/failure"
)

// fallbackEnds returns p with what each planned fallback must end as, and
// the violations of the fallbacks' own rules. What a fallback must end as
// comes from the plan where the delivery it stands in for ended as planned
// (Planned.FallbackOf): sent (taken, once) if the plan fails that delivery
// (a failing report of SES's simulator, a permanent rejection, an
// expiry), cancelled with it, held otherwise. Where that delivery ended
// otherwise (kills spent its budget: violations judges whether that is
// explained), the fallback follows its end as the ledger has it
// (ledger.Delivery.FallbackDue). Whatever the plan, a fallback sent for a
// delivery its provider took and no failing report followed is a
// violation: the recipient got both. It counts the fallbacks.
func (v *Verdict) fallbackEnds(p Plan, ev Evidence) (Plan, []string) {
	out := p
	out.Deliveries = make(map[message.DeliveryKey]Planned, len(p.Deliveries))
	var bad []string
	v.FallbacksTaken = map[string]int{}
	for _, k := range sortedKeys(p.Deliveries) {
		want := p.Deliveries[k]
		if want.FallbackOf != (message.DeliveryKey{}) {
			v.Fallbacks++
			plan, primary, got := p.Deliveries[want.FallbackOf], ev.Ledger[want.FallbackOf], ev.Ledger[k]
			reason, due := primary.FallbackDue()
			plannedFail := plan.Feedback.Failed() || plan.Expect == ledger.StatusExpired ||
				plan.Expect == ledger.StatusDead && plan.Class != failure.ClassAmbiguous
			// Ended as planned: the planned status, class and a known last
			// attempt (a kill can leave a planned expiry, or a planned
			// rejection under review, ending ambiguous: no fallback then).
			asPlanned := primary.Status == plan.Expect && primary.EndedUnended() == 0 &&
				(plan.Expect != ledger.StatusDead || primary.LastErrorClass == plan.Class)
			switch {
			case primary.Status == ledger.StatusCancelled:
				want.Expect = ledger.StatusCancelled
			case plannedFail && asPlanned, due && !asPlanned:
				want.Expect = ledger.StatusSent
			default:
				want.Expect = ledger.StatusHeld
			}
			if due {
				kind, _, _ := strings.Cut(reason, " ")
				v.FallbacksTaken[kind]++
			}
			if got.Status == ledger.StatusSent && ev.Recorded[want.FallbackOf] > 0 && !primary.Failed() && len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("sent on two channels: %s went out (%s, %d at its provider) and so did its fallback %s",
					want.FallbackOf, primary.Status, ev.Recorded[want.FallbackOf], k))
			}
			if !got.FallbackOf.IsZero() && got.FallbackOf.Key(k.ReminderID) != want.FallbackOf && len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("%s stands in for %s in the ledger, planned for %s", k, got.FallbackOf.Key(k.ReminderID), want.FallbackOf))
			}
			switch got.Status {
			case ledger.StatusSent:
				v.FallbacksSent++
			case ledger.StatusHeld:
				v.FallbacksHeld++
			}
		}
		out.Deliveries[k] = want
	}
	return out, bad
}

// bouncedToFallback tells, for the first (by key) e-mail of the plan to
// SES's bounce@ whose fallback was sent, what the ledger, the provider's
// record and the outcome events say of the two deliveries.
func bouncedToFallback(p Plan, ev Evidence) string {
	var keys []message.DeliveryKey
	for k, want := range p.Deliveries {
		if primary, ok := p.Deliveries[want.FallbackOf]; ok && primary.Simulator == sesevents.Bounce && ev.Ledger[k].Status == ledger.StatusSent {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	slices.SortFunc(keys, byKey)
	fk := keys[0]
	pk := p.Deliveries[fk].FallbackOf
	primary, fb := ev.Ledger[pk], ev.Ledger[fk]
	events := func(k message.DeliveryKey) string {
		var types []string
		seen := map[string]bool{}
		for _, e := range ev.Events {
			if e.DeliveryKey == k.String() && !seen[e.EventID] {
				seen[e.EventID] = true
				t := e.DetailType()
				if e.FallbackOf != "" {
					t += " (fallbackOf " + e.FallbackOf + ")"
				}
				types = append(types, t)
			}
		}
		if len(types) == 0 {
			return "no event"
		}
		return strings.Join(types, ", ")
	}
	return fmt.Sprintf("%s to %s: %s, then %s; %d copy at SES; events: %s\n"+
		"  its fallback %s: %s, %d copy at %s; events: %s",
		pk, sesevents.Bounce, primary.Status, primary.Feedback.Note(), ev.Recorded[pk], events(pk),
		fk, fb.Status, ev.Recorded[fk], fk.Provider, events(fk))
}

// byKey orders delivery keys as their strings sort.
func byKey(a, b message.DeliveryKey) int { return strings.Compare(a.String(), b.String()) }

// sortedKeys returns m's delivery keys in byKey's order, so that a run's
// violations come in the same order every time.
func sortedKeys[V any](m map[message.DeliveryKey]V) []message.DeliveryKey {
	return slices.SortedFunc(maps.Keys(m), byKey)
}
