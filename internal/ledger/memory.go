package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

// MemoryConfig configures a Memory ledger; each field means what it means
// in Config.
type MemoryConfig struct {
	HistoryLimit       int           // default 8
	Retention          time.Duration // default DefaultRetention
	Shards             int           // default 8
	ShardsFromRegistry bool
	Lookahead          time.Duration // default MaxLookahead
	ClockSkew          time.Duration
	Clock              clock.Clock // default clock.Real
}

// Memory is an in-memory ledger with the DynamoDB ledger's conditions,
// refusals, history bound, due index, cursors, shard registry and reminder
// items, for tests of the code above the ledger (the consumer, the
// enqueue, the intake) with a fake clock. The conformance suite
// (ledgertest.Run) holds it and the DynamoDB ledger to the same behaviour.
// It is safe for concurrent use.
type Memory struct {
	cfg MemoryConfig
	t   *memoryTable
}

// memoryTable is what a table holds; several Memory ledgers (writers with
// their own clocks and settings) may share one.
type memoryTable struct {
	mu        sync.Mutex
	items     map[message.DeliveryKey]Delivery
	reminders map[string]ReminderItem
	created   map[string]time.Time // each reminder item's createdAt
	cursors   map[int]Cursor
	registry  int // the largest shard count recorded
	stage     *StageFacts
	marks     map[string]time.Time // each provider's feedback mark (RecordFeedbackMark)
	probes    map[string]time.Time // each provider's last probe (ClaimProbe)
	series    map[string]Series
}

// NewMemory returns a Memory ledger over an empty table.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	m := &Memory{t: &memoryTable{items: map[message.DeliveryKey]Delivery{}, reminders: map[string]ReminderItem{},
		created: map[string]time.Time{}, cursors: map[int]Cursor{}, series: map[string]Series{}}}
	return m.With(cfg)
}

