package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/message"
	"github.com/nudgehq/nudge/pkg/text"
)

// Store is what a delivery ledger offers; *ledger.Ledger and *Memory
// implement it.
type Store interface {
	Create(ctx context.Context, d ledger.Delivery) error
	Get(ctx context.Context, key message.DeliveryKey) (ledger.Delivery, error)
	Claim(ctx context.Context, c ledger.Claim) (ledger.Delivery, error)
	Complete(ctx context.Context, d ledger.Delivery, receipt string) (ledger.Delivery, error)
	Retry(ctx context.Context, d ledger.Delivery, f ledger.Failure) (ledger.Delivery, error)
	DeadLetter(ctx context.Context, d ledger.Delivery, f ledger.Failure) (ledger.Delivery, error)
	Expire(ctx context.Context, d ledger.Delivery) (ledger.Delivery, error)
	Release(ctx context.Context, key message.DeliveryKey, dueAt time.Time, note string) (ledger.Delivery, error)
	Cancel(ctx context.Context, key message.DeliveryKey, note string) (ledger.Delivery, error)
	Requeue(ctx context.Context, d ledger.Delivery, note string) (ledger.Delivery, error)
}

var (
	_ Store = (*ledger.Ledger)(nil)
	_ Store = (*Memory)(nil)
)

// Memory is an in-memory ledger with the same conditions, refusals and
// history bound as the DynamoDB ledger. It is safe for concurrent use.
type Memory struct {
	clk   clock.Clock
	limit int

	mu    sync.Mutex
	items map[message.DeliveryKey]ledger.Delivery
}

// NewMemory returns an empty Memory ledger keeping historyLimit entries
// (0: the ledger's default of 8).
func NewMemory(clk clock.Clock, historyLimit int) *Memory {
	if historyLimit == 0 {
		historyLimit = 8
	}
	return &Memory{clk: clk, limit: historyLimit, items: map[message.DeliveryKey]ledger.Delivery{}}
}

// ended sets what every terminal transition sets. (Its TTL was set when it
// was created.)
func ended(d *ledger.Delivery, _ time.Time) {
	d.NextAttemptAt = time.Time{}
	endLease(d)
}

// ms truncates to the stored precision.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

func (m *Memory) now() time.Time { return ms(m.clk.Now()) }

