package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/text"
)

// DefaultFallbackWithin is how long a taken fallback may take when its
// reminder does not say: an hour.
const DefaultFallbackWithin = time.Hour

// A reminder's delivery may name a fallback: another delivery of the same
// reminder, written with the others at create but held (StatusHeld: in no
// index, never claimed) until its primary fails. TakeFallback is the one
// way out of held other than Cancel: one conditional write, so a fallback
// is taken at most once however many callers see its primary fail.

// TakeFallback takes the fallback primary names (primary.Fallback), because
// primary ended as reason says ("dead (permanent)", "bounced
// Permanent/General", "expired"; FallbackDue gives it): in one conditional
// write the held fallback becomes pending, due now, expiring its
// FallbackWithin from now, in the due index as a new delivery due now, its
// TTL the later of its new expiry's and its primary's, with a pending entry
// noting FallbackNote. It returns the taken fallback. It refuses with
// ErrNotHeld (a *RefusedError with the fallback as it is) when the
// fallback is no longer held (taken already, or cancelled: the caller's
// work is done), and ErrNotFound when there is no such item.
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
	return l.write(ctx, u, takeRefusal)
}

// TakeFallback is Ledger.TakeFallback.
func (m *Memory) TakeFallback(_ context.Context, primary Delivery, reason string) (Delivery, error) {
	key, err := fallbackKey(primary)
	if err != nil {
		return Delivery{}, err
	}
	m.t.mu.Lock()
	shards, err := m.shardCount()
	m.t.mu.Unlock()
	if err != nil {
		return Delivery{}, err
	}
	return m.transition("take-fallback", key, func(d Delivery, _ time.Time) bool {
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
