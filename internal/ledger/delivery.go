package ledger

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/failure"
)

// Status is a delivery's state.
type Status string

// Delivery states. Sent, Dead, Expired and Cancelled are terminal, except
// that a Dead delivery can be claimed again by a redriven message. Held is
// neither terminal nor live: a fallback waiting for its primary to fail
// (TakeFallback makes it pending), never in the due index, never claimed.
const (
	StatusHeld      Status = "held"      // a fallback, taken only if its primary fails
	StatusPending   Status = "pending"   // in the calendar, not yet handed off
	StatusQueued    Status = "queued"    // handed off to the queue
	StatusSending   Status = "sending"   // claimed by a consumer, lease running
	StatusRetrying  Status = "retrying"  // failed transiently, waiting to retry
	StatusSent      Status = "sent"      // the provider accepted it
	StatusDead      Status = "dead"      // dead-lettered with a reason
	StatusExpired   Status = "expired"   // past expiresAt before it could be sent
	StatusCancelled Status = "cancelled" // cancelled by an operator or the owner
)

// Terminal reports whether no further delivery attempt follows s.
func (s Status) Terminal() bool {
	switch s {
	case StatusSent, StatusDead, StatusExpired, StatusCancelled:
		return true
	}
	return false
}

// FallbackRef names a reminder's fallback delivery by its channel and
// provider (its reminder is the primary's); stored as "channel#provider".
type FallbackRef struct {
	Channel, Provider string
}

// IsZero reports whether f names no delivery.
func (f FallbackRef) IsZero() bool { return f.Channel == "" && f.Provider == "" }

// String is "channel:provider", as notes and reports name it.
func (f FallbackRef) String() string { return f.Channel + ":" + f.Provider }

// Key is the key of the delivery f names in reminder id.
func (f FallbackRef) Key(reminderID string) message.DeliveryKey {
	return message.DeliveryKey{ReminderID: reminderID, Channel: f.Channel, Provider: f.Provider}
}

// stored is f as its attribute holds it; "" for none.
func (f FallbackRef) stored() string {
	if f.IsZero() {
		return ""
	}
	return f.Channel + "#" + f.Provider
}

// parseFallbackRef reads a stored "channel#provider".
func parseFallbackRef(field, s string) (FallbackRef, error) {
	if s == "" {
		return FallbackRef{}, nil
	}
	c, p, ok := strings.Cut(s, "#")
	if !ok || c == "" || p == "" {
		return FallbackRef{}, fmt.Errorf("ledger: attribute %s %q is not channel#provider", field, s)
	}
	return FallbackRef{Channel: c, Provider: p}, nil
}

// LatePolicy is what a reminder's deliveries do once its expiresAt has
// passed unsent, as a delivery item carries it: "" (expire, the default),
// LateSendLate or LateEscalate.
type LatePolicy string

// Late policies other than the default (expire, stored as none).
const (
	// LateSendLate keeps trying until the reminder's expiresAt plus a bound
	// (the delivery's ExpiresAt; OnTimeUntil is the reminder's).
	LateSendLate LatePolicy = "send-late"
	// LateEscalate expires the delivery, and its expiry is published as an
	// escalation.
	LateEscalate LatePolicy = "escalate"
)

// LateRule is a reminder's late policy: the policy and, for send-late,
// how long after the reminder's expiresAt its deliveries may still go.
type LateRule struct {
	Policy LatePolicy
	Within time.Duration
}

// DeliveryTimes derives a delivery's expiry from its reminder's expiresAt
// under rule r: the one place it is derived (create and reschedule alike).
// Under send-late the delivery expires Within after the reminder, and is
// on time until the reminder's expiresAt (onTimeUntil); otherwise it
// expires with the reminder, and onTimeUntil is zero.
func (r LateRule) DeliveryTimes(reminderExpiresAt time.Time) (expiresAt, onTimeUntil time.Time) {
	if r.Policy == LateSendLate && r.Within > 0 {
		return reminderExpiresAt.Add(r.Within), reminderExpiresAt
	}
	return reminderExpiresAt, time.Time{}
}

