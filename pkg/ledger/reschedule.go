package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/pkg/message"
	"github.com/nudgehq/nudge/pkg/text"
)

// Move is where Reschedule moves a delivery: its new due and expiry times.
type Move struct {
	DueAt, ExpiresAt time.Time
	// Note is kept in the delivery's history.
	Note string
}

func (mv Move) check(key message.DeliveryKey) error {
	if mv.DueAt.IsZero() || !mv.ExpiresAt.After(mv.DueAt) {
		return fmt.Errorf("ledger: reschedule %s: dueAt and expiresAt must be set and expiresAt after dueAt", key)
	}
	return nil
}

// Reschedule moves a delivery that has not started sending to a new due
// time: it becomes pending with the new dueAt and expiresAt (and the TTL
// they give), its due index entry moves to the new publish time,
// max(dueAt − Lookahead, now), ahead of every enqueue cursor, and its
// attempt budget restarts. It refuses with ErrAlreadySent, ErrFinished,
// or ErrLeased while a consumer holds it (the send may be under way): a
// delivery is moved only from pending, queued or retrying, so once
// Reschedule has answered, no claim can take the delivery before the new
// dueAt (a claim needs dueAt ≤ its due-by time). A message already on the
// queue for the old time is refused by its claim (ErrNotDue) and deferred.
func (l *Ledger) Reschedule(ctx context.Context, key message.DeliveryKey, mv Move) (Delivery, error) {
	if err := mv.check(key); err != nil {
		return Delivery{}, err
	}
	shards, err := l.shardCount(ctx)
	if err != nil {
		return Delivery{}, err
	}
	now := l.cfg.Clock.Now()
	u := l.newUpdate("reschedule", key, now)
	u.set("#status", ":pending", StatusPending)
	u.set("dueAt", ":newDueAt", Format(mv.DueAt))
	u.set("expiresAt", ":newExpiresAt", Format(mv.ExpiresAt))
	u.names["#ttl"] = attrTTL // a reserved word
	u.set("#ttl", ":ttl", l.Expiry(mv.ExpiresAt).Unix())
	u.set(attrDueSort, ":sort", IndexSort(l.publishAt(mv.DueAt, now), key))
	u.sets = append(u.sets, attrDueShard+" = if_not_exists("+attrDueShard+", :shard)")
	u.values[":shard"] = sv(ShardKey(ShardOf(key.ReminderID, shards)))
	// attempts is read before the update applies: the budget restarts from
	// the attempts made so far.
	u.sets = append(u.sets, "budgetFrom = if_not_exists(attempts, :zero)")
	u.values[":zero"] = av(0)
	u.remove("nextAttemptAt", "claimToken", "leaseUntil")
	u.history(Delivery{}, Entry{Status: StatusPending, Note: text.Clip(mv.Note, 120)})
	u.values[":queued"], u.values[":retrying"] = sv(StatusQueued), sv(StatusRetrying)
	u.cond = "attribute_exists(PK) AND #status IN (:pending, :queued, :retrying)"
	return l.write(ctx, u, liveRefusal)
}

// RescheduleReminder records a reminder's new dueAt and expiresAt on its
// reminder item (and the TTL they give), after its deliveries moved
// (Reschedule), so that a later create compares against the new times and
// the account index orders it by them. It refuses with ErrNotFound if the
// reminder has no item.
func (l *Ledger) RescheduleReminder(ctx context.Context, id string, mv Move) error {
	if mv.DueAt.IsZero() || !mv.ExpiresAt.After(mv.DueAt) {
		return fmt.Errorf("ledger: reschedule reminder %q: dueAt and expiresAt must be set and expiresAt after dueAt", id)
	}
	out, err := l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(l.cfg.Table),
		Key:                      map[string]types.AttributeValue{attrPK: sv(PartitionKey(id)), attrSK: sv(reminderSK)},
		UpdateExpression:         aws.String("SET dueAt = :dueAt, expiresAt = :expiresAt, #ttl = :ttl"),
		ConditionExpression:      aws.String("attribute_exists(PK)"),
		ExpressionAttributeNames: map[string]string{"#ttl": attrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":dueAt": sv(Format(mv.DueAt)), ":expiresAt": sv(Format(mv.ExpiresAt)), ":ttl": av(l.Expiry(mv.ExpiresAt).Unix()),
		},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return fmt.Errorf("ledger: reschedule reminder %q: %w", id, ErrNotFound)
		}
		return fmt.Errorf("ledger: reschedule reminder %q: %w", id, err)
	}
	l.countTo(&l.units.Reminders, out.ConsumedCapacity)
	return nil
}
