package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/text"
)

// FeedbackKind is what a provider said of a message after it took it (an
// SES sending event).
type FeedbackKind string

// The kinds of feedback. Failing ones (Failed) say the recipient did not,
// or should not, get the message; the others are informational.
const (
	// FeedbackSentByProvider: the provider took the message and will try
	// to deliver it (SES's Send event). Informational.
	FeedbackSentByProvider FeedbackKind = "sent-by-provider"
	// FeedbackDelivered: the recipient's mail server accepted it.
	// Informational.
	FeedbackDelivered FeedbackKind = "delivered"
	// FeedbackDelayed: delivery is delayed; the provider keeps trying.
	// Informational.
	FeedbackDelayed FeedbackKind = "delayed"
	// FeedbackBounced: the recipient's server refused it. Failing when
	// Permanent (a hard bounce); a transient or undetermined bounce is
	// informational.
	FeedbackBounced FeedbackKind = "bounced"
	// FeedbackComplained: the recipient marked it as spam. Failing.
	FeedbackComplained FeedbackKind = "complained"
	// FeedbackRejected: the provider refused to deliver it (SES: a virus).
	// Failing.
	FeedbackRejected FeedbackKind = "rejected"
	// FeedbackRenderingFailed: the provider could not render its template,
	// so nothing was sent. Failing.
	FeedbackRenderingFailed FeedbackKind = "rendering-failed"
)

// FeedbackKinds are the kinds, informational first.
var FeedbackKinds = []FeedbackKind{FeedbackSentByProvider, FeedbackDelayed, FeedbackDelivered, FeedbackBounced,
	FeedbackComplained, FeedbackRejected, FeedbackRenderingFailed}

// Feedback is one event a provider reported about a delivery's message.
// It never holds an address: Detail is a type, a subtype or a status code.
type Feedback struct {
	// Kind is what happened.
	Kind FeedbackKind
	// Permanent is set for a bounce of type Permanent (a hard bounce).
	Permanent bool
	// Detail is a short text without any address, such as
	// "Permanent/General", "Transient/MailboxFull" or a reject's reason;
	// at most MaxFeedbackDetail bytes are kept.
	Detail string
	// At is the provider's time of the event.
	At time.Time
	// ID identifies the event, for deduplication: the same event delivered
	// twice has the same ID (SES: a bounce's or complaint's feedbackId,
	// else messageId, eventType and the event's timestamp). Required. The
	// ledger keeps a digest of it, not the ID, so a Delivery's standing
	// Feedback has none.
	ID string
	// MessageID is the provider's id of the message (SES's MessageId, the
	// receipt the ledger keeps on a sent delivery).
	MessageID string
}

// MaxFeedbackDetail is the most of a feedback's detail the ledger keeps, in
// bytes; MaxFeedbackSeen how many of the last feedback events' digests a
// delivery remembers to refuse repeats. Both keep the item under 1 KB.
const (
	MaxFeedbackDetail = 64
	MaxFeedbackSeen   = 8
)

// ErrFeedbackSeen is the reason RecordFeedback refuses an event it has
// recorded already (by its ID): a repeat, which the caller treats as done.
var ErrFeedbackSeen = errors.New("feedback already recorded")

// Failed reports whether f is a failing feedback: a permanent bounce, a
// complaint, a reject or a rendering failure.
func (f Feedback) Failed() bool {
	switch f.Kind {
	case FeedbackComplained, FeedbackRejected, FeedbackRenderingFailed:
		return true
	case FeedbackBounced:
		return f.Permanent
	}
	return false
}

// Note is what a delivery's history says of f: its kind and detail, such as
// "bounced Permanent/General".
func (f Feedback) Note() string {
	if f.Detail == "" {
		return string(f.Kind)
	}
	return string(f.Kind) + " " + f.Detail
}

// Validate reports what makes f unfit to record.
func (f Feedback) Validate() error {
	switch {
	case !slices.Contains(FeedbackKinds, f.Kind):
		return fmt.Errorf("feedback kind %q is not one of %v", f.Kind, FeedbackKinds)
	case f.ID == "":
		return fmt.Errorf("%s feedback has no ID; give the provider's id of the event, by which a repeat is known", f.Kind)
	case f.At.IsZero():
		return fmt.Errorf("%s feedback has no time; give the provider's time of the event", f.Kind)
	case f.Permanent && f.Kind != FeedbackBounced:
		return fmt.Errorf("%s feedback is marked permanent; only a bounce is", f.Kind)
	}
	return nil
}

// Failed reports whether d's standing feedback is a failing one: sent, and
// then bounced for good, complained of, rejected or not rendered by the
// provider.
func (d Delivery) Failed() bool { return d.Feedback.Failed() }