// LateRule is the late rule d was created under, as far as d tells it
// (the send-late bound is its ExpiresAt − OnTimeUntil).
func (d Delivery) LateRule() LateRule {
	r := LateRule{Policy: d.Late}
	if d.Late == LateSendLate && !d.OnTimeUntil.IsZero() {
		r.Within = d.ExpiresAt.Sub(d.OnTimeUntil)
	}
	return r
}

// Delivery is one delivery item.
type Delivery struct {
	ReminderID string
	Channel    string
	Provider   string
	Status     Status
	// AccountRef is the owning account's reference, copied from the
	// reminder when the delivery is created, so that what is derived from
	// the delivery item alone (its outcome events) names the account. Not
	// indexed (the account index is the reminder items'); empty on items
	// written before it was kept.
	AccountRef string
	// RecipientRef and TemplateRef are references the provider resolves;
	// never the recipient's address or the rendered text.
	RecipientRef string
	TemplateRef  string
	// Address is the recipient's address for the channel, for a provider
	// that sends to it itself (SES). Personal data: the delivery item is
	// the one place it is kept (encrypted at rest, removed by retention and
	// purge); it is never logged, published, or put in an error.
	Address string
	// TemplateData is the data a stored template renders (the reminder's
	// metadata), for a provider that renders (SES).
	TemplateData map[string]string
	DueAt        time.Time
	ExpiresAt    time.Time
	// Attempts counts claims: provider attempts started, by any copy of the
	// delivery's message.
	Attempts int
	// BudgetFrom is Attempts when the attempt budget last restarted: when a
	// redrive took the delivery out of dead. BudgetUsed is what counts
	// against the consumer's budget.
	BudgetFrom int
	// UnendedAttempt is the last attempt that started and never recorded an
	// end, as the repair found it (its lease lapsed long ago) when it
	// handed the delivery to the queue again; 0 if none.
	UnendedAttempt int
	// Repairs counts the times the enqueue's repair handed the delivery
	// back to the queue since a consumer last claimed it (or it was
	// rescheduled): each repair waits twice as long as the one before, so
	// that a queue slower than the repair's window gets a few copies of a
	// delivery, not one per window.
	Repairs        int
	ClaimToken     string
	LeaseUntil     time.Time
	LastErrorClass failure.Class
	LastError      string
	NextAttemptAt  time.Time
	SentAt         time.Time
	Receipt        string
	UpdatedAt      time.Time
	// TTL is when DynamoDB may delete the item: Ledger.Expiry, set when the
	// delivery is created.
	TTL time.Time
	// Index is where a live delivery stands in the due index; nil once it
	// has ended.
	Index *IndexPosition
	// HandOff, given to Create, says that the writer hands the delivery to
	// the queue itself, at once, after the write (the intake's short-notice
	// hand-off): its due index entry is marked so that the enqueue's cursor
	// passes it without publishing a second message. If the publish is
	// lost, the enqueue's repair finds it as any entry its cursor passed;
	// if it fails, the writer hands it back with Release. Not stored: read
	// back as Index.HandedOff.
	HandOff bool
	// History is the last transitions, and the provider's feedback and
	// the reveals of the address among them (Entry.Feedback, Entry.Reveal;
	// Transitions leaves those out).
	History []Entry
	// Feedback is the provider's feedback that stands (RecordFeedback has
	// the rules); zero if none was recorded. Its ID is empty: the ledger
	// keeps digests of the IDs, in FeedbackSeen.
	Feedback Feedback
	// FeedbackSeen are the digests (FeedbackDigest) of the last
	// MaxFeedbackSeen feedback events recorded, by which a repeat is
	// refused.
	FeedbackSeen []string
	// Fallback, on a primary delivery, names its fallback (a held
	// delivery of the same reminder), taken (TakeFallback) if it ends
	// dead, bounced or complained, or expires unsent (FallbackDue).
	// Attribute "fb", "channel#provider".
	Fallback FallbackRef
	// FallbackOf, on a fallback, names its primary. Attribute "fbOf".
	FallbackOf FallbackRef
	// FallbackWithin, on a fallback, is how long it may take once taken:
	// its ExpiresAt is then the take's time plus this. Attribute
	// "fbWithin", whole seconds.
	FallbackWithin time.Duration
	// Late is the reminder's late policy, on every delivery of a reminder
	// whose policy is not the default (expire). Attribute "late".
	Late LatePolicy
	// OnTimeUntil is, under send-late, the reminder's expiresAt: the
	// delivery may still be sent until its own ExpiresAt (later), but a
	// send after OnTimeUntil is late (SentLate). Attribute "onTime".
	OnTimeUntil time.Time
	// Window is the delivery's send window (pkg/localtime's compact form,
	// "08:00-21:00 America/New_York mon-fri"), outside which it is never
	// sent: its DueAt is the window's first opening at or after the
	// reminder's dueAt, and a consumer that claims it while the window is
	// shut gives the claim back (AwaitWindow). Empty for none. Attribute
	// "win".
	Window string
	// TimeZone is its reminder's zone (the recipient's), where the reminder
	// was given one, for its outcome events' local times. Attribute "tz".
	TimeZone string
	// FallbackTaken, on a primary, is when its fallback was taken
	// (TakeFallback); zero while it was not. A primary whose fallback was
	// taken is never sent any more: a revive or redrive of it is refused
	// (ErrFallbackTaken). Attribute "fbTaken".
	FallbackTaken time.Time
}

