package check

import (
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// reviews reports whether provider prov's contract reviews a send that may
// have gone out (its ambiguous policy): it does not deduplicate, so such a
// send (an ambiguous failure, or an attempt that never ended) is
// dead-lettered for an operator's review, never sent again, and a second
// copy in its record is a delivery sent twice. The one place the checker
// tells providers apart: a provider that retries with the same key
// deduplicates by it, or has its copies counted.
func reviews(prov string) bool {
	d, _ := registry.Lookup(prov)
	return d.Contract.Ambiguous == provider.AmbiguousReview
}

// title is how the violations name provider prov.
func title(prov string) string {
	if d, ok := registry.Lookup(prov); ok && d.Title != "" {
		return d.Title
	}
	return prov
}

// Repeats reports whether a fault meets every request of its delivery, as
// the real thing does, or only the first. What a provider does on the
// next attempt (docs/reliability.md, "The fault model"):
//
//	500   a transient server error: the next attempt is answered
//	429   throttled: the next attempt, after Retry-After, is answered
//	hang  no answer before the timeout: the next attempt is answered
//	drop  accepted, the answer lost: the next attempt is answered (the
//	      webhook by its idempotency key, as a duplicate)
//	400   a permanent rejection: every attempt is rejected again — the
//	      request is invalid, so a retry after a crash is too
//	down  an outage for the run: every attempt fails
func Repeats(fault string) bool { return fault == "400" || fault == "down" }

// Expect is the end a provider's contract calls for after a fault (on the
// first request, or on every one for a fault that repeats): the row of
// docs/reliability.md's fault model the run checks. No fault ("") and a
// throttle end sent.
func Expect(prov, fault string) (ledger.Status, failure.Class) {
	switch fault {
	case "400":
		return ledger.StatusDead, failure.ClassRejected
	case "down":
		return ledger.StatusDead, failure.ClassExhausted
	case "500", "hang", "drop":
		// The provider may have sent (and with "drop" it has): a provider
		// that does not deduplicate reviews, so the delivery waits in the
		// DLQ for an operator. The others retry with the same key.
		if reviews(prov) {
			return ledger.StatusDead, failure.ClassAmbiguous
		}
	}
	return ledger.StatusSent, ""
}
