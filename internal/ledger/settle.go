package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/failure"
)

// A send that may have gone out (no answer after the request was written,
// a 5xx, a lapsed lease) is settled by the provider's own record of what it
// accepted (SES's Send event, recorded by RecordFeedback), where the
// provider keeps one: the consumer waits for it (AwaitRecord), and the
// delivery is recorded sent when it comes (SettleSent), by the consumer
// holding the delivery or by the feedback function on a delivery already
// ended as ambiguous. The feedback function also keeps a mark of the latest
// message the provider reported (RecordFeedbackMark), by which the
// consumer knows that the report path works.

// Await is a wait for the provider's record of an ambiguous attempt.
type Await struct {
	// Note says what is awaited and until when; it is the history entry's
	// note and lastError. At most 120 bytes are kept in the history.
	Note string
	// Next is when the consumer looks again (nextAttemptAt).
	Next time.Time
	// Looked is set when the claim that holds the delivery only looked for
	// the record and sent nothing: the claim is taken back (attempts as
	// before it, its sending entry dropped) and an earlier wait's entry is
	// replaced, so the history keeps the ambiguous attempt's start.
	Looked bool
}

// AwaitRecord records that the claimed delivery d waits for the provider's
// record of an ambiguous attempt: it moves to retrying, class ambiguous,
// releasing the lease, as Retry does. It refuses with ErrAlreadySent or
// ErrLeaseLost as Retry does.
func (l *Ledger) AwaitRecord(ctx context.Context, d Delivery, w Await) (Delivery, error) {
	return l.rewriteHistory(ctx, d, func(d Delivery) *update {
		now := l.cfg.Clock.Now()
		h, attempts := awaitHistory(d, w, Format(now), l.cfg.HistoryLimit)
		u := l.newUpdate("await", d.Key(), now)
		u.set("#status", ":retrying", StatusRetrying)
		u.set("lastErrorClass", ":class", failure.ClassAmbiguous)
		u.set("lastError", ":error", text.Clip(w.Note, 500))
		u.set("nextAttemptAt", ":next", Format(w.Next))
		u.set("attempts", ":attempts", attempts)
		u.set("history", ":history", h)
		u.remove("claimToken", "leaseUntil")
		return u
	})
}

// rewriteHistory writes the update build makes from the claimed d, which
// rewrites d's history, under d's lease and only while the history is as
// d holds it: the feedback function appends its entries without a lease
// (RecordFeedback), and a write from an older history would drop them. A
// write refused for a changed history is made again from the history the
// refusal returns (ALL_OLD), up to four times (then ErrChanged); one
// refused for the lease says ErrAlreadySent or ErrLeaseLost.
func (l *Ledger) rewriteHistory(ctx context.Context, d Delivery, build func(d Delivery) *update) (Delivery, error) {
	for range 4 {
		u := build(d)
		u.holdsLease(d)
		u.cond += " AND " + u.historyIs(d.History)
		out, err := l.write(ctx, u, func(old Delivery) error {
			if old.Status == StatusSending && old.ClaimToken == d.ClaimToken {
				return ErrChanged
			}
			return leaseRefusal(old)
		})
		var re *RefusedError
		if !errors.As(err, &re) || !errors.Is(re.Reason, ErrChanged) {
			return out, err
		}
		d.History = re.Current.History
	}
	return Delivery{}, &RefusedError{Op: "history", Key: d.Key(), Reason: ErrChanged, Current: d}
}

// historyIs returns the condition that the item's history is h, with its
// values.
func (u *update) historyIs(h []Entry) string {
	if len(h) == 0 {
		u.values[":zero"] = av(0)
		return "(attribute_not_exists(history) OR size(history) = :zero)"
	}
	u.values[":was"] = av(h)
	return "history = :was"
}

// awaitHistory is d's history after an AwaitRecord at now (Format'ed), and
// its attempts. Shared by the DynamoDB ledger and Memory.
func awaitHistory(d Delivery, w Await, now string, limit int) ([]Entry, int) {
	h, attempts := slices.Clone(d.History), d.Attempts
	if w.Looked {
		h, attempts = dropLastTransition(h, StatusSending), d.Attempts-1
		h = dropLastTransition(h, StatusRetrying)
	}
	h = append(h, Entry{At: now, Status: StatusRetrying, Attempt: attempts, Class: failure.ClassAmbiguous, Note: text.Clip(w.Note, 120)})
	return bounded(h, limit), attempts
}