// SentLate reports whether d was sent after its reminder's expiresAt,
// under send-late (OnTimeUntil set).
func (d Delivery) SentLate() bool {
	return d.Status == StatusSent && !d.OnTimeUntil.IsZero() && d.SentAt.After(d.OnTimeUntil)
}

// FallbackDue reports whether d, as it stands, is a primary whose fallback
// should be taken, and the reason the fallback's history gives: d names a
// fallback, and it is dead ("dead (permanent)", by its class), expired
// ("expired"), or its standing feedback failed it ("bounced
// Permanent/General", "complained abuse").
//
// An ambiguous end takes no fallback: a delivery dead as class ambiguous,
// or expired or cancelled while an attempt's outcome was unknown
// (EndedUnended), may have reached its recipient; the operator's review,
// or the provider's record (a report that fails it), decides.
func (d Delivery) FallbackDue() (reason string, ok bool) {
	if d.Fallback.IsZero() {
		return "", false
	}
	switch {
	case d.Status == StatusDead && d.LastErrorClass == failure.ClassAmbiguous, d.EndedUnended() > 0:
		return "", false
	case d.Status == StatusDead:
		if d.LastErrorClass != "" {
			return "dead (" + string(d.LastErrorClass) + ")", true
		}
		return "dead", true
	case d.Status == StatusExpired:
		return "expired", true
	case d.Feedback.Failed():
		r := string(d.Feedback.Kind)
		if d.Feedback.Detail != "" {
			r += " " + d.Feedback.Detail
		}
		return r, true
	}
	return "", false
}

// FallbackNote is the history note of a taken fallback: "fallback of
// email:ses: dead (permanent)".
func FallbackNote(primary FallbackRef, reason string) string {
	return "fallback of " + primary.String() + ": " + reason
}

// IndexPosition is a live delivery's place in the due index.
type IndexPosition struct {
	// Shard is its shard; Sort its sort key (publishAt#key).
	Shard int
	Sort  string
	// PublishAt is when the enqueue may hand it off.
	PublishAt time.Time
	// HandedOff is true if its writer handed it to the queue itself
	// (IndexEntry.HandedOff).
	HandedOff bool
}

// Entry is one transition in a delivery's history.
type Entry struct {
	// At is when the transition happened (Format'ed).
	At string `dynamodbav:"t" json:"at"`
	// Status is the state entered.
	Status Status `dynamodbav:"s" json:"status"`
	// Attempt is the attempt number, where there is one.
	Attempt int `dynamodbav:"a,omitempty" json:"attempt,omitempty"`
	// Class is the error class, for failures.
	Class failure.Class `dynamodbav:"c,omitempty" json:"class,omitempty"`
	// Note is a short free text: a reason, a retry time, a receipt; for
	// feedback, which ("bounced Permanent/General").
	Note string `dynamodbav:"n,omitempty" json:"note,omitempty"`
	// Feedback is set on an entry that records the provider's feedback
	// (RecordFeedback; the note names it) rather than a transition:
	// Status is then the status the delivery had, unchanged.
	Feedback bool `dynamodbav:"f,omitempty" json:"feedback,omitempty"`
	// Reveal is set on an entry that records an address shown unmasked to
	// an operator (RecordReveal; the note says to whom and why) rather
	// than a transition: Status is then the status the delivery had,
	// unchanged.
	Reveal bool `dynamodbav:"r,omitempty" json:"reveal,omitempty"`
}

