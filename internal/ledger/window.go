package ledger

import (
	"context"
	"time"

	"github.com/nudgehq/nudge/internal/text"
)

// WindowNote is the history note of a delivery given back to wait for its
// send window: "waits for its send window: opens 2027-03-29T06:00:00.000Z".
func WindowNote(opens time.Time) string { return "waits for its send window: opens " + Format(opens) }

// AwaitWindow gives back the claim of d, claimed while its send window
// (Window) was shut, without spending an attempt: d becomes pending, due
// when the window opens (DueAt = opens), back in the due index at its
// publish time for then, its attempt count as before the claim, its lease
// ended. The enqueue hands it off again for the window's opening. d must be
// the claimed delivery (its token proves the lease): ErrLeaseLost or
// ErrAlreadySent otherwise.
//
// A claim that took a lapsed lease (LapsedLeaseTaken: the attempt before
// it never recorded an end) keeps that mark through the wait
// (UnendedAttempt), so that the claim after the opening still knows the
// earlier attempt may have gone out.
func (l *Ledger) AwaitWindow(ctx context.Context, d Delivery, opens time.Time) (Delivery, error) {
	shards, err := l.shardCount(ctx)
	if err != nil {
		return Delivery{}, err
	}
	now := l.cfg.Clock.Now()
	key := d.Key()
	u := l.newUpdate("await window", key, now)
	u.set("#status", ":pending", StatusPending)
	u.set("dueAt", ":opens", Format(opens))
	u.add("attempts", ":minusOne", -1)
	u.remove("claimToken", "leaseUntil", "nextAttemptAt")
	u.set(attrDueSort, ":sort", IndexSort(l.publishAt(opens, now), key))
	u.sets = append(u.sets, attrDueShard+" = if_not_exists("+attrDueShard+", :shard)")
	u.values[":shard"] = sv(ShardKey(ShardOf(key.ReminderID, shards)))
	if d.LapsedLeaseTaken() {
		u.set("unendedAttempt", ":unended", d.Attempts-1)
	}
	u.history(d, Entry{Status: StatusPending, Attempt: d.Attempts - 1, Note: text.Clip(WindowNote(opens), 120)})
	u.holdsLease(d)
	return l.write(ctx, u, leaseRefusal)
}

// AwaitWindow is Ledger.AwaitWindow.
func (m *Memory) AwaitWindow(_ context.Context, held Delivery, opens time.Time) (Delivery, error) {
	m.t.mu.Lock()
	shards, err := m.shardCount()
	m.t.mu.Unlock()
	if err != nil {
		return Delivery{}, err
	}
	key := held.Key()
	return m.transition("await window", key, holdsLease(held.ClaimToken), byOld(leaseRefusal), func(d *Delivery, now time.Time) {
		if held.LapsedLeaseTaken() {
			d.UnendedAttempt = held.Attempts - 1
		}
		d.Status, d.DueAt, d.Attempts = StatusPending, ms(opens), d.Attempts-1
		d.ClaimToken, d.LeaseUntil, d.NextAttemptAt = "", time.Time{}, time.Time{}
		shard := ShardOf(key.ReminderID, shards)
		if d.Index != nil {
			shard = d.Index.Shard
		}
		pub := m.publishAt(opens, now)
		d.Index = &IndexPosition{Shard: shard, Sort: IndexSort(pub, key), PublishAt: pub}
		m.history(d, held, Entry{Status: StatusPending, Attempt: held.Attempts - 1, Note: text.Clip(WindowNote(opens), 120)}, now)
	})
}
