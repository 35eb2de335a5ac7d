package outcome

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/localtime"
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
	// Escalated: it expired unsent (or needing review) and its reminder's
	// late policy is escalate. It follows the expired (or needs-review)
	// event of the same end, and names it (EndEventID); the stage's
	// operators' topic, if it names one, is told too.
	Escalated Outcome = "escalated"

	// Bounced: the provider accepted it, then reported a permanent bounce
	// (the recipient's server refused it, or the address is on the
	// suppression list). The ledger keeps it sent, with the feedback.
	Bounced Outcome = "bounced"
	// Complained: delivered, and the recipient marked it as spam.
	Complained Outcome = "complained"
	// Rejected: the provider took it, then refused to deliver it (SES: a
	// virus) or could not render its template.
	Rejected Outcome = "rejected"
	// Feedback: any other report of the provider about the message (sent
	// by the provider, delivered, delayed, a transient bounce), or a report
	// that does not change what stands (a late one, a second failure).
	Feedback Outcome = "feedback"
)

// Outcomes are the outcomes, in the order docs/events.md lists them.
var Outcomes = []Outcome{Sent, DeadLettered, Expired, Cancelled, NeedsReview, Escalated, Bounced, Complained, Rejected, Feedback}

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
	case Escalated:
		return "Delivery Escalated"
	case Bounced:
		return "Delivery Bounced"
	case Complained:
		return "Delivery Complained"
	case Rejected:
		return "Delivery Rejected"
	case Feedback:
		return "Delivery Feedback"
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
	// Feedback is the provider's report this event tells of, for bounced,
	// complained, rejected and feedback.
	Feedback *FeedbackDetail `json:"feedback,omitempty"`
	// Fallback is the delivery key of this delivery's fallback, when its
	// reminder names one: taken (once) when this delivery ends dead,
	// expired, bounced, complained or rejected. FallbackOf is, on a
	// fallback's own events, the delivery key of the delivery it stands in
	// for.
	Fallback   string `json:"fallback,omitempty"`
	FallbackOf string `json:"fallbackOf,omitempty"`
	// Late is set on sent when the delivery went out after its reminder's
	// expiresAt, as its late policy send-late allows.
	Late bool `json:"late,omitempty"`
	// EndEventID is, on escalated, the eventId of the expired or
	// needs-review event of the end it escalates.
	EndEventID string `json:"endEventId,omitempty"`
	// TimeZone is the recipient's zone, where the reminder was given one,
	// and DueLocal the delivery's due time on that wall clock
	// ("2027-03-01T09:00": its send window's opening, if it waited for
	// one). Window is the delivery's send window, if it has one
	// ("08:00-21:00 America/New_York mon-sat").
	TimeZone string `json:"timeZone,omitempty"`
	DueLocal string `json:"dueLocal,omitempty"`
	Window   string `json:"window,omitempty"`
}

// recipient sets e's local times and window from d.
func (e *Event) recipient(d ledger.Delivery) {
	e.Window = d.Window
	if d.TimeZone == "" {
		return
	}
	loc, err := localtime.LoadZone(d.TimeZone)
	if err != nil {
		return // a zone the intake accepted and this release's database lacks: the UTC time stands alone
	}
	e.TimeZone, e.DueLocal = d.TimeZone, localtime.WallOf(d.DueAt, loc).String()
}

// FeedbackDetail is a provider's report on a message, as an event tells it:
// never an address.
type FeedbackDetail struct {
	// Kind is what the provider reported: sent-by-provider, delivered,
	// delayed, bounced, complained, rejected, rendering-failed.
	Kind string `json:"kind"`
	// Detail is its type, subtype or status code ("Permanent/General
	// 5.1.1"), when it has one.
	Detail string `json:"detail,omitempty"`
	// Failed is set for a failing report: a permanent bounce, a complaint,
	// a reject, a rendering failure.
	Failed bool `json:"failed"`
	// Standing is the report that stands on the delivery after this one
	// (a failing one is never replaced by an informational one, and a late
	// one does not replace a newer one), as kind and detail.
	Standing string `json:"standing"`
}

// DetailType is e's EventBridge detail-type.
func (e Event) DetailType() string { return e.Outcome.DetailType() }

// Of returns the outcome event of a change of the ledger, from the
// delivery as it was (old; ok false when the item is new) to as it is:
// an event when the delivery entered an end state with this change, and
// false for any other change (a claim, a retry, a lease renewed, a
// revive).
func Of(old ledger.Delivery, hadOld bool, d ledger.Delivery, stage string) (Event, bool) {
	if hadOld { // a new item holds no report yet
		if e, ok := feedbackOf(old, d, stage); ok {
			return e, true
		}
	}
	if hadOld && old.Status == d.Status {
		return Event{}, false
	}
	return End(d, stage)
}

// End returns the event of the end d is in (the one Of gave for the change
// that ended it, whatever reports were recorded since), and false for a
// live delivery.
func End(d ledger.Delivery, stage string) (Event, bool) {
	if !d.Status.Terminal() {
		return Event{}, false
	}
	e := Event{
		Stage: stage, ReminderID: d.ReminderID, AccountRef: d.AccountRef, DeliveryKey: d.Key().String(),
		Channel: d.Channel, Provider: d.Provider, Status: string(d.Status), Attempt: d.Attempts,
		DueAt: ledger.Format(d.DueAt), At: ledger.Format(d.UpdatedAt),
	}
	e.recipient(d)
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
	if d.Feedback.Kind != "" { // a report came first (an SES send whose answer was lost)
		e.Feedback = &FeedbackDetail{Kind: string(d.Feedback.Kind), Detail: d.Feedback.Detail, Failed: d.Failed(), Standing: d.Feedback.Note()}
	}
	e.Fallback, e.FallbackOf = fallbacks(d)
	e.Late = d.SentLate()
	e.EventID = eventID(d)
	return e, true
}