// Create adds a delivery unless its key exists.
func (m *Memory) Create(_ context.Context, d ledger.Delivery) error {
	if err := d.Key().Validate(); err != nil {
		return fmt.Errorf("ledger: create: %w", err)
	}
	if d.DueAt.IsZero() || d.ExpiresAt.IsZero() || !d.ExpiresAt.After(d.DueAt) {
		return fmt.Errorf("ledger: create %s: dueAt and expiresAt must be set and expiresAt after dueAt", d.Key())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.items[d.Key()]; ok {
		return &ledger.RefusedError{Op: "create", Key: d.Key(), Reason: ledger.ErrExists, Current: copyOf(cur)}
	}
	now := m.now()
	if d.Status == "" {
		d.Status = ledger.StatusPending
	}
	d.DueAt, d.ExpiresAt, d.UpdatedAt = ms(d.DueAt), ms(d.ExpiresAt), now
	if len(d.History) == 0 {
		d.History = []ledger.Entry{{At: ledger.Format(now), Status: d.Status}}
	}
	d.TTL = ledger.Expiry(time.Time{}, d.ExpiresAt, ledger.DefaultRetention)
	if d.Status.Terminal() {
		d.TTL = ledger.Expiry(now, d.ExpiresAt, ledger.DefaultRetention)
	}
	m.items[d.Key()] = copyOf(d)
	return nil
}

// Get returns a delivery.
func (m *Memory) Get(_ context.Context, key message.DeliveryKey) (ledger.Delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.items[key]
	if !ok {
		return ledger.Delivery{}, &ledger.RefusedError{Op: "get", Key: key, Reason: ledger.ErrNotFound}
	}
	return copyOf(d), nil
}

// transition applies change to the item at key if guard allows it, else
// returns the refusal that reason gives.
func (m *Memory) transition(op string, key message.DeliveryKey, guard func(d ledger.Delivery, now time.Time) bool,
	reason func(old ledger.Delivery, now time.Time) error, change func(d *ledger.Delivery, now time.Time)) (ledger.Delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	d, ok := m.items[key]
	if !ok {
		return ledger.Delivery{}, &ledger.RefusedError{Op: op, Key: key, Reason: ledger.ErrNotFound}
	}
	if !guard(d, now) {
		return ledger.Delivery{}, &ledger.RefusedError{Op: op, Key: key, Reason: reason(d, now), Current: copyOf(d)}
	}
	d = copyOf(d)
	change(&d, now)
	d.UpdatedAt = now
	m.items[key] = d
	return copyOf(d), nil
}

// Claim starts an attempt; see ledger.Ledger.Claim.
func (m *Memory) Claim(_ context.Context, c ledger.Claim) (ledger.Delivery, error) {
	if c.Token == "" {
		return ledger.Delivery{}, errors.New("ledger: claim without a token")
	}
	dueBy := ms(c.DueBy)
	claim := func(revive bool) (ledger.Delivery, error) {
		return m.transition("claim", c.Key, func(d ledger.Delivery, now time.Time) bool {
			claimable := !revive && slices.Contains([]ledger.Status{ledger.StatusPending, ledger.StatusQueued, ledger.StatusRetrying}, d.Status) ||
				revive && d.Status == ledger.StatusDead || !revive && d.Status == ledger.StatusSending && d.LeaseUntil.Before(now)
			return claimable && !d.DueAt.After(dueBy) && d.ExpiresAt.After(now)
		}, func(old ledger.Delivery, now time.Time) error {
			return ledger.ClaimRefusal(old, now, now, dueBy, revive)
		}, func(d *ledger.Delivery, now time.Time) {
			if revive {
				d.BudgetFrom = d.Attempts
			}
			d.Status, d.ClaimToken, d.LeaseUntil = ledger.StatusSending, c.Token, ms(c.LeaseUntil)
			d.Attempts++
			d.History = append(d.History, ledger.Entry{At: ledger.Format(now), Status: ledger.StatusSending})
		})
	}
	d, err := claim(false)
	var re *ledger.RefusedError
	if c.Revive && errors.As(err, &re) && re.Current.Status == ledger.StatusDead {
		return claim(true)
	}
	return d, err
}

func holdsLease(tok string) func(ledger.Delivery, time.Time) bool {
	return func(d ledger.Delivery, _ time.Time) bool {
		return d.Status == ledger.StatusSending && d.ClaimToken == tok
	}
}

func live(tok string) func(ledger.Delivery, time.Time) bool {
	return func(d ledger.Delivery, now time.Time) bool {
		if d.Status.Terminal() {
			return false
		}
		return d.Status != ledger.StatusSending || (tok != "" && d.ClaimToken == tok) || d.LeaseUntil.Before(now)
	}
}

// byOld adapts a ledger refusal reason to transition's signature.
func byOld(reason func(ledger.Delivery) error) func(ledger.Delivery, time.Time) error {
	return func(old ledger.Delivery, _ time.Time) error { return reason(old) }
}

// history appends e, trimming to the limit when held is this consumer's
// claimed copy, as the DynamoDB ledger does.
func (m *Memory) history(d *ledger.Delivery, held ledger.Delivery, e ledger.Entry, now time.Time) {
	e.At = ledger.Format(now)
	if held.ClaimToken != "" && len(held.History)+1 > m.limit {
		d.History = append(slices.Clone(held.History[len(held.History)-(m.limit-1):]), e)
		return
	}
	d.History = append(d.History, e)
}

func endLease(d *ledger.Delivery) { d.ClaimToken, d.LeaseUntil = "", time.Time{} }

// Complete records a send; see ledger.Ledger.Complete.
func (m *Memory) Complete(_ context.Context, held ledger.Delivery, receipt string) (ledger.Delivery, error) {
	return m.transition("complete", held.Key(), holdsLease(held.ClaimToken), byOld(ledger.LeaseRefusal), func(d *ledger.Delivery, now time.Time) {
		d.Status, d.SentAt, d.Receipt = ledger.StatusSent, now, text.Clip(receipt, ledger.MaxReceipt)
		ended(d, now)
		m.history(d, held, ledger.Entry{Status: ledger.StatusSent, Attempt: held.Attempts, Note: receipt}, now)
	})
}

// Retry records a transient failure; see ledger.Ledger.Retry.
func (m *Memory) Retry(_ context.Context, held ledger.Delivery, f ledger.Failure) (ledger.Delivery, error) {
	return m.transition("retry", held.Key(), holdsLease(held.ClaimToken), byOld(ledger.LeaseRefusal), func(d *ledger.Delivery, now time.Time) {
		d.Status, d.LastErrorClass, d.LastError, d.NextAttemptAt = ledger.StatusRetrying, f.Class, f.Message, ms(f.NextAttemptAt)
		endLease(d)
		m.history(d, held, ledger.Entry{Status: ledger.StatusRetrying, Attempt: held.Attempts, Class: f.Class, Note: ledger.RetryNote(now, ms(f.NextAttemptAt))}, now)
	})
}

// DeadLetter records that a delivery will not be retried; see
// ledger.Ledger.DeadLetter.
func (m *Memory) DeadLetter(_ context.Context, held ledger.Delivery, f ledger.Failure) (ledger.Delivery, error) {
	return m.transition("dead-letter", held.Key(), live(held.ClaimToken), byOld(ledger.LiveRefusal), func(d *ledger.Delivery, now time.Time) {
		d.Status, d.LastErrorClass, d.LastError = ledger.StatusDead, f.Class, f.Message
		ended(d, now)
		m.history(d, held, ledger.Entry{Status: ledger.StatusDead, Attempt: held.Attempts, Class: f.Class, Note: f.Message}, now)
	})
}

// Expire records that a delivery passed its expiresAt; see
// ledger.Ledger.Expire.
func (m *Memory) Expire(_ context.Context, held ledger.Delivery) (ledger.Delivery, error) {
	return m.transition("expire", held.Key(), live(held.ClaimToken), byOld(ledger.LiveRefusal), func(d *ledger.Delivery, now time.Time) {
		d.Status = ledger.StatusExpired
		ended(d, now)
		m.history(d, held, ledger.Entry{Status: ledger.StatusExpired, Attempt: held.Attempts, Note: "expiresAt " + ledger.Format(held.ExpiresAt)}, now)
	})
}

// Release hands a delivery back to the calendar; see ledger.Ledger.Release.
func (m *Memory) Release(_ context.Context, key message.DeliveryKey, dueAt time.Time, note string) (ledger.Delivery, error) {
	return m.transition("release", key, func(d ledger.Delivery, _ time.Time) bool {
		return (d.Status == ledger.StatusPending || d.Status == ledger.StatusQueued || d.Status == ledger.StatusRetrying) && d.DueAt.Equal(ms(dueAt))
	}, byOld(ledger.ReleaseRefusal), func(d *ledger.Delivery, now time.Time) {
		d.Status = ledger.StatusPending
		m.history(d, ledger.Delivery{}, ledger.Entry{Status: ledger.StatusPending, Note: note}, now)
	})
}

// Cancel ends an unsent delivery; see ledger.Ledger.Cancel.
func (m *Memory) Cancel(_ context.Context, key message.DeliveryKey, note string) (ledger.Delivery, error) {
	return m.transition("cancel", key, live(""), byOld(ledger.LiveRefusal), func(d *ledger.Delivery, now time.Time) {
		d.Status = ledger.StatusCancelled
		ended(d, now)
		m.history(d, ledger.Delivery{}, ledger.Entry{Status: ledger.StatusCancelled, Note: note}, now)
	})
}

// Requeue records a repeated hand-off of a delivery as read; see
// ledger.Ledger.Requeue.
func (m *Memory) Requeue(_ context.Context, read ledger.Delivery, note string) (ledger.Delivery, error) {
	return m.transition("requeue", read.Key(), func(d ledger.Delivery, _ time.Time) bool {
		return d.Status == read.Status && d.UpdatedAt.Equal(ms(read.UpdatedAt))
	}, byOld(ledger.RequeueRefusal), func(d *ledger.Delivery, now time.Time) {
		d.Status = ledger.StatusQueued
		m.history(d, ledger.Delivery{}, ledger.Entry{Status: ledger.StatusQueued, Attempt: read.Attempts, Note: note}, now)
	})
}

func copyOf(d ledger.Delivery) ledger.Delivery {
	d.History = slices.Clone(d.History)
	return d
}