// With returns another writer over m's table with its own settings (a
// clock behind, a different shard count), as a second Ledger over the same
// DynamoDB table would be.
func (m *Memory) With(cfg MemoryConfig) (*Memory, error) {
	if cfg.HistoryLimit == 0 {
		cfg.HistoryLimit = 8
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Shards == 0 {
		cfg.Shards = 8
	}
	if cfg.Lookahead == 0 {
		cfg.Lookahead = MaxLookahead
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	// The same limits as New, checked by the same code.
	if _, err := New(noAPI{}, Config{Table: "memory", HistoryLimit: cfg.HistoryLimit, Retention: cfg.Retention, Shards: cfg.Shards,
		Lookahead: cfg.Lookahead, ClockSkew: cfg.ClockSkew, Clock: cfg.Clock}); err != nil {
		return nil, err
	}
	return &Memory{cfg: cfg, t: m.t}, nil
}

// noAPI stands for a DynamoDB client where only New's checks are wanted.
type noAPI struct{ API }

// ms truncates to the stored precision.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func (m *Memory) now() time.Time { return ms(m.cfg.Clock.Now()) }

func (m *Memory) lapsedBefore(now time.Time) time.Time { return now.Add(-m.cfg.ClockSkew) }

func (m *Memory) publishAt(dueAt, now time.Time) time.Time {
	return ms(publishTime(dueAt, now.Add(m.cfg.ClockSkew), m.cfg.Lookahead))
}

// Lookahead returns the configured lookahead.
func (m *Memory) Lookahead() time.Duration { return m.cfg.Lookahead }

// Expiry is Ledger.Expiry.
func (m *Memory) Expiry(expiresAt time.Time) time.Time {
	return Expiry(time.Time{}, expiresAt, m.cfg.Retention)
}

// shardCount is Ledger.shardCount; the caller holds the table's lock.
func (m *Memory) shardCount() (int, error) {
	if m.cfg.ShardsFromRegistry {
		if m.t.registry == 0 {
			return 0, fmt.Errorf("ledger: memory: %w", ErrNoShardCount)
		}
		return m.t.registry, nil
	}
	m.t.registry = max(m.t.registry, m.cfg.Shards)
	return m.cfg.Shards, nil
}

// StoredShards is Ledger.StoredShards.
func (m *Memory) StoredShards(context.Context) (int, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	if m.cfg.ShardsFromRegistry {
		return m.t.registry, nil
	}
	m.t.registry = max(m.t.registry, m.cfg.Shards)
	return m.t.registry, nil
}

// Create is Ledger.Create.
func (m *Memory) Create(_ context.Context, d Delivery) error {
	if err := d.Key().Validate(); err != nil {
		return fmt.Errorf("ledger: create: %w", err)
	}
	if d.DueAt.IsZero() || d.ExpiresAt.IsZero() || !d.ExpiresAt.After(d.DueAt) {
		return fmt.Errorf("ledger: create %s: dueAt and expiresAt must be set and expiresAt after dueAt", d.Key())
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	shards, err := m.shardCount()
	if err != nil {
		return err
	}
	if cur, ok := m.t.items[d.Key()]; ok {
		return &RefusedError{Op: "create", Key: d.Key(), Reason: ErrExists, Current: copyOf(cur)}
	}
	now := m.now()
	if d.Status == "" {
		d.Status = StatusPending
	}
	d.DueAt, d.ExpiresAt, d.UpdatedAt = ms(d.DueAt), ms(d.ExpiresAt), now
	if len(d.History) == 0 {
		d.History = []Entry{{At: Format(now), Status: d.Status}}
	}
	d.TTL, d.Index = later(d.TTL, m.Expiry(d.ExpiresAt)), nil
	switch {
	case d.Status == StatusHeld: // a fallback: in no index until taken
	case d.Status.Terminal():
		d.TTL = Expiry(now, d.ExpiresAt, m.cfg.Retention)
	default:
		pub := m.publishAt(d.DueAt, now)
		d.Index = &IndexPosition{Shard: ShardOf(d.ReminderID, shards), Sort: indexSort(pub, d.Key(), d.HandOff), PublishAt: pub, HandedOff: d.HandOff}
	}
	d.HandOff = false // not stored
	m.t.items[d.Key()] = copyOf(d)
	return nil
}

// Get is Ledger.Get.
func (m *Memory) Get(_ context.Context, key message.DeliveryKey) (Delivery, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	d, ok := m.t.items[key]
	if !ok {
		return Delivery{}, &RefusedError{Op: "get", Key: key, Reason: ErrNotFound}
	}
	return copyOf(d), nil
}

// GetMany is Ledger.GetMany.
func (m *Memory) GetMany(_ context.Context, keys []message.DeliveryKey) (map[message.DeliveryKey]Delivery, error) {
	if len(keys) > 100 {
		return nil, fmt.Errorf("ledger: get %d deliveries at once; the limit is 100", len(keys))
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	out := make(map[message.DeliveryKey]Delivery, len(keys))
	for _, k := range keys {
		if d, ok := m.t.items[k]; ok {
			out[k] = copyOf(d)
		}
	}
	return out, nil
}

// transition applies change to the item at key if guard allows it, else
// returns the refusal that reason gives.
func (m *Memory) transition(op string, key message.DeliveryKey, guard func(d Delivery, now time.Time) bool,
	reason func(old Delivery, now time.Time) error, change func(d *Delivery, now time.Time)) (Delivery, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	return m.transitionLocked(op, key, guard, reason, change)
}

// transitionLocked is transition, with m.t.mu held by the caller.
func (m *Memory) transitionLocked(op string, key message.DeliveryKey, guard func(d Delivery, now time.Time) bool,
	reason func(old Delivery, now time.Time) error, change func(d *Delivery, now time.Time)) (Delivery, error) {
	now := m.now()
	d, ok := m.t.items[key]
	if !ok {
		return Delivery{}, &RefusedError{Op: op, Key: key, Reason: ErrNotFound}
	}
	if !guard(d, now) {
		return Delivery{}, &RefusedError{Op: op, Key: key, Reason: reason(d, now), Current: copyOf(d)}
	}
	d = copyOf(d)
	change(&d, now)
	d.UpdatedAt = now
	if d.Status.Terminal() {
		d.Index = nil
	}
	m.t.items[key] = d
	return copyOf(d), nil
}

// Claim is Ledger.Claim.
func (m *Memory) Claim(_ context.Context, c Claim) (Delivery, error) {
	if c.Token == "" {
		return Delivery{}, errors.New("ledger: claim without a token")
	}
	dueBy := ms(c.DueBy)
	claim := func(revive bool) (Delivery, error) {
		return m.transition("claim", c.Key, func(d Delivery, now time.Time) bool {
			claimable := !revive && slices.Contains([]Status{StatusPending, StatusQueued, StatusRetrying}, d.Status) ||
				revive && d.Status == StatusDead && d.FallbackTaken.IsZero() && (c.ReviveAttempts == 0 || d.Attempts == c.ReviveAttempts) ||
				!revive && d.Status == StatusSending && d.LeaseUntil.Before(m.lapsedBefore(now))
			return claimable && !d.DueAt.After(dueBy) && d.ExpiresAt.After(now)
		}, func(old Delivery, now time.Time) error {
			return claimRefusal(old, now, m.lapsedBefore(now), Claim{DueBy: dueBy, ReviveAttempts: c.ReviveAttempts}, revive)
		}, func(d *Delivery, now time.Time) {
			if revive {
				d.BudgetFrom = d.Attempts
			}
			d.Status, d.ClaimToken, d.LeaseUntil = StatusSending, c.Token, ms(c.LeaseUntil)
			d.Attempts++
			d.Repairs = 0 // the hand-off worked
			d.History = append(d.History, Entry{At: Format(now), Status: StatusSending})
		})
	}
	d, err := claim(false)
	var re *RefusedError
	if c.Revive && errors.As(err, &re) && re.Current.Status == StatusDead {
		return claim(true)
	}
	return d, err
}

func holdsLease(tok string) func(Delivery, time.Time) bool {
	return func(d Delivery, _ time.Time) bool { return d.Status == StatusSending && d.ClaimToken == tok }
}

func (m *Memory) live(tok string) func(Delivery, time.Time) bool {
	return func(d Delivery, now time.Time) bool {
		if d.Status.Terminal() || d.Status == StatusHeld {
			return false
		}
		return d.Status != StatusSending || (tok != "" && d.ClaimToken == tok) || d.LeaseUntil.Before(m.lapsedBefore(now))
	}
}

// byOld adapts a refusal reason to transition's signature.
func byOld(reason func(Delivery) error) func(Delivery, time.Time) error {
	return func(old Delivery, _ time.Time) error { return reason(old) }
}

// history appends e, trimming to the limit when held is this consumer's
// claimed copy, as the DynamoDB ledger does.
func (m *Memory) history(d *Delivery, held Delivery, e Entry, now time.Time) {
	e.At = Format(now)
	if held.ClaimToken != "" && len(held.History)+1 > m.cfg.HistoryLimit {
		d.History = append(slices.Clone(held.History[len(held.History)-(m.cfg.HistoryLimit-1):]), e)
		return
	}
	d.History = append(d.History, e)
}

func endLease(d *Delivery) {
	d.ClaimToken, d.LeaseUntil, d.NextAttemptAt = "", time.Time{}, time.Time{}
}

// Complete is Ledger.Complete.
func (m *Memory) Complete(_ context.Context, held Delivery, receipt string) (Delivery, error) {
	return m.transition("complete", held.Key(), holdsLease(held.ClaimToken), byOld(leaseRefusal), func(d *Delivery, now time.Time) {
		d.Status, d.SentAt, d.Receipt = StatusSent, now, text.Clip(receipt, MaxReceipt)
		endLease(d)
		m.history(d, held, Entry{Status: StatusSent, Attempt: held.Attempts, Note: text.Clip(receipt, 80)}, now)
	})
}

// Retry is Ledger.Retry.
func (m *Memory) Retry(_ context.Context, held Delivery, f Failure) (Delivery, error) {
	return m.transition("retry", held.Key(), holdsLease(held.ClaimToken), byOld(leaseRefusal), func(d *Delivery, now time.Time) {
		d.Status, d.LastErrorClass, d.LastError = StatusRetrying, f.Class, text.Clip(f.Message, 500)
		d.ClaimToken, d.LeaseUntil, d.NextAttemptAt = "", time.Time{}, ms(f.NextAttemptAt)
		m.history(d, held, Entry{Status: StatusRetrying, Attempt: held.Attempts, Class: f.Class, Note: RetryNote(now, ms(f.NextAttemptAt))}, now)
	})
}

// DeadLetter is Ledger.DeadLetter.
func (m *Memory) DeadLetter(_ context.Context, held Delivery, f Failure) (Delivery, error) {
	return m.transition("dead-letter", held.Key(), m.live(held.ClaimToken), byOld(liveRefusal), func(d *Delivery, now time.Time) {
		d.Status, d.LastErrorClass, d.LastError = StatusDead, f.Class, text.Clip(f.Message, 500)
		endLease(d)
		m.history(d, held, Entry{Status: StatusDead, Attempt: held.Attempts, Class: f.Class, Note: text.Clip(f.Message, 120)}, now)
	})
}

// Expire is Ledger.Expire.
func (m *Memory) Expire(_ context.Context, read Delivery) (Delivery, error) {
	return m.endUnsent("expire", read.Key(), StatusExpired, "expiresAt "+Format(read.ExpiresAt), expireRefusal)
}

// endUnsent is Ledger.endUnsent: one step, in which the unended attempt
// is read and said.
func (m *Memory) endUnsent(op string, key message.DeliveryKey, to Status, note string, refusal func(old Delivery, now, lapsedBefore time.Time) error) (Delivery, error) {
	return m.transition(op, key, func(d Delivery, now time.Time) bool {
		return refusal(d, now, m.lapsedBefore(now)) == nil
	}, func(old Delivery, now time.Time) error {
		return refusal(old, now, m.lapsedBefore(now))
	}, func(d *Delivery, now time.Time) {
		e := Entry{Status: to, Note: text.Clip(note, 120)}
		if n := d.unended(m.lapsedBefore(now)); n > 0 {
			e.Attempt, e.Class, e.Note = n, failure.ClassAmbiguous, text.Clip(UnendedNote(n)+"; "+note, 120)
			d.LastErrorClass = failure.ClassAmbiguous
		}
		d.Status = to
		endLease(d)
		m.history(d, Delivery{}, e, now)
	})
}

// Release is Ledger.Release.
func (m *Memory) Release(_ context.Context, key message.DeliveryKey, dueAt time.Time, note string) (Delivery, error) {
	return m.release("release", key, dueAt, note, func(d Delivery) bool {
		return d.Status == StatusPending || d.Status == StatusQueued || d.Status == StatusRetrying
	})
}

// GiveBack is Ledger.GiveBack.
func (m *Memory) GiveBack(_ context.Context, key message.DeliveryKey, dueAt time.Time, note string) (Delivery, error) {
	return m.release("give back", key, dueAt, note, func(d Delivery) bool {
		return d.Status == StatusPending && d.Attempts == 0
	})
}

// release is Release and GiveBack: from a state allowed takes, at dueAt.
func (m *Memory) release(op string, key message.DeliveryKey, dueAt time.Time, note string, allowed func(Delivery) bool) (Delivery, error) {
	m.t.mu.Lock()
	shards, err := m.shardCount()
	m.t.mu.Unlock()
	if err != nil {
		return Delivery{}, err
	}
	return m.transition(op, key, func(d Delivery, _ time.Time) bool {
		return allowed(d) && d.DueAt.Equal(ms(dueAt))
	}, byOld(releaseRefusal), func(d *Delivery, now time.Time) {
		d.Status = StatusPending
		// Back in the index at its new publish time (and in its shard again,
		// for one a revive took out of it).
		shard := ShardOf(key.ReminderID, shards)
		if d.Index != nil {
			shard = d.Index.Shard
		}
		pub := m.publishAt(dueAt, now)
		d.Index = &IndexPosition{Shard: shard, Sort: IndexSort(pub, key), PublishAt: pub}
		m.history(d, Delivery{}, Entry{Status: StatusPending, Note: text.Clip(note, 120)}, now)
	})
}

// Cancel is Ledger.Cancel.
func (m *Memory) Cancel(_ context.Context, key message.DeliveryKey, note string) (Delivery, error) {
	return m.endUnsent("cancel", key, StatusCancelled, note, cancelRefusal)
}

// Requeue is Ledger.Requeue.
func (m *Memory) Requeue(_ context.Context, read Delivery, note string) (Delivery, error) {
	return m.transition("requeue", read.Key(), func(d Delivery, _ time.Time) bool {
		return d.Status == read.Status && d.UpdatedAt.Equal(ms(read.UpdatedAt))
	}, byOld(requeueRefusal), func(d *Delivery, now time.Time) {
		if read.Status == StatusSending {
			d.UnendedAttempt = read.Attempts
		}
		d.Status = StatusQueued
		d.Repairs++
		m.history(d, Delivery{}, Entry{Status: StatusQueued, Attempt: read.Attempts, Note: text.Clip(note, 120)}, now)
	})
}

// Cursor is Ledger.Cursor.
func (m *Memory) Cursor(_ context.Context, shard int) (Cursor, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	c := m.t.cursors[shard]
	c.Trail = slices.Clone(c.Trail)
	return c, nil
}

// MoveCursor is Ledger.MoveCursor.
func (m *Memory) MoveCursor(_ context.Context, shard int, old, pos string, trail []Mark) (bool, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	if m.t.cursors[shard].Pos != old {
		return false, nil
	}
	var kept []Mark // nil for none, as DynamoDB reads it back
	for _, mk := range trail[max(0, len(trail)-MaxTrail):] {
		kept = append(kept, Mark{Pos: markPos(mk.Pos), At: ms(mk.At)})
	}
	m.t.cursors[shard] = Cursor{Pos: pos, MovedAt: m.now(), Trail: kept}
	return true, nil
}

// index returns shard's entries published at or before bound, after pos,
// in order; the caller holds the table's lock.
func (m *Memory) index(shard int, pos, bound string) []IndexEntry {
	var out []IndexEntry
	for k, d := range m.t.items {
		if d.Index == nil || d.Index.Shard != shard || d.Index.Sort <= pos || d.Index.Sort > bound {
			continue
		}
		out = append(out, IndexEntry{Key: k, Sort: d.Index.Sort, PublishAt: d.Index.PublishAt, DueAt: d.DueAt, ExpiresAt: d.ExpiresAt, HandedOff: d.Index.HandedOff})
	}
	slices.SortFunc(out, func(a, b IndexEntry) int { return cmp.Compare(a.Sort, b.Sort) })
	return out
}

// DueAfter is Ledger.DueAfter.
func (m *Memory) DueAfter(_ context.Context, shard int, pos string, upTo time.Time, limit int) ([]IndexEntry, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	es := m.index(shard, pos, sortBound(upTo))
	return es[:min(limit, len(es))], nil
}

// memoryPage is how many entries DueBy hands over at a time.
const memoryPage = 100

// DueBy is Ledger.DueBy.
func (m *Memory) DueBy(_ context.Context, shard int, by time.Time, page func([]IndexEntry) bool) (bool, error) {
	m.t.mu.Lock()
	es := m.index(shard, "", sortBound(by))
	m.t.mu.Unlock()
	for start := 0; start < len(es); start += memoryPage {
		end := min(start+memoryPage, len(es))
		if !page(es[start:end]) && end < len(es) {
			return false, nil
		}
	}
	if len(es) == 0 {
		page(nil)
	}
	return true, nil
}

// CreateReminder is Ledger.CreateReminder.
func (m *Memory) CreateReminder(_ context.Context, r ReminderItem) (ReminderItem, bool, error) {
	return m.createReminder(r, nil)
}

// CreateOccurrence is Ledger.CreateOccurrence.
func (m *Memory) CreateOccurrence(_ context.Context, r ReminderItem, at Start) (ReminderItem, bool, error) {
	if r.Series == "" {
		return ReminderItem{}, false, fmt.Errorf("ledger: occurrence %q names no series", r.ID)
	}
	return m.createReminder(r, &at)
}

func (m *Memory) createReminder(r ReminderItem, guard *Start) (ReminderItem, bool, error) {
	if err := checkTimes(r.ID, r.DueAt, r.ExpiresAt); err != nil {
		return ReminderItem{}, false, err
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	if guard != nil {
		s, ok := m.t.series[r.Series]
		if !ok || !s.Item.DueAt.Equal(ms(guard.DueAt)) || len(s.Starts) != guard.Restarts || !s.CancelledAt.IsZero() {
			return ReminderItem{}, false, fmt.Errorf("ledger: occurrence %q of series %q: %w", r.ID, r.Series, ErrSeriesMoved)
		}
	}
	if stored, ok := m.t.reminders[r.ID]; ok {
		return copyReminder(stored), true, nil
	}
	if _, ok := m.t.series[r.ID]; ok {
		return ReminderItem{}, false, fmt.Errorf("ledger: reminder %q: %w", r.ID, ErrSeriesID)
	}
	r = copyReminder(r)
	r.DueAt, r.ExpiresAt = ms(r.DueAt), ms(r.ExpiresAt)
	r.TTL = m.Expiry(r.ExpiresAt)
	m.t.reminders[r.ID] = r
	m.t.created[r.ID] = m.now()
	return copyReminder(r), false, nil
}

// ReadReminder is Ledger.ReadReminder.
func (m *Memory) ReadReminder(_ context.Context, id string) (Stored, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	var s Stored
	if r, ok := m.t.reminders[id]; ok {
		r = copyReminder(r)
		s.Reminder = &r
		s.keys = append(s.keys, reminderSK)
	}
	if sr, ok := m.t.series[id]; ok {
		sr = copySeries(sr)
		s.Series = &sr
		s.keys = append(s.keys, seriesSK)
	}
	for k, d := range m.t.items {
		if k.ReminderID == id {
			s.Deliveries = append(s.Deliveries, copyOf(d))
			s.keys = append(s.keys, SortKey(k.Channel, k.Provider))
		}
	}
	slices.SortFunc(s.Deliveries, func(a, b Delivery) int {
		return cmp.Compare(SortKey(a.Channel, a.Provider), SortKey(b.Channel, b.Provider))
	})
	return s, nil
}

func copyOf(d Delivery) Delivery {
	d.History = slices.Clone(d.History)
	d.FeedbackSeen = slices.Clone(d.FeedbackSeen)
	if d.Index != nil {
		i := *d.Index
		d.Index = &i
	}
	return d
}

func copyReminder(r ReminderItem) ReminderItem {
	r.Deliveries = slices.Clone(r.Deliveries)
	for i, d := range r.Deliveries {
		if d.Fallback != nil {
			f := *d.Fallback
			f.Within = f.Within.Truncate(time.Second) // as stored
			r.Deliveries[i].Fallback = &f
		}
	}
	r.Late.Within = r.Late.Within.Truncate(time.Second)
	r.Metadata = maps.Clone(r.Metadata)
	return r
}

// HandedOff is Ledger.HandedOff.
func (m *Memory) HandedOff(_ context.Context, d Delivery) (HandOff, error) {
	if d.Index == nil {
		return HandOff{}, nil
	}
	if d.Status != StatusPending || d.Index.HandedOff {
		return HandOff{Done: true, PublishAt: d.Index.PublishAt}, nil
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	pos := m.t.cursors[d.Index.Shard].Pos
	return HandOff{Done: pos != "" && d.Index.Sort <= pos, PublishAt: d.Index.PublishAt}, nil
}
