package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/text"
)

// DefaultFallbackWithin is how long a taken fallback may take when its
// reminder does not say: an hour.
const DefaultFallbackWithin = time.Hour

// A reminder's delivery may name a fallback: another delivery of the same
// reminder, written with the others at create but held (StatusHeld: in no
// index, never claimed) until its primary fails. TakeFallback is the one
// way out of held other than Cancel: one transaction, conditioned on the
// fallback being held and the primary being as its caller saw it fail, so
// a fallback is taken at most once however many callers see its primary
// fail, and never for a primary revived or redriven since; the primary is
// marked (FallbackTaken), and never sent after.

// TakeFallback takes the fallback primary names (primary.Fallback), because
// primary ended as reason says ("dead (permanent)", "bounced
// Permanent/General", "expired"; FallbackDue gives it). primary is the
// delivery as its caller saw it end (the stream's new image). In one
// transaction:
//
//   - the primary, still as seen (its status and updatedAt), is marked
//     taken (FallbackTaken, the take's time), so that nothing sends it any
//     more: a revive or redrive of it is refused with ErrFallbackTaken;
//   - the held fallback becomes pending, due now, expiring its
//     FallbackWithin from now, in the due index as a new delivery due now,
//     its TTL the later of its new expiry's and its primary's, with a
//     pending entry noting FallbackNote.
//
// It returns the taken fallback, read back. It refuses (a *RefusedError)
// with ErrPrimaryChanged when the primary is no longer as seen (revived,
// redriven, sent or purged since: a stream record processed late; the
// caller's work is done, the primary is no longer failed as it saw it),
// ErrNotHeld with the fallback as it is when the fallback is no longer
// held (taken already, or cancelled: the caller's work is done), and
// ErrNotFound when there is no such fallback.
//
// The bound is read from primary.FallbackWithin (the primary carries its
// fallback's); a primary written without it costs a read of the fallback.
func (l *Ledger) TakeFallback(ctx context.Context, primary Delivery, reason string) (Delivery, error) {
	key, err := fallbackKey(primary)
	if err != nil {
		return Delivery{}, err
	}
	within := primary.FallbackWithin
	if within <= 0 {
		held, err := l.Get(ctx, key)
		if err != nil {
			return Delivery{}, err
		}
		within = held.FallbackWithin
	}
	within = fallbackWithin(within)
	shards, err := l.shardCount(ctx)
	if err != nil {
		return Delivery{}, err
	}
	now := l.cfg.Clock.Now()
	expires := now.Add(within)
	u := l.newUpdate("take-fallback", key, now)
	u.set("#status", ":pending", StatusPending)
	u.set("dueAt", ":now", nil)
	u.set("expiresAt", ":expiresAt", Format(expires))
	u.names["#ttl"] = attrTTL // a reserved word
	u.set("#ttl", ":ttl", later(l.Expiry(expires), primary.TTL).Unix())
	u.set(attrDueShard, ":shard", ShardKey(ShardOf(key.ReminderID, shards)))
	u.set(attrDueSort, ":sort", IndexSort(l.publishAt(now, now), key))
	u.history(Delivery{}, Entry{Status: StatusPending, Note: takeNote(primary, reason)})
	u.values[":held"] = sv(StatusHeld)
	u.cond = "attribute_exists(PK) AND #status = :held"
	take := u.transact(l.cfg.Table)
	take.Update.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld

	// The primary as seen: RecordFeedback changes neither its status nor
	// its updatedAt, so a take a report made due still finds it so.
	seen := map[string]types.AttributeValue{":seen": sv(primary.Status), ":taken": sv(Format(now))}
	cond := "#status = :seen AND attribute_not_exists(updatedAt)"
	if !primary.UpdatedAt.IsZero() {
		seen[":seenAt"], cond = sv(Format(primary.UpdatedAt)), "#status = :seen AND updatedAt = :seenAt"
	}
	mark := types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(l.cfg.Table), Key: keyAttrs(primary.Key()),
		UpdateExpression: aws.String("SET " + attrFallbackTaken + " = :taken"), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: map[string]string{"#status": "status"}, ExpressionAttributeValues: seen,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
	out, err := l.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{mark, take}, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	var cancelled *types.TransactionCanceledException
	if errors.As(err, &cancelled) {
		if refused := takeCancelled(primary, key, cancelled.CancellationReasons); refused != nil {
			return Delivery{}, refused
		}
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("ledger: take-fallback %s (of %s): %w", key, primary.Key(), err)
	}
	for _, cc := range out.ConsumedCapacity {
		l.count(&cc)
	}
	return l.Get(ctx, key)
}