// fallbacks returns the delivery keys of d's fallback and of the delivery
// d is the fallback of, each "" if none.
func fallbacks(d ledger.Delivery) (fallback, of string) {
	if !d.Fallback.IsZero() {
		fallback = d.Fallback.Key(d.ReminderID).String()
	}
	if !d.FallbackOf.IsZero() {
		of = d.FallbackOf.Key(d.ReminderID).String()
	}
	return fallback, of
}

// Escalation returns the escalated event of end, the expired or
// needs-review event of a delivery d whose reminder's late policy is
// escalate, and false for any other event: an escalation follows an
// expiry (an unsent delivery, or one whose last attempt's outcome is
// unknown), never a send, a dead-lettering or a cancel. Its id is derived
// from end's: the same record gives the same id.
func Escalation(end Event, d ledger.Delivery) (Event, bool) {
	if d.Late != ledger.LateEscalate || d.Status != ledger.StatusExpired || end.Outcome.IsFeedback() {
		return Event{}, false
	}
	e := end
	e.Outcome, e.EndEventID, e.EventID = Escalated, end.EventID, digest(end.EventID, string(Escalated))
	return e, true
}

// EndIDs returns the eventIds of every end d's history still holds (an end
// it has since left, by a revive or a redrive, and its present one), oldest
// first: the ids the events of those ends carried.
func EndIDs(d ledger.Delivery) []string {
	var ids []string
	for _, t := range d.Transitions() {
		if t.Status.Terminal() {
			ids = append(ids, digest(d.Key().String(), string(t.Status), t.At, strconv.Itoa(t.Attempt), string(t.Class)))
		}
	}
	return ids
}

// eventID names the change that ended d: its key, the state entered and
// the history entry the same write appended (its time, attempt and
// class). A stream record delivered twice gives the same id; a delivery
// that ends again after a revive gives another (a later entry).
func eventID(d ledger.Delivery) string {
	last := ledger.Entry{At: ledger.Format(d.UpdatedAt)}
	if t := d.Transitions(); len(t) > 0 { // feedback entries after the end do not change it
		last = t[len(t)-1]
	}
	return digest(d.Key().String(), string(d.Status), last.At, strconv.Itoa(last.Attempt), string(last.Class))
}

// digest is the event id of the given parts.
func digest(parts ...string) string {
	h := sha256.New()
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// FeedbackEventID is the eventId of the event of the report whose digest
// (ledger.FeedbackDigest, as Delivery.FeedbackSeen keeps it) was recorded
// on the delivery with key.
func FeedbackEventID(key, reportDigest string) string { return digest(key, "feedback", reportDigest) }

// IsFeedback reports whether o is the outcome of a provider's report
// rather than of an end.
func (o Outcome) IsFeedback() bool {
	return o == Bounced || o == Complained || o == Rejected || o == Feedback
}

// feedbackOf returns the event of a change that recorded a provider's
// report on d (ledger.RecordFeedback: a new digest in FeedbackSeen, an
// entry in the history, the status unchanged): bounced, complained or
// rejected when the report made the delivery failed, feedback otherwise.
// Its id is the report's digest under the delivery's key: the same record
// gives the same id.
func feedbackOf(old, d ledger.Delivery, stage string) (Event, bool) {
	n := len(d.FeedbackSeen)
	if n == 0 || slices.Contains(old.FeedbackSeen, d.FeedbackSeen[n-1]) || len(d.History) == 0 {
		return Event{}, false
	}
	entry := d.History[len(d.History)-1]
	if !entry.Feedback {
		return Event{}, false
	}
	told, _, _ := strings.Cut(entry.Note, "; ") // "bounced Permanent/General[; delivered 250 stands]"
	kind, detail, _ := strings.Cut(told, " ")
	f := &FeedbackDetail{Kind: kind, Detail: detail, Standing: d.Feedback.Note(),
		Failed: kind == string(ledger.FeedbackComplained) || kind == string(ledger.FeedbackRejected) || kind == string(ledger.FeedbackRenderingFailed) ||
			kind == string(ledger.FeedbackBounced) && strings.HasPrefix(detail, "Permanent")}
	e := Event{
		EventID: FeedbackEventID(d.Key().String(), d.FeedbackSeen[n-1]), Outcome: Feedback,
		Stage: stage, ReminderID: d.ReminderID, AccountRef: d.AccountRef, DeliveryKey: d.Key().String(),
		Channel: d.Channel, Provider: d.Provider, Status: string(d.Status), Attempt: d.Attempts, Receipt: d.Receipt,
		DueAt: ledger.Format(d.DueAt), At: entry.At, Feedback: f,
	}
	e.recipient(d)
	e.Fallback, e.FallbackOf = fallbacks(d)
	if d.Failed() && !old.Failed() { // this report made it failed
		switch d.Feedback.Kind {
		case ledger.FeedbackBounced:
			e.Outcome = Bounced
		case ledger.FeedbackComplained:
			e.Outcome = Complained
		default:
			e.Outcome = Rejected
		}
	}
	return e, true
}
