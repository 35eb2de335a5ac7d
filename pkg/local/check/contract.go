package check

import (
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/provider/ses"
	"github.com/nudgehq/nudge/pkg/provider/sns"
	"github.com/nudgehq/nudge/pkg/provider/webhook"
)

// contract is what the checker holds a provider to.
type contract struct {
	// name is how the violations name the provider.
	name string
	// reviews: the provider does not deduplicate, so a send that may have
	// gone out (an ambiguous failure, or an attempt that never ended) is
	// dead-lettered for an operator's review, never sent again; a second
	// copy in its record is a delivery sent twice.
	reviews bool
}

// contracts are the providers' contracts, by name: the one place the
// checker tells providers apart. A provider not named here is held to the
// zero contract: an ambiguous failure is retried with the same key.
var contracts = map[string]contract{
	webhook.Name: {name: "the webhook"},        // deduplicates by Idempotency-Key: a retry is suppressed
	ses.Name:     {name: "SES", reviews: true}, // does not deduplicate
	sns.Name:     {name: "SNS"},                // retried: a standard topic's copies are counted; subscribers drop them by deliveryKey
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
		if contracts[prov].reviews {
			return ledger.StatusDead, failure.ClassAmbiguous
		}
	}
	return ledger.StatusSent, ""
}