// dropLastTransition removes h's last transition (not a feedback or reveal entry) if
// it entered status s (and, for retrying, was an ambiguous attempt's wait).
func dropLastTransition(h []Entry, s Status) []Entry {
	for i := len(h) - 1; i >= 0; i-- {
		if !h[i].Transition() {
			continue
		}
		if h[i].Status == s && (s != StatusRetrying || h[i].Class == failure.ClassAmbiguous) {
			return slices.Delete(h, i, i+1)
		}
		return h
	}
	return h
}

// bounded drops h's oldest entries, but never its last two transitions nor
// its last entry, until it has at most limit.
func bounded(h []Entry, limit int) []Entry {
	for len(h) > limit {
		i := oldestDroppable(h)
		if i < 0 {
			break
		}
		h = slices.Delete(h, i, i+1)
	}
	return h
}

// ErrNotAmbiguous is the reason SettleSent refuses a delivery it may not
// settle: not held by the caller's claim, nor ended as ambiguous.
var ErrNotAmbiguous = errors.New("delivery is not ended as ambiguous (dead, expired or cancelled with lastErrorClass ambiguous)")

// SettleSent records that the provider's own record shows d's message
// accepted: d becomes sent, without a send, with receipt (the provider's
// message id; "" keeps none) and a history entry noting it. d is either the
// delivery as the caller's claim holds it (the claim only looked: it is
// taken back, attempts as before it, its sending entry dropped; written
// as rewriteHistory does, keeping feedback entries recorded since the
// claim), or one ended as ambiguous (read by the caller; no lease):
// dead-lettered as ambiguous, or expired or cancelled with an attempt that
// may have been sent (endUnsent's class ambiguous), settled with one
// conditional write (status dead, expired or cancelled and lastErrorClass
// ambiguous). It refuses with ErrAlreadySent, ErrLeaseLost (a claim no
// longer held) or ErrNotAmbiguous (a delivery not ended as ambiguous).
func (l *Ledger) SettleSent(ctx context.Context, d Delivery, receipt, note string) (Delivery, error) {
	settle := func() *update {
		now := l.cfg.Clock.Now()
		u := l.newUpdate("settle", d.Key(), now)
		u.set("#status", ":sent", StatusSent)
		u.set("sentAt", ":now", nil)
		if receipt != "" {
			u.set("receipt", ":receipt", text.Clip(receipt, MaxReceipt))
		}
		u.terminal(Expiry(now, d.ExpiresAt, l.cfg.Retention))
		u.remove("claimToken", "leaseUntil", "nextAttemptAt")
		return u
	}
	if d.ClaimToken != "" {
		return l.rewriteHistory(ctx, d, func(d Delivery) *update {
			u := settle()
			h, attempts := settledHistory(d, note, Format(u.now), l.cfg.HistoryLimit)
			u.set("attempts", ":attempts", attempts)
			u.set("history", ":history", h)
			return u
		})
	}
	u := settle()
	u.history(Delivery{}, Entry{Status: StatusSent, Attempt: d.Attempts, Note: text.Clip(note, 120)})
	u.values[":dead"], u.values[":expired"], u.values[":cancelled"] = sv(StatusDead), sv(StatusExpired), sv(StatusCancelled)
	u.values[":ambiguous"] = sv(failure.ClassAmbiguous)
	u.cond = "attribute_exists(PK) AND #status IN (:dead, :expired, :cancelled) AND lastErrorClass = :ambiguous"
	return l.write(ctx, u, settleRefusal)
}

// EndedAmbiguous reports whether d ended unsent with an attempt that may
// have been sent: dead-lettered as ambiguous, or expired or cancelled after
// such an attempt. SettleSent settles it without a lease.
func (d Delivery) EndedAmbiguous() bool {
	switch d.Status {
	case StatusDead, StatusExpired, StatusCancelled:
		return d.LastErrorClass == failure.ClassAmbiguous
	}
	return false
}