// Transition reports whether e records a change of status: not the
// provider's feedback nor a reveal, which keep the status.
func (e Entry) Transition() bool { return !e.Feedback && !e.Reveal }

// LapsedLeaseTaken reports whether d, as its latest claim left it, follows
// an attempt that started and never recorded an end: the claim took over
// its lapsed lease (the last two transitions are both sending), or
// the repair handed it back to the queue after that attempt
// (UnendedAttempt is the one before this claim's). That attempt may have
// reached the provider before its consumer died or lost the message. A
// redrive since (BudgetFrom) settles it: the operator decided.
func (d Delivery) LapsedLeaseTaken() bool {
	if d.Status != StatusSending {
		return false
	}
	h := d.Transitions()
	n := len(h)
	if n >= 2 && h[n-1].Status == StatusSending && h[n-2].Status == StatusSending {
		return true
	}
	return d.UnendedAttempt > d.BudgetFrom && d.UnendedAttempt == d.Attempts-1
}

// unended returns the attempt of d that started and never recorded an end,
// as d stands, with leases ending before lapsedBefore counted as lapsed; 0
// if none: an attempt holding a lapsed lease, one the repair found so and
// handed back to the queue (UnendedAttempt, no claim since), a dead
// delivery dead-lettered as ambiguous, or one waiting for the provider's
// record (retrying, class ambiguous): the attempt each names may have gone
// out. unendedCond is the same test as a DynamoDB condition.
func (d Delivery) unended(lapsedBefore time.Time) int {
	switch {
	case d.Status == StatusSending && d.LeaseUntil.Before(lapsedBefore):
		return d.Attempts
	case (d.Status == StatusPending || d.Status == StatusQueued || d.Status == StatusRetrying) &&
		d.UnendedAttempt > 0 && d.UnendedAttempt == d.Attempts && d.UnendedAttempt > d.BudgetFrom:
		return d.UnendedAttempt
	case d.Status == StatusDead && d.LastErrorClass == failure.ClassAmbiguous:
		return max(d.Attempts, 1)
	case d.Status == StatusRetrying && d.LastErrorClass == failure.ClassAmbiguous:
		// Waiting for the provider's record of an attempt that may have
		// gone out (AwaitRecord): only a retry of that kind says ambiguous.
		return max(d.Attempts, 1)
	}
	return 0
}

// UnendedNote is what a delivery's history says of an attempt that never
// recorded its end when the delivery is cancelled or expired.
func UnendedNote(attempt int) string {
	return fmt.Sprintf("attempt %d may have been sent (it never recorded its end)", attempt)
}

// EndedUnended returns, for a delivery that was cancelled or expired while
// an attempt's outcome was unknown, that attempt (the last transition
// says so, class ambiguous); 0 otherwise. Such a delivery may have
// reached its recipient: an operator checks the provider's record.
func (d Delivery) EndedUnended() int {
	h := d.Transitions()
	if len(h) == 0 || (d.Status != StatusCancelled && d.Status != StatusExpired) {
		return 0
	}
	if e := h[len(h)-1]; e.Status == d.Status && e.Class == failure.ClassAmbiguous {
		return max(e.Attempt, 1)
	}
	return 0
}

// Masked returns d with its address masked (MaskAddress), as reports show it.
func (d Delivery) Masked() Delivery {
	d.Address = MaskAddress(d.Address)
	return d
}

// MaskAddress hides an address but for its first character (none for a
// local part of one) and, for an e-mail address, its domain:
// "a•••@example.com". Empty stays empty.
func MaskAddress(a string) string {
	if a == "" {
		return ""
	}
	local, domain, ok := strings.Cut(a, "@")
	first := []rune(local)
	if len(first) < 2 {
		first = nil // a one-letter local part would show whole
	}
	if len(first) == 0 {
		if ok {
			return "•••@" + domain
		}
		return "•••"
	}
	if !ok {
		return string(first[0]) + "•••"
	}
	return string(first[0]) + "•••@" + domain
}

