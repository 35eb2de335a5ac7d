package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/sesevents"
	"github.com/nudgehq/nudge/internal/message"
)

// fallbackEnds returns p with what each planned fallback must end as,
// from how the delivery it stands in for ended (Planned.FallbackOf): sent
// (taken, once) if that delivery failed, cancelled with it, and held
// otherwise. It counts the fallbacks.
func (v *Verdict) fallbackEnds(p Plan, ev Evidence) Plan {
	out := Plan{Deliveries: make(map[message.DeliveryKey]Planned, len(p.Deliveries)), Poison: p.Poison}
	v.FallbacksTaken = map[string]int{}
	for k, want := range p.Deliveries {
		if want.FallbackOf != (message.DeliveryKey{}) {
			v.Fallbacks++
			primary := ev.Ledger[want.FallbackOf]
			reason, due := primary.FallbackDue()
			switch {
			case due:
				want.Expect = ledger.StatusSent
				kind, _, _ := strings.Cut(reason, " ")
				v.FallbacksTaken[kind]++
			case primary.Status == ledger.StatusCancelled:
				want.Expect = ledger.StatusCancelled
			default:
				want.Expect = ledger.StatusHeld
			}
			switch ev.Ledger[k].Status {
			case ledger.StatusSent:
				v.FallbacksSent++
			case ledger.StatusHeld:
				v.FallbacksHeld++
			}
		}
		out.Deliveries[k] = want
	}
	return out
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
	slices.SortFunc(keys, func(a, b message.DeliveryKey) int { return strings.Compare(a.String(), b.String()) })
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