// settledHistory is the history of a claimed d settled sent at now, and
// its attempts: the claim's sending entry replaced by the sent one.
func settledHistory(d Delivery, note, now string, limit int) ([]Entry, int) {
	h := dropLastTransition(slices.Clone(d.History), StatusSending)
	h = append(h, Entry{At: now, Status: StatusSent, Attempt: d.Attempts - 1, Note: text.Clip(note, 120)})
	return bounded(h, limit), d.Attempts - 1
}

// settleRefusal says why a SettleSent of a dead delivery was refused.
func settleRefusal(old Delivery) error {
	if old.Status == StatusSent {
		return ErrAlreadySent
	}
	return ErrNotAmbiguous
}

// ErrFeedbackRedundant is the reason RecordFeedback refuses, without a
// write, the provider's report that it took a message (sent-by-provider)
// of a delivery recorded sent with that message id as its receipt: it
// adds nothing. The caller treats it as done.
var ErrFeedbackRedundant = errors.New("feedback adds nothing to a delivery recorded sent with that message")

// redundant reports whether f adds nothing to d: ErrFeedbackRedundant.
func (f Feedback) redundant(d Delivery) bool {
	return f.Kind == FeedbackSentByProvider && d.Status == StatusSent && f.MessageID != "" && d.Receipt == f.MessageID
}

// feedbackMarkSK is the registry item of a provider's feedback mark.
func feedbackMarkSK(provider string) string { return "FEEDBACK#" + provider }

// RecordFeedbackMark records that the provider reported a message it
// accepted at at (SES's mail.timestamp): the mark moves forward only, with
// one conditional UpdateItem; an older at than the mark's changes nothing.
func (l *Ledger) RecordFeedbackMark(ctx context.Context, provider string, at time.Time) error {
	if provider == "" || at.IsZero() {
		return fmt.Errorf("ledger: feedback mark %q at %v: give the provider's name and the time it accepted the message", provider, at)
	}
	_, err := l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.cfg.Table),
		Key:                       markKey(provider),
		UpdateExpression:          aws.String("SET #at = :t"),
		ConditionExpression:       aws.String("attribute_not_exists(#at) OR #at < :t"),
		ExpressionAttributeNames:  map[string]string{"#at": "at"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": sv(Format(at))},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // a later mark stands
	}
	if err != nil {
		return fmt.Errorf("ledger: record %s's feedback mark in %q: %w", provider, l.cfg.Table, err)
	}
	return nil
}

// FeedbackMark returns the latest time at which the provider accepted a
// message it has reported (RecordFeedbackMark), with a strongly consistent
// read; zero if none is recorded.
func (l *Ledger) FeedbackMark(ctx context.Context, provider string) (time.Time, error) {
	out, err := l.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.cfg.Table), Key: markKey(provider), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return time.Time{}, fmt.Errorf("ledger: read %s's feedback mark from %q: %w", provider, l.cfg.Table, err)
	}
	s, _ := out.Item["at"].(*types.AttributeValueMemberS)
	if s == nil {
		return time.Time{}, nil
	}
	return parseOpt("at", s.Value)
}

// ProbePrefix begins the reminder id of a probe's key (ProbeKey): an id
// the ledger holds no delivery of.
const ProbePrefix = "nudge-probe-"

// ProbeKey is the key of a probe (provider.Prober) sent at at on the
// provider's channel: "nudge-probe-<unix ms>:<channel>:<provider>".
func ProbeKey(provider, channel string, at time.Time) message.DeliveryKey {
	return message.DeliveryKey{ReminderID: ProbePrefix + strconv.FormatInt(at.UnixMilli(), 10), Channel: channel, Provider: provider}
}

// IsProbe reports whether k has a probe's key's form (ProbeKey). A caller
// may choose such a reminder id too: the feedback function tells a probe
// by the tag only a probe carries, never by this.
func IsProbe(k message.DeliveryKey) bool { return strings.HasPrefix(k.ReminderID, ProbePrefix) }

