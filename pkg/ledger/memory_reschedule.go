package ledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nudgehq/nudge/pkg/message"
	"github.com/nudgehq/nudge/pkg/text"
)

// Reschedule is Ledger.Reschedule.
func (m *Memory) Reschedule(_ context.Context, key message.DeliveryKey, mv Move) (Delivery, error) {
	if err := mv.check(key); err != nil {
		return Delivery{}, err
	}
	m.t.mu.Lock()
	shards, err := m.shardCount()
	m.t.mu.Unlock()
	if err != nil {
		return Delivery{}, err
	}
	return m.transition("reschedule", key, func(d Delivery, _ time.Time) bool {
		return d.Status == StatusPending || d.Status == StatusQueued || d.Status == StatusRetrying
	}, byOld(liveRefusal), func(d *Delivery, now time.Time) {
		d.Status, d.DueAt, d.ExpiresAt, d.TTL = StatusPending, ms(mv.DueAt), ms(mv.ExpiresAt), m.Expiry(mv.ExpiresAt)
		d.BudgetFrom = d.Attempts
		endLease(d)
		shard := ShardOf(key.ReminderID, shards)
		if d.Index != nil {
			shard = d.Index.Shard
		}
		pub := m.publishAt(mv.DueAt, now)
		d.Index = &IndexPosition{Shard: shard, Sort: IndexSort(pub, key), PublishAt: pub}
		m.history(d, Delivery{}, Entry{Status: StatusPending, Note: text.Clip(mv.Note, 120)}, now)
	})
}

// RescheduleReminder is Ledger.RescheduleReminder.
func (m *Memory) RescheduleReminder(_ context.Context, id string, mv Move) error {
	if mv.DueAt.IsZero() || !mv.ExpiresAt.After(mv.DueAt) {
		return fmt.Errorf("ledger: reschedule reminder %q: dueAt and expiresAt must be set and expiresAt after dueAt", id)
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	r, ok := m.t.reminders[id]
	if !ok {
		return fmt.Errorf("ledger: reschedule reminder %q: %w", id, ErrNotFound)
	}
	r.DueAt, r.ExpiresAt = ms(mv.DueAt), ms(mv.ExpiresAt)
	m.t.reminders[id] = r
	return nil
}

// ListAccount is Ledger.ListAccount: the same order (latest due first; for
// one due time, the index's order, here the id's, descending) and tokens.
func (m *Memory) ListAccount(_ context.Context, account string, limit int, next string) (AccountPage, error) {
	if err := checkListing(account, limit); err != nil {
		return AccountPage{}, err
	}
	var after *pageToken
	if next != "" {
		p, err := decodePageToken(next)
		if err != nil {
			return AccountPage{}, fmt.Errorf("ledger: list account: %w", err)
		}
		after = &p
	}
	m.t.mu.Lock()
	var all []Listed
	for id, r := range m.t.reminders {
		if r.AccountRef == account {
			r = copyReminder(r)
			r.Metadata = nil // not projected
			all = append(all, Listed{Reminder: r, CreatedAt: m.t.created[id]})
		}
	}
	m.t.mu.Unlock()
	order := func(a, b Listed) int {
		return cmp.Or(-cmp.Compare(Format(a.DueAt), Format(b.DueAt)), -strings.Compare(a.ID, b.ID))
	}
	slices.SortFunc(all, order)
	if after != nil {
		at := Listed{Reminder: Reminder{ID: after.ID}}
		at.DueAt, _ = time.Parse(time.RFC3339Nano, after.DueAt)
		i, _ := slices.BinarySearchFunc(all, at, order)
		for i < len(all) && order(all[i], at) <= 0 {
			i++
		}
		all = all[i:]
	}
	var page AccountPage
	if len(all) > limit {
		page.Next = pageToken{ID: all[limit-1].ID, DueAt: Format(all[limit-1].DueAt)}.encode()
		all = all[:limit]
	}
	page.Reminders = all
	return page, nil
}