// BudgetUsed returns the attempts counted against the attempt budget: those
// since the last redrive.
func (d Delivery) BudgetUsed() int { return d.Attempts - d.BudgetFrom }

// Key returns the delivery key.
func (d Delivery) Key() message.DeliveryKey {
	return message.DeliveryKey{ReminderID: d.ReminderID, Channel: d.Channel, Provider: d.Provider}
}

// TimeFormat is how times are stored: fixed-width UTC, so that strings sort
// and compare in time order inside DynamoDB conditions.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Format renders t in TimeFormat.
func Format(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Sentinel reasons a conditional write was refused; match with errors.Is.
var (
	// ErrNotFound: no delivery item has that key.
	ErrNotFound = errors.New("delivery not found")
	// ErrAlreadySent: the delivery was sent before; this is a duplicate.
	ErrAlreadySent = errors.New("delivery already sent")
	// ErrFinished: the delivery ended without being sent (cancelled, expired,
	// or dead-lettered where the write needed it live).
	ErrFinished = errors.New("delivery already finished")
	// ErrLeased: another consumer holds the delivery's lease.
	ErrLeased = errors.New("delivery in flight elsewhere")
	// ErrNotDue: the delivery's dueAt is later than the claim allows.
	ErrNotDue = errors.New("delivery not yet due")
	// ErrExpired: the delivery is past its expiresAt.
	ErrExpired = errors.New("delivery expired")
	// ErrLeaseLost: the write needed this consumer's lease, which is gone.
	ErrLeaseLost = errors.New("delivery lease lost")
	// ErrNotReleasable: the delivery is not in a state that can go back to
	// the calendar.
	ErrNotReleasable = errors.New("delivery cannot be released")
	// ErrNotDead: a redrive found the delivery no longer dead (a console
	// redrive or an earlier CLI redrive got there first).
	ErrNotDead = errors.New("delivery is not dead")
	// ErrNotExpired: an Expire found the delivery's expiresAt (as stored,
	// perhaps rescheduled since it was read) still ahead.
	ErrNotExpired = errors.New("delivery not expired")
	// ErrInFlight: a purge found a delivery a consumer is sending now.
	ErrInFlight = errors.New("delivery is being sent")
	// ErrHeld: the delivery is a fallback not taken (held): nothing sends,
	// expires or dead-letters it until TakeFallback makes it pending. No
	// message of Nudge's names one; a consumer acknowledges such a message.
	ErrHeld = errors.New("delivery is a fallback not taken")
	// ErrNotHeld: TakeFallback found the fallback no longer held (taken
	// already, or cancelled): the caller's work is done.
	ErrNotHeld = errors.New("fallback is not held")
	// ErrPrimaryChanged: TakeFallback found the primary no longer as its
	// caller saw it fail (revived, redriven, sent or purged since): the
	// caller's work is done, and the fallback stays held.
	ErrPrimaryChanged = errors.New("primary changed since it failed")
	// ErrFallbackTaken: the delivery's fallback was taken (FallbackTaken):
	// the fallback stands in for it, and it is never sent any more. A
	// revive, a redrive or a DLQ copy's claim of it is refused; a
	// consumer acknowledges such a message unsent.
	ErrFallbackTaken = errors.New("its fallback was taken")
)

// RefusedError is a conditional write that the ledger refused. Current is
// the item as it was, from ALL_OLD, so the caller needs no extra read.
type RefusedError struct {
	// Op is the transition that was refused ("claim", "complete", …).
	Op string
	// Key is the delivery the write was for.
	Key message.DeliveryKey
	// Reason is one of the Err sentinels.
	Reason error
	// Current is the delivery as DynamoDB had it; zero for ErrNotFound.
	Current Delivery
}

func (e *RefusedError) Error() string {
	if e.Current.Status == "" {
		return fmt.Sprintf("ledger: %s %s: %v", e.Op, e.Key, e.Reason)
	}
	return fmt.Sprintf("ledger: %s %s: %v (status %q)", e.Op, e.Key, e.Reason, e.Current.Status)
}

// Is matches the sentinel reason.
func (e *RefusedError) Is(target error) bool { return target == e.Reason }