// outranks reports whether f replaces cur as a delivery's standing
// feedback: a failing one is never replaced by an informational one;
// between two of the same weight the later by provider time stands; at
// the same time, the one later in FeedbackKinds (a fixed order, so that the
// order of arrival does not decide); and of the same kind at the same
// time, the one that came first.
func (f Feedback) outranks(cur Feedback) bool {
	if cur.Kind == "" {
		return true
	}
	if f.Failed() != cur.Failed() {
		return f.Failed()
	}
	if c := f.At.Compare(cur.At); c != 0 {
		return c > 0
	}
	return slices.Index(FeedbackKinds, f.Kind) > slices.Index(FeedbackKinds, cur.Kind)
}

// FeedbackDigest is what a delivery keeps of a feedback's ID to know a
// repeat: 8 characters (48 bits) of its SHA-256, so that eight fit in the
// item's budget whatever the provider's ids look like. Two of a
// delivery's few events share a digest with odds of about 1 in 10^13.
func FeedbackDigest(id string) string {
	sum := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(sum[:6])
}

// FeedbackItemBytes is the size a feedback write keeps a delivery item
// within, by DynamoDB's count (attribute names and values): under 1 KB
// with a margin, so that the write costs one write unit.
const FeedbackItemBytes = 1000

// withFeedback returns d with f recorded at now: its digest remembered
// (the last MaxFeedbackSeen), an entry in the history (the status
// unchanged, the note naming the feedback; the history bounded to limit
// entries and the item to FeedbackItemBytes, the oldest entries dropped
// but never the last two transitions nor the entry of f), and, if f
// outranks the standing feedback, f standing (stands true). It refuses a
// repeat with ErrFeedbackSeen. Shared by the DynamoDB ledger and Memory.
func (d Delivery) withFeedback(f Feedback, now time.Time, limit int) (_ Delivery, stands bool, _ error) {
	digest := FeedbackDigest(f.ID)
	if slices.Contains(d.FeedbackSeen, digest) {
		return Delivery{}, false, ErrFeedbackSeen
	}
	f.At, f.ID = ms(f.At), ""
	f.Detail, f.MessageID = text.Clip(f.Detail, MaxFeedbackDetail), text.Clip(f.MessageID, MaxReceipt)
	note := f.Note()
	if stands = f.outranks(d.Feedback); stands {
		d.Feedback = f
	} else {
		note += "; " + d.Feedback.Note() + " stands"
	}
	d.FeedbackSeen = append(slices.Clone(d.FeedbackSeen), digest)
	d.FeedbackSeen = d.FeedbackSeen[max(0, len(d.FeedbackSeen)-MaxFeedbackSeen):]
	d.History = append(slices.Clone(d.History), Entry{At: Format(now), Status: d.Status, Feedback: true, Note: text.Clip(note, 120)})
	for len(d.History) > limit || itemBytes(d) > FeedbackItemBytes {
		i := oldestDroppable(d.History)
		if i < 0 {
			break
		}
		d.History = slices.Delete(d.History, i, i+1)
	}
	return d, stands, nil
}

// oldestDroppable returns the oldest entry of h that is not one of its
// last two transitions (what LapsedLeaseTaken and EndedUnended read) nor
// its last entry (the one this write records, which the outcome event of
// the report is made from), or -1 if there is none.
func oldestDroppable(h []Entry) int {
	keep, transitions := map[int]bool{len(h) - 1: true}, 0
	for i := len(h) - 1; i >= 0 && transitions < 2; i-- {
		if h[i].Transition() {
			keep[i] = true
			transitions++
		}
	}
	for i := range h {
		if !keep[i] {
			return i
		}
	}
	return -1
}

// itemBytes is the size of d's item as DynamoDB counts it: each attribute's
// name and value; a number as its digits; a list or map 3 bytes and 1 per
// element, plus its elements (and their names).
func itemBytes(d Delivery) int {
	shard, sort := "", ""
	if d.Index != nil {
		shard, sort = ShardKey(d.Index.Shard), d.Index.Sort
	}
	it, err := toItem(d, shard, sort)
	if err != nil {
		return 0
	}
	n := 0
	for k, v := range it {
		n += len(k) + valueBytes(v)
	}
	return n
}

func valueBytes(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return min(21, len(v.Value))
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueBytes(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueBytes(e)
		}
		return n
	}
	return 0
}

