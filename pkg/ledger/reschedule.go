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

	"github.com/nudgehq/nudge/pkg/text"
)

// Move is where a reschedule moves a reminder: its new due and expiry
// times.
type Move struct {
	DueAt, ExpiresAt time.Time
	// Note is kept in each moved delivery's history.
	Note string
}

// MovePlan is a reschedule of one reminder, from the items as its caller
// read them (ReadReminder).
type MovePlan struct {
	ID string
	// Reminder is the reminder item as read; nil if there is none.
	Reminder *Reminder
	// Live are the deliveries to move, as read: each pending, queued or
	// retrying.
	Live []Delivery
	// Ended are the deliveries that ended (sent, dead, expired, cancelled),
	// as read: they stay, and are kept at least as long as the moved ones
	// (their TTL is raised to the new expiry's), so that the reminder is
	// never created, and sent, again while its item lives.
	Ended []Delivery
	To    Move
}

// MaxMoveItems is the most items one MoveReminder writes: the reminder
// item and eight deliveries, inside DynamoDB's 100 per transaction.
const MaxMoveItems = 100

// MoveReminder reschedules a reminder in one transaction, as its caller
// read it: each live delivery becomes pending at the new dueAt and
// expiresAt (and the TTL they give), its due index entry moves to the new
// publish time, max(dueAt − Lookahead, now), ahead of every enqueue
// cursor, and its history keeps its last entries; the ended deliveries'
// TTL is raised to the new expiry's where it was earlier; the reminder item
// records the new times. Every write is conditional on the item being as
// read (updatedAt, or the reminder's times): if anything changed meanwhile
// — a claim, a cancel, another reschedule — nothing is written and it
// returns ErrChanged, for the caller to read again. A delivery is moved
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
	ttl := l.Expiry(p.To.ExpiresAt)
	var items []types.TransactWriteItem
	if r := p.Reminder; r != nil {
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName:                aws.String(l.cfg.Table),
			Key:                      map[string]types.AttributeValue{attrPK: sv(PartitionKey(p.ID)), attrSK: sv(reminderSK)},
			UpdateExpression:         aws.String("SET dueAt = :dueAt, expiresAt = :expiresAt, #ttl = :ttl"),
			ConditionExpression:      aws.String("dueAt = :wasDueAt AND expiresAt = :wasExpiresAt"),
			ExpressionAttributeNames: map[string]string{"#ttl": attrTTL},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":dueAt": sv(Format(p.To.DueAt)), ":expiresAt": sv(Format(p.To.ExpiresAt)), ":ttl": av(ttl.Unix()),
				":wasDueAt": sv(Format(r.DueAt)), ":wasExpiresAt": sv(Format(r.ExpiresAt)),
			},
		}})
	}
	for _, d := range p.Live {
		u := l.newUpdate("reschedule", d.Key(), now)
		u.set("#status", ":pending", StatusPending)
		u.set("dueAt", ":newDueAt", Format(p.To.DueAt))
		u.set("expiresAt", ":newExpiresAt", Format(p.To.ExpiresAt))
		u.names["#ttl"] = attrTTL // a reserved word
		u.set("#ttl", ":ttl", ttl.Unix())
		u.set(attrDueSort, ":sort", IndexSort(l.publishAt(p.To.DueAt, now), d.Key()))
		u.sets = append(u.sets, attrDueShard+" = if_not_exists("+attrDueShard+", :shard)")
		u.values[":shard"] = sv(ShardKey(ShardOf(d.ReminderID, shards)))
		u.remove("nextAttemptAt", "claimToken", "leaseUntil")
		// The history as read, with the new entry, bounded: the condition
		// below guarantees nobody changed it meanwhile.
		u.set("history", ":history", boundHistory(d.History, Entry{At: Format(now), Status: StatusPending, Note: text.Clip(p.To.Note, 120)}, l.cfg.HistoryLimit))
		u.values[":was"], u.values[":wasStatus"] = sv(formatOpt(d.UpdatedAt)), sv(d.Status)
		u.cond = "updatedAt = :was AND #status = :wasStatus"
		items = append(items, u.transact(l.cfg.Table))
	}
	for _, d := range p.Ended {
		if d.TTL.IsZero() || !d.TTL.Before(ttl) {
			continue // kept for ever (an item from before TTL), or long enough
		}
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(l.cfg.Table), Key: keyAttrs(d.Key()),
			UpdateExpression:          aws.String("SET #ttl = :ttl"),
			ConditionExpression:       aws.String("updatedAt = :was AND #status = :wasStatus"),
			ExpressionAttributeNames:  map[string]string{"#ttl": attrTTL, "#status": "status"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":ttl": av(ttl.Unix()), ":was": sv(formatOpt(d.UpdatedAt)), ":wasStatus": sv(d.Status)},
		}})
	}
	if len(items) == 0 {
		return nil
	}
	out, err := l.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	var cancelled *types.TransactionCanceledException
	if errors.As(err, &cancelled) {
		for _, r := range cancelled.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return fmt.Errorf("ledger: reschedule %q: %w", p.ID, ErrChanged)
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
	if 1+len(p.Live)+len(p.Ended) > MaxMoveItems {
		return fmt.Errorf("ledger: reschedule %q: %d items; a transaction takes %d", p.ID, 1+len(p.Live)+len(p.Ended), MaxMoveItems)
	}
	for _, d := range append(append([]Delivery{}, p.Live...), p.Ended...) {
		if d.ReminderID != p.ID {
			return fmt.Errorf("ledger: reschedule %q: delivery %s is another reminder's", p.ID, d.Key())
		}
	}
	for _, d := range p.Live {
		if d.Status != StatusPending && d.Status != StatusQueued && d.Status != StatusRetrying {
			return fmt.Errorf("ledger: reschedule %q: delivery %s is %s; only pending, queued and retrying ones move", p.ID, d.Key(), d.Status)
		}
	}
	return nil
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
