package redrive

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

// The revive from the ledger (nudge ledger revive): for dead deliveries
// whose DLQ copy may be gone (the DLQ keeps a message 14 days), a
// reviewed, bounded batch goes back to the calendar from the ledger alone.

// reviveLedger is what a revive needs of the ledger.
type reviveLedger interface {
	ReadDead(ctx context.Context, q ledger.DeadQuery) (ledger.DeadPage, error)
	ReadReminder(ctx context.Context, id string) (ledger.Stored, error)
	Revive(ctx context.Context, d ledger.Delivery, r ledger.Revival) (ledger.Delivery, error)
}

var (
	_ reviveLedger = (*ledger.Ledger)(nil)
	_ reviveLedger = (*ledger.Memory)(nil)
)

// ReviveConfig configures a Reviver.
type ReviveConfig struct {
	// Ledger is read for the dead deliveries and revives them. Required.
	Ledger reviveLedger
	// By names who revives, and Reason why: both required, and kept in
	// each revived delivery's history (ledger.Revival).
	By, Reason string
	// DLQRetention is how long the DLQ keeps a message, to say which
	// deliveries may still have a copy there. Default
	// deployment.DLQRetention (14 days).
	DLQRetention time.Duration
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
}

// Reviver reviews the ledger's dead deliveries and revives a bounded batch.
type Reviver struct {
	cfg ReviveConfig
}

// NewReviver checks cfg and returns a Reviver.
func NewReviver(cfg ReviveConfig) (*Reviver, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("redrive: a revive needs the ledger")
	}
	if _, err := (ledger.Revival{By: cfg.By, Reason: cfg.Reason}).Note(); err != nil {
		return nil, fmt.Errorf("redrive: %w", err)
	}
	if cfg.DLQRetention == 0 {
		cfg.DLQRetention = deployment.DLQRetention
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Reviver{cfg: cfg}, nil
}