// ClaimProbe claims the sending of the provider's next probe at now, for
// an ambiguous attempt that started at since: granted unless a probe was
// claimed after since and less than every (the record window) before now,
// one conditional UpdateItem of the feedback mark's item (probeAt), so
// that the consumers of a stage send one probe per window at most, and
// another only when the last one's report did not come within a window.
func (l *Ledger) ClaimProbe(ctx context.Context, provider string, since, now time.Time, every time.Duration) (bool, error) {
	_, err := l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.cfg.Table),
		Key:                       markKey(provider),
		UpdateExpression:          aws.String("SET #p = :now"),
		ConditionExpression:       aws.String("attribute_not_exists(#p) OR #p <= :limit"),
		ExpressionAttributeNames:  map[string]string{"#p": "probeAt"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": sv(Format(now)), ":limit": sv(Format(probeLimit(since, now, every)))},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledger: claim %s's probe in %q: %w", provider, l.cfg.Table, err)
	}
	return true, nil
}

// probeLimit is the latest time of a probe that does not stop another: the
// later of since and every before now.
func probeLimit(since, now time.Time, every time.Duration) time.Time {
	return ms(maxTime(since, now.Add(-every)))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func markKey(provider string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: sv(registryPK), attrSK: sv(feedbackMarkSK(provider))}
}

// AwaitRecord is Ledger.AwaitRecord.
func (m *Memory) AwaitRecord(_ context.Context, held Delivery, w Await) (Delivery, error) {
	return m.transition("await", held.Key(), holdsLease(held.ClaimToken), byOld(leaseRefusal), func(d *Delivery, now time.Time) {
		d.Status, d.LastErrorClass, d.LastError = StatusRetrying, failure.ClassAmbiguous, text.Clip(w.Note, 500)
		d.ClaimToken, d.LeaseUntil, d.NextAttemptAt = "", time.Time{}, ms(w.Next)
		d.History, d.Attempts = awaitHistory(*d, w, Format(now), m.cfg.HistoryLimit)
	})
}

// SettleSent is Ledger.SettleSent.
func (m *Memory) SettleSent(_ context.Context, held Delivery, receipt, note string) (Delivery, error) {
	guard, refusal := holdsLease(held.ClaimToken), byOld(leaseRefusal)
	if held.ClaimToken == "" {
		guard = func(d Delivery, _ time.Time) bool { return d.EndedAmbiguous() }
		refusal = byOld(settleRefusal)
	}
	return m.transition("settle", held.Key(), guard, refusal, func(d *Delivery, now time.Time) {
		d.Status, d.SentAt = StatusSent, now
		if receipt != "" {
			d.Receipt = text.Clip(receipt, MaxReceipt)
		}
		endLease(d)
		if held.ClaimToken != "" {
			// From the history as it stands: feedback entries recorded
			// since the claim are kept (the lease fixes the rest).
			d.History, d.Attempts = settledHistory(*d, note, Format(now), m.cfg.HistoryLimit)
			return
		}
		m.history(d, Delivery{}, Entry{Status: StatusSent, Attempt: d.Attempts, Note: text.Clip(note, 120)}, now)
	})
}

// RecordFeedbackMark is Ledger.RecordFeedbackMark.
func (m *Memory) RecordFeedbackMark(_ context.Context, provider string, at time.Time) error {
	if provider == "" || at.IsZero() {
		return fmt.Errorf("ledger: feedback mark %q at %v: give the provider's name and the time it accepted the message", provider, at)
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	if m.t.marks == nil {
		m.t.marks = map[string]time.Time{}
	}
	if at = ms(at); at.After(m.t.marks[provider]) {
		m.t.marks[provider] = at
	}
	return nil
}

// ClaimProbe is Ledger.ClaimProbe.
func (m *Memory) ClaimProbe(_ context.Context, provider string, since, now time.Time, every time.Duration) (bool, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	if m.t.probes == nil {
		m.t.probes = map[string]time.Time{}
	}
	if last, ok := m.t.probes[provider]; ok && last.After(probeLimit(since, now, every)) {
		return false, nil
	}
	m.t.probes[provider] = ms(now)
	return true, nil
}

// FeedbackMark is Ledger.FeedbackMark.
func (m *Memory) FeedbackMark(_ context.Context, provider string) (time.Time, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	return m.t.marks[provider], nil
}
