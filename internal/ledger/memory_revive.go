package ledger

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/nudgehq/nudge/internal/message"
)

// ReadDead is Ledger.ReadDead: the table's delivery items in key order,
// each counted as read, the dead ones returned as read, without address
// and template data; Next when the bound stopped the read.
func (m *Memory) ReadDead(_ context.Context, q DeadQuery) (DeadPage, error) {
	after, err := q.check()
	if err != nil {
		return DeadPage{}, err
	}
	var page DeadPage
	page.Scanned, page.Next = m.scanDeliveries(after, q.Read, func(d Delivery) {
		if d.Status == StatusDead {
			d.Address, d.TemplateData = "", nil // not projected
			page.Deliveries = append(page.Deliveries, d)
		}
	})
	return page, nil
}

// scanDeliveries walks the table's deliveries in key order after after,
// as a scan reads them, at most read, handing keep a copy of each; next
// is where a read goes on when the bound stopped it.
func (m *Memory) scanDeliveries(after *deadToken, read int, keep func(Delivery)) (scanned int, next string) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	keyOf := func(k message.DeliveryKey) deadToken {
		return deadToken{PK: PartitionKey(k.ReminderID), SK: SortKey(k.Channel, k.Provider)}
	}
	order := func(a, b deadToken) int { return cmp.Or(cmp.Compare(a.PK, b.PK), cmp.Compare(a.SK, b.SK)) }
	keys := make([]message.DeliveryKey, 0, len(m.t.items))
	for k := range m.t.items {
		if after == nil || order(keyOf(k), *after) > 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b message.DeliveryKey) int { return order(keyOf(a), keyOf(b)) })
	for i, k := range keys {
		if scanned == read {
			return scanned, keyOf(keys[i-1]).encode()
		}
		scanned++
		keep(copyOf(m.t.items[k]))
	}
	return scanned, ""
}

// Revive is Ledger.Revive.
func (m *Memory) Revive(_ context.Context, read Delivery, r Revival) (Delivery, error) {
	note, err := r.Note()
	if err != nil {
		return Delivery{}, err
	}
	if read.Status != StatusDead {
		return Delivery{}, &RefusedError{Op: "revive", Key: read.Key(), Reason: ErrNotDead, Current: read}
	}
	if !read.FallbackTaken.IsZero() {
		return Delivery{}, &RefusedError{Op: "revive", Key: read.Key(), Reason: ErrFallbackTaken, Current: read}
	}
	m.t.mu.Lock()
	shards, err := m.shardCount()
	m.t.mu.Unlock()
	if err != nil {
		return Delivery{}, err
	}
	live := func(now time.Time) time.Time { return ms(now.Add(m.cfg.ClockSkew)) }
	return m.transition("revive", read.Key(), func(d Delivery, now time.Time) bool {
		return d.Status == StatusDead && d.FallbackTaken.IsZero() &&
			d.UpdatedAt.Equal(ms(read.UpdatedAt)) && d.DueAt.Equal(ms(read.DueAt)) && d.ExpiresAt.After(live(now))
	}, func(old Delivery, now time.Time) error {
		return reviveRefusal(old, read, live(now))
	}, func(d *Delivery, now time.Time) {
		d.Status = StatusPending
		pub := m.publishAt(d.DueAt, now)
		d.Index = &IndexPosition{Shard: ShardOf(d.ReminderID, shards), Sort: IndexSort(pub, d.Key()), PublishAt: pub}
		if d.ExpiresAt.IsZero() {
			d.TTL = time.Time{}
		} else {
			d.TTL = later(m.Expiry(d.ExpiresAt), d.TTL)
		}
		endLease(d)
		d.Repairs = 0
		d.BudgetFrom = d.Attempts
		d.History = boundHistory(d.History, Entry{At: Format(now), Status: StatusPending, Attempt: d.Attempts, Note: note}, m.cfg.HistoryLimit)
	})
}