// RecordFeedback records what the provider said of the message of the
// delivery key names: see withFeedback for what changes. The provider's
// report that it took a message the ledger already records sent with that
// message id adds nothing, and is refused with ErrFeedbackRedundant
// without a write (most of SES's Send events). Nothing else
// does: not the status, updatedAt (the last transition's time), the TTL or
// the due index. A delivery in any status takes it: one still being sent,
// retried, or dead as ambiguous keeps its status (the feedback tells what
// the provider did with an attempt whose end the ledger may not know).
//
// It reads the delivery (strongly consistent), decides in Go, and writes
// with one conditional UpdateItem that holds only if the history is as
// read and the feedback's digest not yet there: so the history and the
// remembered digests stay bounded, and of two events at once each is
// recorded and the standing one is the one that outranks, whatever the
// order. A write refused because the delivery changed meanwhile is decided
// again from the item the refusal returns (ALL_OLD), up to four times
// (then ErrChanged). It refuses an unknown delivery (purged, expired by its
// TTL, never ours) with ErrNotFound, and a repeat with ErrFeedbackSeen,
// each in a *RefusedError carrying the delivery as it is.
func (l *Ledger) RecordFeedback(ctx context.Context, key message.DeliveryKey, f Feedback) (Delivery, error) {
	if err := f.Validate(); err != nil {
		return Delivery{}, fmt.Errorf("ledger: feedback for %s: %w", key, err)
	}
	d, err := l.Get(ctx, key)
	if err != nil {
		var re *RefusedError
		if errors.As(err, &re) {
			re.Op = "feedback"
		}
		return Delivery{}, err
	}
	for range 4 {
		if f.redundant(d) {
			return Delivery{}, &RefusedError{Op: "feedback", Key: key, Reason: ErrFeedbackRedundant, Current: d}
		}
		next, stands, err := d.withFeedback(f, l.cfg.Clock.Now(), l.cfg.HistoryLimit)
		if err != nil {
			return Delivery{}, &RefusedError{Op: "feedback", Key: key, Reason: err, Current: d}
		}
		out, err := l.writeFeedback(ctx, d, next, stands, FeedbackDigest(f.ID))
		var re *RefusedError
		if !errors.As(err, &re) || !errors.Is(re.Reason, ErrChanged) {
			return out, err
		}
		d = re.Current
	}
	return Delivery{}, &RefusedError{Op: "feedback", Key: key, Reason: ErrChanged, Current: d}
}

// writeFeedback writes next's history and remembered digests over read,
// and its standing feedback if it stands, if the item's history is still
// read's and digest is not yet recorded. A refusal says ErrNotFound,
// ErrFeedbackSeen or ErrChanged.
func (l *Ledger) writeFeedback(ctx context.Context, read, next Delivery, stands bool, digest string) (Delivery, error) {
	u := &update{op: "feedback", key: read.Key(), values: map[string]types.AttributeValue{}}
	u.set("history", ":history", next.History)
	u.set("feedbackIds", ":ids", next.FeedbackSeen)
	if stands {
		fb := next.Feedback
		u.set("feedback", ":feedback", string(fb.Kind))
		u.set("feedbackAt", ":feedbackAt", Format(fb.At))
		if fb.Detail != "" {
			u.set("feedbackDetail", ":feedbackDetail", fb.Detail)
		} else {
			u.remove("feedbackDetail")
		}
		if fb.Permanent {
			u.set("feedbackPermanent", ":permanent", true)
		} else {
			u.remove("feedbackPermanent")
		}
		if fb.MessageID != "" && fb.MessageID != read.Receipt {
			u.set("providerMessageId", ":messageId", fb.MessageID)
		} else {
			u.remove("providerMessageId")
		}
	}
	u.values[":digest"] = sv(digest)
	u.cond = "attribute_exists(PK) AND history = :was AND NOT contains(feedbackIds, :digest)"
	if len(read.History) == 0 {
		u.values[":zero"] = av(0)
		u.cond = "attribute_exists(PK) AND (attribute_not_exists(history) OR size(history) = :zero) AND NOT contains(feedbackIds, :digest)"
	} else {
		u.values[":was"] = av(read.History)
	}
	return l.write(ctx, u, func(old Delivery) error {
		if slices.Contains(old.FeedbackSeen, digest) {
			return ErrFeedbackSeen
		}
		return ErrChanged
	})
}

// RecordFeedback is Ledger.RecordFeedback.
func (m *Memory) RecordFeedback(_ context.Context, key message.DeliveryKey, f Feedback) (Delivery, error) {
	if err := f.Validate(); err != nil {
		return Delivery{}, fmt.Errorf("ledger: feedback for %s: %w", key, err)
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	d, ok := m.t.items[key]
	if !ok {
		return Delivery{}, &RefusedError{Op: "feedback", Key: key, Reason: ErrNotFound}
	}
	if f.redundant(d) {
		return Delivery{}, &RefusedError{Op: "feedback", Key: key, Reason: ErrFeedbackRedundant, Current: copyOf(d)}
	}
	next, _, err := d.withFeedback(f, m.now(), m.cfg.HistoryLimit)
	if err != nil {
		return Delivery{}, &RefusedError{Op: "feedback", Key: key, Reason: err, Current: copyOf(d)}
	}
	m.t.items[key] = copyOf(next)
	return copyOf(next), nil
}

// Transitions returns d's history without its feedback and reveal
// entries: the changes of its status alone.
func (d Delivery) Transitions() []Entry {
	return slices.DeleteFunc(slices.Clone(d.History), func(e Entry) bool { return !e.Transition() })
}
