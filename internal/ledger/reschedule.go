package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/localtime"
)

// Move is where a reschedule moves a reminder: its new due and expiry
// times.
type Move struct {
	DueAt, ExpiresAt time.Time
	// Local is the reminder's zone and local times after the move (the
	// reminder item's Local, replaced whole).
	Local Local
	// Note is kept in each moved delivery's history.
	Note string
	// HandOff says that the caller hands each moved delivery to the queue
	// itself after the move (Delivery.HandOff): their entries are marked.
	HandOff bool
}

// MovePlan is a reschedule of one reminder, from the items as its caller
// read them (ReadReminder).
type MovePlan struct {
	ID string
	// Reminder is the reminder item as read; nil if there is none.
	Reminder *ReminderItem
	// Live are the deliveries to move, as read: each pending, queued or
	// retrying (it becomes pending at the new times), or held (a fallback
	// not taken: it stays held, at the new times).
	Live []Delivery
	// Kept are the other deliveries, as read (sending, or ended: sent,
	// dead, expired, cancelled): they stay as they are, but the move is
	// conditioned on them too, and their TTL is raised to the reminder
	// item's where it is earlier, so that no delivery item is ever deleted
	// while its reminder item lives (a create of the reminder would then
	// write it, and send it, again).
	Kept []Delivery
	To   Move
}

// MaxMoveItems is the most items one MoveReminder writes: DynamoDB's limit
// per transaction (a reminder has its item and at most eight deliveries).
const MaxMoveItems = 100

// moveTTL is the TTL of every item of a reminder moved to expire at
// expiresAt: retention after it, and never earlier than the reminder
// item's as read (a TTL is never lowered: a delivery ended long after the
// new expiry keeps its records, and no delivery item goes before its
// reminder item). Zero: the reminder item is kept for ever.
func moveTTL(read *ReminderItem, expiry time.Time) time.Time {
	if read != nil && read.TTL.IsZero() {
		return time.Time{}
	}
	if read != nil {
		return later(expiry, read.TTL)
	}
	return expiry
}

