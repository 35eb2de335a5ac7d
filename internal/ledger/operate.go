package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/text"
)

// Operator transitions: the reviewed redrive and the purge of a reminder.

// Redrive records that an operator hands a dead delivery back to the work
// queue (nudge dlq redrive): it becomes queued, its TTL is set to Expiry
// (an item written before TTLs were set at creation had one counted from
// its end, which could come while it is live again), and it enters
// the due index again with its dueAt as publish time, behind every enqueue
// cursor. So the enqueue never publishes it a second time, but if the
// redriven message is lost the overdue scan sees it and the repair
// publishes it again after RepairAfter. It refuses with ErrNotDead unless
// the delivery is dead (ErrAlreadySent if it was sent meanwhile), and with
// ErrFallbackTaken if its fallback was taken: the fallback stands in for
// it, and sending it too would tell the recipient twice.
func (l *Ledger) Redrive(ctx context.Context, d Delivery, note string) (Delivery, error) {
	shards, err := l.shardCount(ctx)
	if err != nil {
		return Delivery{}, err
	}
	now := l.cfg.Clock.Now()
	u := l.newUpdate("redrive", d.Key(), now)
	u.set("#status", ":queued", StatusQueued)
	u.set(attrDueShard, ":shard", ShardKey(ShardOf(d.ReminderID, shards)))
	u.set(attrDueSort, ":sort", IndexSort(d.DueAt, d.Key()))
	u.names["#ttl"] = attrTTL
	if d.ExpiresAt.IsZero() { // not as read: keep it forever rather than guess
		u.remove("#ttl")
	} else {
		// Never lowered: a reschedule may have raised it to its reminder's.
		u.set("#ttl", ":ttl", later(l.Expiry(d.ExpiresAt), d.TTL).Unix())
	}
	u.remove("claimToken", "leaseUntil", "nextAttemptAt", "repairs")       // the repair's back-off restarts too
	u.sets = append(u.sets, "budgetFrom = if_not_exists(attempts, :zero)") // the attempt budget restarts
	u.history(Delivery{}, Entry{Status: StatusQueued, Attempt: d.Attempts, Note: text.Clip(note, 120)})
	u.values[":dead"], u.values[":dueAt"], u.values[":zero"] = sv(StatusDead), sv(Format(d.DueAt)), av(0)
	u.cond = "attribute_exists(PK) AND #status = :dead AND dueAt = :dueAt AND attribute_not_exists(" + attrFallbackTaken + ")"
	return l.write(ctx, u, redriveRefusal)
}

// redriveRefusal says why a Redrive was refused.
func redriveRefusal(old Delivery) error {
	switch {
	case old.Status == StatusSent:
		return ErrAlreadySent
	case old.Status == StatusDead && !old.FallbackTaken.IsZero():
		return ErrFallbackTaken
	}
	return ErrNotDead
}

// Purged is what Purge removed.
type Purged struct {
	// Deliveries are the delivery items removed, with their history, as
	// they were.
	Deliveries []Delivery
	// OtherItems are the sort keys of the other items removed (the
	// reminder item).
	OtherItems []string
}

// InFlightError is a purge refused because deliveries are being sent.
type InFlightError struct {
	ReminderID string
	Keys       []message.DeliveryKey
	// LeaseUntil is when the last lease counts as lapsed for this writer:
	// its end, plus the writer's clock skew.
	LeaseUntil time.Time
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("ledger: purge %q: %d deliveries are being sent now (%v); nothing was removed; try again after %s", e.ReminderID, len(e.Keys), e.Keys, Format(e.LeaseUntil))
}

// Is makes errors.Is(err, ErrInFlight) true.
func (e *InFlightError) Is(target error) bool { return target == ErrInFlight }

// Purge deletes every item of a reminder — the reminder item, its
// deliveries and their transition history — in one transaction, for a
// deletion request. It refuses, removing nothing, while a delivery is in
// flight (sending under a lease that has not lapsed): the send may be
// under way and its completion must find its item. A purged reminder's
// messages still on the queue are dead-lettered by the consumer as
// not-found, with ids only. It returns ErrNotFound if there is nothing to
// remove.
func (l *Ledger) Purge(ctx context.Context, reminderID string) (Purged, error) {
	for attempt := 0; ; attempt++ {
		stored, err := l.ReadReminder(ctx, reminderID)
		if err != nil {
			return Purged{}, err
		}
		ds := stored.Deliveries
		var others []string
		for _, sk := range stored.keys {
			if !strings.HasPrefix(sk, "DLV#") {
				others = append(others, sk)
			}
		}
		if len(ds)+len(others) == 0 {
			return Purged{}, fmt.Errorf("ledger: purge %q: %w", reminderID, ErrNotFound)
		}
		if len(ds)+len(others) > 100 {
			return Purged{}, fmt.Errorf("ledger: purge %q: %d items is more than one transaction takes (100)", reminderID, len(ds)+len(others))
		}
		now := l.cfg.Clock.Now()
		inFlight := &InFlightError{ReminderID: reminderID}
		var items []types.TransactWriteItem
		for _, d := range ds {
			if d.Status == StatusSending && !d.LeaseUntil.Before(l.lapsedBefore(now)) {
				inFlight.Keys = append(inFlight.Keys, d.Key())
				// Counted as lapsed only the writer's clock skew after it ends.
				inFlight.LeaseUntil = later(inFlight.LeaseUntil, d.LeaseUntil.Add(l.cfg.ClockSkew))
			}
			// Deleted only as it was read: a claim in between fails the
			// whole transaction, and the purge reads again.
			items = append(items, types.TransactWriteItem{Delete: &types.Delete{
				TableName: aws.String(l.cfg.Table), Key: keyAttrs(d.Key()),
				ConditionExpression:       aws.String("updatedAt = :was"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":was": sv(formatOpt(d.UpdatedAt))},
			}})
		}
		if len(inFlight.Keys) > 0 {
			return Purged{}, inFlight
		}
		for _, sk := range others {
			items = append(items, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(l.cfg.Table),
				Key: map[string]types.AttributeValue{attrPK: sv(PartitionKey(reminderID)), attrSK: sv(sk)}}})
		}
		_, err = l.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		var cancelled *types.TransactionCanceledException
		if errors.As(err, &cancelled) && attempt < 3 {
			continue // a delivery changed meanwhile: read again
		}
		if err != nil {
			return Purged{}, fmt.Errorf("ledger: purge %q: %w", reminderID, err)
		}
		return Purged{Deliveries: ds, OtherItems: others}, nil
	}
}