// Dead is one dead delivery of the ledger, reviewed.
type Dead struct {
	DeliveryKey string `json:"deliveryKey"`
	// ErrorClass and Reason are why it was dead-lettered (its last error).
	ErrorClass failure.Class `json:"errorClass"`
	Reason     string        `json:"reason"`
	// Attempts is the provider attempts the ledger counted.
	Attempts int `json:"attempts"`
	// DueAt and ExpiresAt are the reminder's times.
	DueAt     time.Time `json:"dueAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// DeadLetteredAt is when it became dead; AgeSeconds how long ago.
	DeadLetteredAt time.Time `json:"deadLetteredAt"`
	AgeSeconds     int64     `json:"ageSeconds"`
	// DLQCopyMayRemain is true for a delivery dead-lettered within the
	// DLQ's retention: its message may still be in the DLQ. A revive is
	// safe with it there (a redrive of it later sends nothing more), but
	// `nudge dlq redrive` is the usual way for those.
	DLQCopyMayRemain bool `json:"dlqCopyMayRemain"`
	// Why says why a delivery read was left out of the batch.
	Why string `json:"why,omitempty"`

	delivery ledger.Delivery
}

// Age returns how long ago it was dead-lettered.
func (d Dead) Age() time.Duration { return time.Duration(d.AgeSeconds) * time.Second }

// ReviveFilter bounds a revive.
type ReviveFilter struct {
	// Max is the most deliveries to revive. Required, 1 or more.
	Max int
	// Class keeps only deliveries dead-lettered with this error class.
	Class failure.Class
	// OlderThan keeps only deliveries dead-lettered at least this long ago.
	OlderThan time.Duration
	// Read is the most ledger items read to find them (the scan reads
	// every kind of item). Default DefaultReviveRead, at most
	// ledger.MaxDeadRead.
	Read int
	// After is an earlier plan's Next: read on from where it stopped.
	After string
	// Reminder keeps only the deliveries of this reminder, read from its
	// own items (one query) rather than a scan of the table; its
	// deliveries that are not dead are left, saying so. Read and After do
	// not apply.
	Reminder string
}

// DefaultReviveRead is how many ledger items a revive reads unless told
// otherwise: a strongly consistent scan of 10,000 items of up to 1 KB is
// at most 2,500 read units.
const DefaultReviveRead = 10_000

// reviveRead is how many items one ledger read asks for, so that a plan
// that reaches Max early stops reading.
const reviveRead = 1000

// RevivePlan is a revive, reviewed: what would be revived and what was
// left, and why.
type RevivePlan struct {
	// Chosen will be revived, the longest dead first.
	Chosen []Dead `json:"chosen"`
	// Left were read and not chosen, with Why.
	Left []Dead `json:"left"`
	// Scanned counts the ledger items read.
	Scanned int `json:"scanned"`
	// Full is true when the plan reached Max: more may be dead beyond what
	// was read; a later run finds them.
	Full bool `json:"full"`
	// Next is set when the read stopped at Read items before the table's
	// end: ReviveFilter.After = Next reads on from there.
	Next string `json:"next,omitempty"`
}

// Plan reads the ledger's dead deliveries, at most f.Read items from
// f.After on, and chooses up to f.Max that match the filters and have not
// expired (past its expiresAt, a delivery is never revived). It writes
// nothing.
func (r *Reviver) Plan(ctx context.Context, f ReviveFilter) (*RevivePlan, error) {
	if f.Max < 1 {
		return nil, fmt.Errorf("redrive: revive --max %d; a revive is a bounded batch: give 1 or more", f.Max)
	}
	if f.Read == 0 {
		f.Read = DefaultReviveRead
	}
	if f.Read < 1 || f.Read > ledger.MaxDeadRead {
		return nil, fmt.Errorf("redrive: revive reads %d items; read 1 to %d", f.Read, ledger.MaxDeadRead)
	}
	now := r.cfg.Clock.Now()
	p := &RevivePlan{}
	if f.Reminder != "" {
		return r.planReminder(ctx, f, now)
	}
	after := f.After
	for p.Scanned < f.Read && !p.Full {
		page, err := r.cfg.Ledger.ReadDead(ctx, ledger.DeadQuery{Read: min(reviveRead, f.Read-p.Scanned), After: after})
		if err != nil {
			return nil, fmt.Errorf("redrive: revive: %w", err)
		}
		p.Scanned += page.Scanned
		var read []Dead
		for _, d := range page.Deliveries {
			read = append(read, r.review(d, now))
		}
		sort.SliceStable(read, func(i, j int) bool { return read[i].DeadLetteredAt.Before(read[j].DeadLetteredAt) })
		for _, d := range read {
			p.choose(d, f, now)
		}
		after, p.Next = page.Next, page.Next
		if page.Next == "" {
			break // the table's end
		}
	}
	if p.Full {
		p.Next = "" // a later run reads from the start: the revived are no longer dead
	}
	sort.SliceStable(p.Chosen, func(i, j int) bool { return p.Chosen[i].DeadLetteredAt.Before(p.Chosen[j].DeadLetteredAt) })
	return p, nil
}

// choose adds d to the plan's chosen, or to its left with why.
func (p *RevivePlan) choose(d Dead, f ReviveFilter, now time.Time) {
	switch {
	case !d.ExpiresAt.After(now):
		d.Why = "expired " + ledger.Format(d.ExpiresAt) + ": past its expiresAt a delivery is never revived (schedule a new reminder if it still matters)"
	case !d.delivery.FallbackTaken.IsZero():
		// The ledger refuses it (ErrFallbackTaken): said before, not after.
		d.Why = ledger.FallbackTakenNote(d.delivery) + "; not revived"
	case f.Class != "" && d.ErrorClass != f.Class:
		d.Why = "error class " + string(d.ErrorClass) + ", not " + string(f.Class)
	case d.Age() < f.OlderThan:
		d.Why = fmt.Sprintf("dead-lettered %v ago, not older than %v", d.Age(), f.OlderThan)
	case len(p.Chosen) >= f.Max:
		d.Why = "beyond --max"
		p.Full = true
	default:
		p.Chosen = append(p.Chosen, d)
		p.Full = len(p.Chosen) >= f.Max
		return
	}
	p.Left = append(p.Left, d)
}

// planReminder is Plan for one reminder's deliveries (f.Reminder), read
// from its items; those not dead are left, saying so.
func (r *Reviver) planReminder(ctx context.Context, f ReviveFilter, now time.Time) (*RevivePlan, error) {
	stored, err := r.cfg.Ledger.ReadReminder(ctx, f.Reminder)
	if err != nil {
		return nil, fmt.Errorf("redrive: revive %q: %w", f.Reminder, err)
	}
	p := &RevivePlan{Scanned: len(stored.Deliveries)}
	var read []Dead
	for _, d := range stored.Deliveries {
		d.Address, d.TemplateData = "", nil // as ReadDead: a revive does not need them
		read = append(read, r.review(d, now))
	}
	sort.SliceStable(read, func(i, j int) bool { return read[i].DeadLetteredAt.Before(read[j].DeadLetteredAt) })
	for _, d := range read {
		if st := d.delivery.Status; st != ledger.StatusDead {
			d.Why = "not dead (" + string(st) + "); nothing to revive"
			p.Left = append(p.Left, d)
			continue
		}
		p.choose(d, f, now)
	}
	p.Full = false // the reminder was read whole
	return p, nil
}

// review is d, read at now, as a plan shows it.
func (r *Reviver) review(d ledger.Delivery, now time.Time) Dead {
	at := d.UpdatedAt
	h := d.Transitions() // a feedback entry on a dead delivery says dead too, at the feedback's time
	for i := len(h) - 1; i >= 0; i-- {
		if e := h[i]; e.Status == ledger.StatusDead {
			if t, err := time.Parse(time.RFC3339Nano, e.At); err == nil {
				at = t.UTC()
			}
			break
		}
	}
	age := now.Sub(at)
	return Dead{
		DeliveryKey: d.Key().String(), ErrorClass: d.LastErrorClass, Reason: d.LastError, Attempts: d.Attempts,
		DueAt: d.DueAt, ExpiresAt: d.ExpiresAt, DeadLetteredAt: at, AgeSeconds: int64(age / time.Second),
		DLQCopyMayRemain: age < r.cfg.DLQRetention, delivery: d,
	}
}

// ReviveOutcome is what Apply did with one delivery.
type ReviveOutcome struct {
	Dead
	// Revived is true once the ledger has it pending, in the calendar.
	Revived bool `json:"revived"`
	// PublishAt is when the enqueue may hand it to the queue.
	PublishAt time.Time `json:"publishAt,omitempty"`
	// Problem says what went wrong, if anything.
	Problem string `json:"problem,omitempty"`
}

// ReviveResult is what Apply did.
type ReviveResult struct {
	Outcomes []ReviveOutcome `json:"outcomes"`
	Revived  int             `json:"revived"`
	Skipped  int             `json:"skipped"`
	Failed   int             `json:"failed"`
}

// Apply revives the plan's chosen deliveries, one conditional write each,
// recorded with who and why. A delivery that changed since the plan read
// it (revived or redriven by someone else, claimed by a DLQ copy, dead
// again, sent) is skipped, with why. It stops when ctx ends.
func (r *Reviver) Apply(ctx context.Context, p *RevivePlan, progress func(ReviveOutcome)) (ReviveResult, error) {
	var res ReviveResult
	for i, d := range p.Chosen {
		if ctx.Err() != nil {
			return res, fmt.Errorf("redrive: revive stopped after %d of %d deliveries; the rest stay dead: %w", i, len(p.Chosen), ctx.Err())
		}
		o := ReviveOutcome{Dead: d}
		got, err := r.cfg.Ledger.Revive(ctx, d.delivery, ledger.Revival{By: r.cfg.By, Reason: r.cfg.Reason})
		var re *ledger.RefusedError
		switch {
		case err == nil:
			o.Revived = true
			if got.Index != nil {
				o.PublishAt = got.Index.PublishAt
			}
			res.Revived++
		case errors.Is(err, ledger.ErrFallbackTaken) && errors.As(err, &re):
			o.Why = ledger.FallbackTakenNote(re.Current) + "; not revived"
			res.Skipped++
		case errors.As(err, &re):
			o.Why = "changed since it was read: " + re.Reason.Error()
			if re.Current.Status != "" {
				o.Why += " (now " + string(re.Current.Status) + ")"
			}
			res.Skipped++
		default:
			o.Problem = "could not revive it: " + err.Error()
			res.Failed++
		}
		res.Outcomes = append(res.Outcomes, o)
		if progress != nil {
			progress(o)
		}
	}
	return res, nil
}