// MoveReminder reschedules a reminder in one transaction, as its caller
// read it: each live delivery becomes pending at the new dueAt and
// expiresAt, its due index entry moves to the new publish time,
// max(dueAt − Lookahead, now), ahead of every enqueue cursor, and its
// history keeps its last entries; the reminder item records the new times;
// every item's TTL becomes the new expiry's (retention after it), or stays
// where it was if that is later, so that no TTL is lowered and no delivery
// item goes before its reminder item. Every item is conditioned on being
// as read (updatedAt and status, or the reminder's times), the kept ones
// too: if anything changed meanwhile — a claim, a cancel, a redrive,
// another reschedule — nothing is written and it returns ErrChanged, for
// the caller to read again. A delivery is moved
// only from pending, queued or retrying, so once MoveReminder has
// returned, no claim takes a moved delivery before its new dueAt (a claim
// needs dueAt ≤ its due-by time); a message already on the queue for the
// old time is refused by its claim (ErrNotDue) and deferred. The attempt
// budget and an earlier attempt's unended mark (UnendedAttempt) are kept.
func (l *Ledger) MoveReminder(ctx context.Context, p MovePlan) error {
	if err := p.check(); err != nil {
		return err
	}
	shards, err := l.shardCount(ctx)
	if err != nil {
		return err
	}
	now := l.cfg.Clock.Now()
	ttl := moveTTL(p.Reminder, l.Expiry(p.To.ExpiresAt))
	if p.nothingToWrite(ttl) {
		return nil
	}
	var items []types.TransactWriteItem
	if r := p.Reminder; r != nil {
		set, values := "SET dueAt = :dueAt, expiresAt = :expiresAt", map[string]types.AttributeValue{
			":dueAt": sv(Format(p.To.DueAt)), ":expiresAt": sv(Format(p.To.ExpiresAt)),
			":wasDueAt": sv(Format(r.DueAt)), ":wasExpiresAt": sv(Format(r.ExpiresAt)),
		}
		names := map[string]string(nil)
		if !ttl.IsZero() {
			set += ", #ttl = :ttl"
			values[":ttl"], names = av(ttl.Unix()), map[string]string{"#ttl": attrTTL}
		}
		// The local times, set or removed; by placeholder, since timeZone
		// is one of DynamoDB's reserved words.
		var remove []string
		for _, f := range []struct{ attr, value string }{
			{"timeZone", p.To.Local.TimeZone}, {"dueLocal", p.To.Local.DueLocal}, {"expiresLocal", p.To.Local.ExpiresLocal},
		} {
			if names == nil {
				names = map[string]string{}
			}
			names["#"+f.attr] = f.attr
			if f.value == "" {
				remove = append(remove, "#"+f.attr)
				continue
			}
			set += ", #" + f.attr + " = :" + f.attr
			values[":"+f.attr] = sv(f.value)
		}
		if len(remove) > 0 {
			set += " REMOVE " + strings.Join(remove, ", ")
		}
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String(l.cfg.Table),
			Key:                       map[string]types.AttributeValue{attrPK: sv(PartitionKey(p.ID)), attrSK: sv(reminderSK)},
			UpdateExpression:          aws.String(set),
			ConditionExpression:       aws.String("dueAt = :wasDueAt AND expiresAt = :wasExpiresAt"),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
		}})
	}
	for _, d := range p.Live {
		exp, onTime := p.DeliveryTimes(d)
		dttl := moveTTL(p.Reminder, l.Expiry(p.keptUntil(d)))
		u := l.newUpdate("reschedule", d.Key(), now)
		to := StatusPending
		if d.Status == StatusHeld {
			to = StatusHeld // a fallback stays held, in no index, at the reminder's times
		}
		u.set("#status", ":to", to)
		due := p.DeliveryDue(d)
		u.set("dueAt", ":newDueAt", Format(due))
		u.set("expiresAt", ":newExpiresAt", Format(exp))
		if onTime.IsZero() {
			u.remove(attrOnTime)
		} else {
			u.set(attrOnTime, ":onTime", Format(onTime))
		}
		if dt := later(dttl, d.TTL); !dttl.IsZero() && !d.TTL.IsZero() {
			u.names["#ttl"] = attrTTL // a reserved word
			u.set("#ttl", ":ttl", dt.Unix())
		}
		if to == StatusPending {
			u.set(attrDueSort, ":sort", indexSort(l.publishAt(due, now), d.Key(), p.To.HandOff))
			u.sets = append(u.sets, attrDueShard+" = if_not_exists("+attrDueShard+", :shard)")
			u.values[":shard"] = sv(ShardKey(ShardOf(d.ReminderID, shards)))
		}
		if p.Reminder != nil { // the recipient's zone, as the reminder now has it
			if tz := p.To.Local.TimeZone; tz != "" {
				u.set(attrTimeZone, ":tz", tz)
			} else {
				u.remove(attrTimeZone)
			}
		}
		u.remove("nextAttemptAt", "claimToken", "leaseUntil", "repairs")
		// The history as read, with the new entry, bounded: the condition
		// below guarantees nobody changed it meanwhile.
		u.set("history", ":history", boundHistory(d.History, Entry{At: Format(now), Status: to, Note: text.Clip(p.To.Note, 120)}, l.cfg.HistoryLimit))
		u.values[":was"], u.values[":wasStatus"] = sv(formatOpt(d.UpdatedAt)), sv(d.Status)
		u.cond = "updatedAt = :was AND #status = :wasStatus"
		items = append(items, u.transact(l.cfg.Table))
	}
	for _, d := range p.Kept {
		asRead := map[string]types.AttributeValue{":was": sv(formatOpt(d.UpdatedAt)), ":wasStatus": sv(d.Status)}
		cond := aws.String("updatedAt = :was AND #status = :wasStatus")
		if !ttl.IsZero() && !d.TTL.IsZero() && d.TTL.Before(ttl) {
			asRead[":ttl"] = av(ttl.Unix())
			items = append(items, types.TransactWriteItem{Update: &types.Update{
				TableName: aws.String(l.cfg.Table), Key: keyAttrs(d.Key()),
				UpdateExpression: aws.String("SET #ttl = :ttl"), ConditionExpression: cond,
				ExpressionAttributeNames: map[string]string{"#ttl": attrTTL, "#status": "status"}, ExpressionAttributeValues: asRead,
			}})
			continue
		}
		// Unchanged, but the move holds only if it is as read (a redrive
		// of a dead one would put it back at its old time).
		items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(l.cfg.Table), Key: keyAttrs(d.Key()), ConditionExpression: cond,
			ExpressionAttributeNames: map[string]string{"#status": "status"}, ExpressionAttributeValues: asRead,
		}})
	}
	if len(items) == 0 {
		return nil
	}
	out, err := l.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	var cancelled *types.TransactionCanceledException
	if errors.As(err, &cancelled) {
		for _, r := range cancelled.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed", "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded":
				// Changed, being changed, or busy: the caller reads again.
				return fmt.Errorf("ledger: reschedule %q: %w (%s)", p.ID, ErrChanged, aws.ToString(r.Code))
			}
		}
	}
	if err != nil {
		return fmt.Errorf("ledger: reschedule %q: %w", p.ID, err)
	}
	for _, cc := range out.ConsumedCapacity {
		l.count(&cc)
	}
	return nil
}