// takeCancelled is the refusal of a TakeFallback whose transaction was
// cancelled for reasons (the primary's mark first, then the fallback's
// take); nil if no condition failed (a conflict, throttling: an error to
// retry).
func takeCancelled(primary Delivery, key message.DeliveryKey, reasons []types.CancellationReason) error {
	failed := func(i int) (map[string]types.AttributeValue, bool) {
		if i >= len(reasons) || aws.ToString(reasons[i].Code) != "ConditionalCheckFailed" {
			return nil, false
		}
		return reasons[i].Item, true
	}
	if item, ok := failed(0); ok {
		re := &RefusedError{Op: "take-fallback", Key: primary.Key(), Reason: ErrPrimaryChanged}
		if len(item) > 0 {
			cur, err := fromItem(item)
			if err != nil {
				return err
			}
			re.Current = cur
		}
		return re
	}
	item, ok := failed(1)
	if !ok {
		return nil
	}
	if len(item) == 0 {
		return &RefusedError{Op: "take-fallback", Key: key, Reason: ErrNotFound}
	}
	cur, err := fromItem(item)
	if err != nil {
		return err
	}
	return &RefusedError{Op: "take-fallback", Key: key, Reason: takeRefusal(cur), Current: cur}
}

// TakeFallback is Ledger.TakeFallback.
func (m *Memory) TakeFallback(_ context.Context, primary Delivery, reason string) (Delivery, error) {
	key, err := fallbackKey(primary)
	if err != nil {
		return Delivery{}, err
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	shards, err := m.shardCount()
	if err != nil {
		return Delivery{}, err
	}
	p, ok := m.t.items[primary.Key()]
	if !ok || p.Status != primary.Status || !p.UpdatedAt.Equal(ms(primary.UpdatedAt)) {
		re := &RefusedError{Op: "take-fallback", Key: primary.Key(), Reason: ErrPrimaryChanged}
		if ok {
			re.Current = copyOf(p)
		}
		return Delivery{}, re
	}
	taken, err := m.transitionLocked("take-fallback", key, func(d Delivery, _ time.Time) bool {
		return d.Status == StatusHeld
	}, byOld(takeRefusal), func(d *Delivery, now time.Time) {
		within := primary.FallbackWithin
		if within <= 0 {
			within = d.FallbackWithin
		}
		d.Status, d.DueAt, d.ExpiresAt = StatusPending, now, ms(now.Add(fallbackWithin(within)))
		d.TTL = later(m.Expiry(d.ExpiresAt), primary.TTL)
		pub := m.publishAt(now, now)
		d.Index = &IndexPosition{Shard: ShardOf(key.ReminderID, shards), Sort: IndexSort(pub, key), PublishAt: pub}
		m.history(d, Delivery{}, Entry{Status: StatusPending, Note: takeNote(primary, reason)}, now)
	})
	if err != nil {
		return Delivery{}, err
	}
	p = copyOf(p)
	p.FallbackTaken = taken.UpdatedAt // the mark leaves the primary's updatedAt as it was
	m.t.items[primary.Key()] = p
	return taken, nil
}

// FallbackTakenNote says that d's fallback was taken, and when: "its
// fallback rem-1:sms:webhook was taken at 2026-11-30T09:02:00.000Z"; ""
// if it was not.
func FallbackTakenNote(d Delivery) string {
	if d.FallbackTaken.IsZero() {
		return ""
	}
	return "its fallback " + d.Fallback.Key(d.ReminderID).String() + " was taken at " + Format(d.FallbackTaken)
}

// fallbackKey is the key of primary's fallback, or why it has none.
func fallbackKey(primary Delivery) (message.DeliveryKey, error) {
	if primary.Fallback.IsZero() {
		return message.DeliveryKey{}, fmt.Errorf("ledger: take the fallback of %s: it names no fallback; take one only of a delivery whose Fallback is set",
			primary.Key())
	}
	key := primary.Fallback.Key(primary.ReminderID)
	if err := key.Validate(); err != nil {
		return message.DeliveryKey{}, fmt.Errorf("ledger: take the fallback of %s: %w", primary.Key(), err)
	}
	if key == primary.Key() {
		return message.DeliveryKey{}, errors.New("ledger: take the fallback of " + primary.Key().String() + ": it names itself")
	}
	return key, nil
}

// fallbackWithin is a fallback's bound, DefaultFallbackWithin if unset.
func fallbackWithin(within time.Duration) time.Duration {
	if within <= 0 {
		return DefaultFallbackWithin
	}
	return within
}

func takeNote(primary Delivery, reason string) string {
	return text.Clip(FallbackNote(FallbackRef{Channel: primary.Channel, Provider: primary.Provider}, reason), 120)
}

// takeRefusal says why a TakeFallback was refused: the fallback is no
// longer held.
func takeRefusal(Delivery) error { return ErrNotHeld }
