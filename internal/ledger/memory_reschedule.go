package ledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/text"
)

// MoveReminder is Ledger.MoveReminder: every item as read, or nothing
// written (ErrChanged).
func (m *Memory) MoveReminder(_ context.Context, p MovePlan) error {
	if err := p.check(); err != nil {
		return err
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	shards, err := m.shardCount()
	if err != nil {
		return err
	}
	if p.nothingToWrite(moveTTL(p.Reminder, m.Expiry(p.To.ExpiresAt))) {
		return nil
	}
	changed := fmt.Errorf("ledger: reschedule %q: %w", p.ID, ErrChanged)
	if r := p.Reminder; r != nil {
		cur, ok := m.t.reminders[p.ID]
		if !ok || !cur.DueAt.Equal(ms(r.DueAt)) || !cur.ExpiresAt.Equal(ms(r.ExpiresAt)) {
			return changed
		}
	}
	for _, d := range append(append([]Delivery{}, p.Live...), p.Kept...) {
		cur, ok := m.t.items[d.Key()]
		if !ok || !cur.UpdatedAt.Equal(ms(d.UpdatedAt)) || cur.Status != d.Status {
			return changed
		}
	}
	now := m.now()
	ttl := moveTTL(p.Reminder, m.Expiry(p.To.ExpiresAt))
	if r, ok := m.t.reminders[p.ID]; ok && p.Reminder != nil {
		r.DueAt, r.ExpiresAt, r.Local = ms(p.To.DueAt), ms(p.To.ExpiresAt), p.To.Local
		if !ttl.IsZero() {
			r.TTL = ttl
		}
		m.t.reminders[p.ID] = r
	}
	for _, read := range p.Live {
		d := copyOf(m.t.items[read.Key()])
		exp, onTime := p.DeliveryTimes(d)
		dttl := moveTTL(p.Reminder, m.Expiry(p.keptUntil(d)))
		held := d.Status == StatusHeld
		if !held {
			d.Status = StatusPending
		}
		d.DueAt, d.ExpiresAt, d.OnTimeUntil = ms(p.DeliveryDue(read)), ms(exp), ms(onTime)
		if p.Reminder != nil {
			d.TimeZone = p.To.Local.TimeZone
		}
		if onTime.IsZero() {
			d.OnTimeUntil = time.Time{}
		}
		d.Repairs = 0
		if !dttl.IsZero() && !d.TTL.IsZero() {
			d.TTL = later(dttl, d.TTL)
		}
		endLease(&d)
		if !held {
			shard := ShardOf(d.ReminderID, shards)
			if d.Index != nil {
				shard = d.Index.Shard
			}
			pub := m.publishAt(d.DueAt, now)
			d.Index = &IndexPosition{Shard: shard, Sort: indexSort(pub, d.Key(), p.To.HandOff), PublishAt: pub, HandedOff: p.To.HandOff}
		}
		d.History = boundHistory(d.History, Entry{At: Format(now), Status: d.Status, Note: text.Clip(p.To.Note, 120)}, m.cfg.HistoryLimit)
		d.UpdatedAt = now
		m.t.items[d.Key()] = d
	}
	for _, read := range p.Kept {
		d := m.t.items[read.Key()]
		if !ttl.IsZero() && !d.TTL.IsZero() && d.TTL.Before(ttl) {
			d.TTL = ttl
			m.t.items[read.Key()] = d
		}
	}
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
			r.Metadata, r.CreatedBy, r.Late, r.Local, r.Recur, r.Series = nil, "", LateRule{}, Local{}, "", "" // not projected
			all = append(all, Listed{ReminderItem: r, CreatedAt: m.t.created[id]})
		}
	}
	for id, sr := range m.t.series {
		if r := copyReminder(sr.Item); r.AccountRef == account {
			r.Metadata, r.CreatedBy, r.Late, r.Local, r.Recur = nil, "", LateRule{}, Local{}, "" // not projected
			all = append(all, Listed{ReminderItem: r, CreatedAt: m.t.created[id], IsSeries: true})
		}
	}
	m.t.mu.Unlock()
	order := func(a, b Listed) int {
		return cmp.Or(-cmp.Compare(Format(a.DueAt), Format(b.DueAt)), -strings.Compare(a.ID, b.ID))
	}
	slices.SortFunc(all, order)
	if after != nil {
		at := Listed{ReminderItem: ReminderItem{ID: after.ID}}
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
