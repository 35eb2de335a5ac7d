package outcome

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/failure"
)

// Source is every outcome event's source.
const Source = "nudge"

// Outcome is how a delivery ended, as its event tells it.
type Outcome string

// The outcomes, each its own detail-type (DetailType).
const (
	// Sent: the provider accepted the delivery.
	Sent Outcome = "sent"
	// DeadLettered: it failed for good (its class and reason say why) and
	// its message went to the dead-letter queue.
	DeadLettered Outcome = "dead-lettered"
	// Expired: its expiresAt passed before it could be sent.
	Expired Outcome = "expired"
	// Cancelled: an operator or the owner cancelled it.
	Cancelled Outcome = "cancelled"
	// NeedsReview: it ended while an attempt's outcome was unknown (dead-
	// lettered as ambiguous, or expired or cancelled after an attempt that
	// never recorded its end): the recipient may have it. Someone checks
	// the provider's record.
	NeedsReview Outcome = "needs-review"
)

// Outcomes are the outcomes, in the order docs/events.md lists them.
var Outcomes = []Outcome{Sent, DeadLettered, Expired, Cancelled, NeedsReview}

// DetailType is o's EventBridge detail-type.
func (o Outcome) DetailType() string {
	switch o {
	case Sent:
		return "Delivery Sent"
	case DeadLettered:
		return "Delivery Dead-Lettered"
	case Expired:
		return "Delivery Expired"
	case Cancelled:
		return "Delivery Cancelled"
	case NeedsReview:
		return "Delivery Needs Review"
	}
	return ""
}

// Event is an outcome event's detail. It never holds an address, template
// data or metadata: only references, states and times.
type Event struct {
	// EventID is the same for every publication of one change of the
	// ledger: a consumer drops an event whose EventID it has seen.
	EventID string `json:"eventId"`
	// Outcome is how the delivery ended (the detail-type says it too).
	Outcome Outcome `json:"outcome"`
	// Stage is the stage that sent it.
	Stage       string `json:"stage,omitempty"`
	ReminderID  string `json:"reminderId"`
	AccountRef  string `json:"accountRef,omitempty"`
	DeliveryKey string `json:"deliveryKey"`
	Channel     string `json:"channel"`
	Provider    string `json:"provider"`
	// Status is the delivery's state in the ledger: sent, dead, expired or
	// cancelled (needs-review is any of the last three).
	Status string `json:"status"`
	// Attempt is the number of provider attempts made.
	Attempt int `json:"attempt"`
	// Class and Reason are the failure's, for dead-lettered and needs-
	// review (never recipient data: the ledger keeps none in them).
	Class  failure.Class `json:"class,omitempty"`
	Reason string        `json:"reason,omitempty"`
	// Receipt is the provider's receipt (its message id), for sent.
	Receipt string `json:"receipt,omitempty"`
	// DueAt is when the delivery was due; At when it ended (the ledger's
	// time of the change). Both RFC 3339, UTC, milliseconds.
	DueAt string `json:"dueAt"`
	At    string `json:"at"`
}

// DetailType is e's EventBridge detail-type.
func (e Event) DetailType() string { return e.Outcome.DetailType() }

// Of returns the outcome event of a change of the ledger, from the
// delivery as it was (old; ok false when the item is new) to as it is:
// an event when the delivery entered an end state with this change, and
// false for any other change (a claim, a retry, a lease renewed, a
// revive).
func Of(old ledger.Delivery, hadOld bool, d ledger.Delivery, stage string) (Event, bool) {
	if !d.Status.Terminal() || (hadOld && old.Status == d.Status) {
		return Event{}, false
	}
	e := Event{
		Stage: stage, ReminderID: d.ReminderID, AccountRef: d.AccountRef, DeliveryKey: d.Key().String(),
		Channel: d.Channel, Provider: d.Provider, Status: string(d.Status), Attempt: d.Attempts,
		DueAt: ledger.Format(d.DueAt), At: ledger.Format(d.UpdatedAt),
	}
	switch d.Status {
	case ledger.StatusSent:
		e.Outcome, e.Receipt = Sent, d.Receipt
	case ledger.StatusDead:
		e.Outcome, e.Class, e.Reason = DeadLettered, d.LastErrorClass, d.LastError
		if d.LastErrorClass == failure.ClassAmbiguous {
			e.Outcome = NeedsReview
		}
	case ledger.StatusExpired:
		e.Outcome = Expired
	case ledger.StatusCancelled:
		e.Outcome = Cancelled
	}
	if n := d.EndedUnended(); n > 0 {
		e.Outcome, e.Class, e.Reason = NeedsReview, failure.ClassAmbiguous, ledger.UnendedNote(n)
	}
	e.EventID = eventID(d)
	return e, true
}

// eventID names the change that ended d: its key, the state entered and
// the history entry the same write appended (its time, attempt and
// class). A stream record delivered twice gives the same id; a delivery
// that ends again after a revive gives another (a later entry).
func eventID(d ledger.Delivery) string {
	h := sha256.New()
	last := ledger.Entry{At: ledger.Format(d.UpdatedAt)}
	if n := len(d.History); n > 0 {
		last = d.History[n-1]
	}
	for _, s := range []string{d.Key().String(), string(d.Status), last.At, strconv.Itoa(last.Attempt), string(last.Class)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