func (p MovePlan) check() error {
	if p.To.DueAt.IsZero() || !p.To.ExpiresAt.After(p.To.DueAt) {
		return fmt.Errorf("ledger: reschedule %q: dueAt and expiresAt must be set and expiresAt after dueAt", p.ID)
	}
	if 1+len(p.Live)+len(p.Kept) > MaxMoveItems {
		return fmt.Errorf("ledger: reschedule %q: %d items; a transaction takes %d", p.ID, 1+len(p.Live)+len(p.Kept), MaxMoveItems)
	}
	for _, d := range append(append([]Delivery{}, p.Live...), p.Kept...) {
		if d.ReminderID != p.ID {
			return fmt.Errorf("ledger: reschedule %q: delivery %s is another reminder's", p.ID, d.Key())
		}
	}
	for _, d := range p.Live {
		if d.Status != StatusPending && d.Status != StatusQueued && d.Status != StatusRetrying && d.Status != StatusHeld {
			return fmt.Errorf("ledger: reschedule %q: delivery %s is %s; only pending, queued, retrying and held ones move", p.ID, d.Key(), d.Status)
		}
	}
	return nil
}

// DeliveryDue is where the move puts d's dueAt: the new dueAt, or for a
// delivery with a send window (Window), the window's first opening at or
// after it. A held fallback keeps the reminder's: it is due only once
// taken.
func (p MovePlan) DeliveryDue(d Delivery) time.Time {
	if d.Window == "" || d.Status == StatusHeld {
		return p.To.DueAt
	}
	w, err := localtime.ParseWindowSpec(d.Window)
	if err != nil {
		return p.To.DueAt // written by the intake, which checked it: a newer form the claim's check reads
	}
	if next := w.Next(p.To.DueAt); !next.IsZero() {
		return next
	}
	return p.To.DueAt
}

// DeliveryTimes is where the move puts d's expiry: the new expiresAt under
// the reminder's late rule (LateRule.DeliveryTimes; the rule d carries if
// the plan has no reminder item), and for a fallback (FallbackOf set),
// which has no late rule of its own, the reminder's new expiresAt while it
// is held. A taken fallback (no longer held) keeps its own expiry, its
// take's time plus its FallbackWithin; only a move to a dueAt at or past
// it restarts that bound from the new dueAt, so that the move does not
// expire it at once.
func (p MovePlan) DeliveryTimes(d Delivery) (expiresAt, onTimeUntil time.Time) {
	switch {
	case !d.FallbackOf.IsZero() && d.Status != StatusHeld && d.ExpiresAt.After(p.To.DueAt):
		return d.ExpiresAt, time.Time{}
	case !d.FallbackOf.IsZero() && d.Status != StatusHeld:
		return p.To.DueAt.Add(fallbackWithin(d.FallbackWithin)), time.Time{}
	case !d.FallbackOf.IsZero():
		return p.To.ExpiresAt, time.Time{}
	}
	rule := d.LateRule()
	if p.Reminder != nil {
		rule = p.Reminder.Late
	}
	return rule.DeliveryTimes(p.To.ExpiresAt)
}

// keptUntil is the expiry d's TTL follows after the move: its own, and for
// a fallback the later of its own and its primaries' (held, it is kept as
// long as its siblings).
func (p MovePlan) keptUntil(d Delivery) time.Time {
	exp, _ := p.DeliveryTimes(d)
	if !d.FallbackOf.IsZero() && p.Reminder != nil {
		siblings, _ := p.Reminder.Late.DeliveryTimes(p.To.ExpiresAt)
		exp = later(exp, siblings)
	}
	return exp
}

// nothingToWrite reports whether the plan would change nothing: no
// delivery to move, the reminder item at the new times with its TTL, and
// no kept delivery's TTL to raise (a reschedule sent again).
func (p MovePlan) nothingToWrite(ttl time.Time) bool {
	if len(p.Live) > 0 {
		return false
	}
	if r := p.Reminder; r != nil && (!r.DueAt.Equal(p.To.DueAt) || !r.ExpiresAt.Equal(p.To.ExpiresAt) || r.Local != p.To.Local ||
		!ttl.IsZero() && r.TTL.Before(ttl)) {
		return false
	}
	for _, d := range p.Kept {
		if !ttl.IsZero() && !d.TTL.IsZero() && d.TTL.Before(ttl) {
			return false
		}
	}
	return true
}

// boundHistory is history with e appended, its last limit entries.
func boundHistory(history []Entry, e Entry, limit int) []Entry {
	out := append(append([]Entry{}, history...), e)
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// transact is u as one item of a transaction.
func (u *update) transact(table string) types.TransactWriteItem {
	expr := "SET " + strings.Join(u.sets, ", ")
	if len(u.adds) > 0 {
		expr += " ADD " + strings.Join(u.adds, ", ")
	}
	if len(u.removes) > 0 {
		expr += " REMOVE " + strings.Join(u.removes, ", ")
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(table), Key: keyAttrs(u.key),
		UpdateExpression: aws.String(expr), ConditionExpression: aws.String(u.cond),
		ExpressionAttributeNames: maps.Clone(u.names), ExpressionAttributeValues: u.values,
	}}
}
