package check

import (
	"strings"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// drivers are the providers the checker knows, by name: the registry's.
// The checker reads each one's contract, never a stage's override of it
// (NUDGE_<NAME>_AMBIGUOUS). A test of this package adds a provider of its
// own here, before any test runs, to check a policy no registered provider
// has.
var drivers = func() map[string]provider.Driver {
	m := map[string]provider.Driver{}
	for _, d := range registry.All() {
		m[d.Name] = d
	}
	return m
}()

// policy is provider prov's ambiguous policy, by its contract: what it does
// with a send that may have gone out (an ambiguous failure, or an attempt
// that never ended). The one place the checker tells providers apart. A
// provider the checker does not know retries.
func policy(prov string) provider.AmbiguousPolicy {
	if p := drivers[prov].Contract.Ambiguous; p != "" {
		return p
	}
	return provider.AmbiguousRetry
}

// reviews reports whether provider prov's contract reviews a send that may
// have gone out: it does not deduplicate, so such a send is dead-lettered
// for an operator's review, never sent again.
func reviews(prov string) bool { return policy(prov) == provider.AmbiguousReview }

// records reports whether provider prov's contract settles a send that may
// have gone out by the provider's own record (SES's events): it does not
// deduplicate, so such a send waits for the record, is recorded sent if the
// record shows it, sent again only once the record shows it did not, and
// dead-lettered for review if the record cannot tell within the longest
// wait.
func records(prov string) bool { return policy(prov) == provider.AmbiguousRecord }

// sendsOnce reports whether provider prov must hold at most one copy of a
// delivery: it does not deduplicate (review or record), so its policy
// never sends again what may have gone out. A provider that retries with
// the same key deduplicates by it, or has its copies counted.
func sendsOnce(prov string) bool { return reviews(prov) || records(prov) }

// title is how the violations name provider prov.
func title(prov string) string {
	if d := drivers[prov]; d.Title != "" {
		return d.Title
	}
	return prov
}

// The ledger's history notes of the record policy, as the consumer and the
// feedback function write them (internal/consumer/record.go,
// internal/feedback/function.go).
const (
	// waitNote starts the note of a retrying entry, class ambiguous, that
	// waits for the provider's record: "awaits ses record to 09:15:00Z".
	waitNote = "awaits "
	// settledNote starts the note of a sent entry that the provider's
	// record settled, without a send: "sent, by SES's record".
	settledNote = "sent, by "
)

// waits reports whether history entry e is a wait for the provider's
// record of an ambiguous attempt.
func waits(e ledger.Entry) bool {
	return e.Status == ledger.StatusRetrying && e.Class == failure.ClassAmbiguous && strings.HasPrefix(e.Note, waitNote)
}

// settled reports whether history entry e records a delivery of provider
// prov sent by the provider's record ("sent, by SES's record").
func settled(prov string, e ledger.Entry) bool {
	r := drivers[prov].Contract.Reports
	return e.Status == ledger.StatusSent && r != nil && e.Note == settledNote+r.Record
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
//
// After "500", "hang" and "drop" the provider may have sent (and with
// "drop" it has): a provider that reviews leaves the delivery dead as
// ambiguous, for an operator. The others end it sent: a provider that
// retries sends again with the same key; one that records (SES) settles it
// by its record — sent without sending after "drop", whose message it
// reports, and sent again after "500" and "hang", which never reached it,
// once it reports a later message. A delivery of a provider that records
// may still end dead as ambiguous with no copy in its record, where the
// record could not settle it within the longest wait (Check accepts that
// after "500", "hang" or a kill mid-send, and counts it).
func Expect(prov, fault string) (ledger.Status, failure.Class) {
	switch fault {
	case "400":
		return ledger.StatusDead, failure.ClassRejected
	case "down":
		return ledger.StatusDead, failure.ClassExhausted
	case "500", "hang", "drop":
		if reviews(prov) {
			return ledger.StatusDead, failure.ClassAmbiguous
		}
	}
	return ledger.StatusSent, ""
}
