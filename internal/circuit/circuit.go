package circuit

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

// State is a circuit's state.
type State int

// The states.
const (
	// Closed: sends go through; unwell answers are counted.
	Closed State = iota
	// Open: sends are refused until the cool-down is over.
	Open
	// HalfOpen: one send, the probe, is out or may start; others are
	// refused.
	HalfOpen
)

// String names the state as logs and metrics do: closed, open, half-open.
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Verdict is what one send says about the provider's health.
type Verdict int

// The verdicts.
const (
	// Neutral says nothing: the send did not reach the provider, or
	// failed for a reason of its own delivery.
	Neutral Verdict = iota
	// Healthy: the provider accepted the send.
	Healthy
	// Unwell: the provider hung, could not be reached or failed.
	Unwell
)

// Judge is the verdict of a send that failed with outcome o (a success is
// Healthy): see the package documentation for why each counts as it does.
func Judge(o failure.Outcome) Verdict {
	if o.Kind == failure.KindAmbiguous {
		return Unwell // no answer: a timeout, a connection lost after the request
	}
	if o.Kind != failure.KindRetry {
		return Neutral // permanent: this delivery's own problem
	}
	switch o.Class {
	case failure.ClassServer, failure.ClassTimeout, failure.ClassNetwork, failure.ClassPaused:
		return Unwell
	}
	return Neutral // throttled, unknown, an AWS error of the request
}

// Config configures a Breaker. Every duration's default is the one the
// consumer uses.
type Config struct {
	// Name is the provider's, carried in each Change.
	Name string
	// Failures is how many unwell verdicts in a row open the circuit.
	// Default 5.
	Failures int
	// CoolDown is how long the circuit stays open after it opens, before
	// its first probe. Default 30s.
	CoolDown time.Duration
	// MaxCoolDown bounds the cool-down, which doubles each time a probe
	// is unwell. Default 5m; at least CoolDown.
	MaxCoolDown time.Duration
	// ProbeTimeout is how long a probe may be out before it counts as lost
	// and another may start; callers refused while the probe is out come
	// back after it. Set it to a send's longest time (the provider timeout
	// and the ledger writes). Default 11s.
	ProbeTimeout time.Duration
	// OnChange is called after each change of state, outside the lock, by
	// the goroutine that made it. Nil: none.
	OnChange func(Change)
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
}

// Change is one change of a circuit's state.
type Change struct {
	Name     string
	From, To State
	// At is when it changed.
	At time.Time
	// Until is when the next probe may start, if To is Open.
	Until time.Time
	// CoolDown is the cool-down that began, if To is Open.
	CoolDown time.Duration
	// Failures is the run of unwell verdicts that opened the circuit,
	// when it opened from Closed.
	Failures int
}

// Breaker is one provider's circuit. It is safe for concurrent use.
type Breaker struct {
	cfg Config

	mu         sync.Mutex
	state      State
	gen        uint64 // changes with every state change and every new probe
	failures   int    // unwell verdicts in a row, while closed
	coolDown   time.Duration
	until      time.Time // open: when the probe may start
	probeOut   bool      // half-open: a probe is out
	probeSince time.Time
}

// New validates cfg, applies its defaults and returns a closed Breaker.
func New(cfg Config) (*Breaker, error) {
	if cfg.Failures == 0 {
		cfg.Failures = 5
	}
	if cfg.CoolDown == 0 {
		cfg.CoolDown = 30 * time.Second
	}
	if cfg.MaxCoolDown == 0 {
		cfg.MaxCoolDown = max(5*time.Minute, cfg.CoolDown)
	}
	if cfg.ProbeTimeout == 0 {
		cfg.ProbeTimeout = 11 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	switch {
	case cfg.Failures < 1:
		return nil, fmt.Errorf("circuit %s: %d failures open the circuit; use 1 or more", cfg.Name, cfg.Failures)
	case cfg.CoolDown < 0 || cfg.ProbeTimeout < 0:
		return nil, fmt.Errorf("circuit %s: a negative cool-down (%v) or probe timeout (%v)", cfg.Name, cfg.CoolDown, cfg.ProbeTimeout)
	case cfg.MaxCoolDown < cfg.CoolDown:
		return nil, fmt.Errorf("circuit %s: the longest cool-down %v is below the first %v; raise it", cfg.Name, cfg.MaxCoolDown, cfg.CoolDown)
	}
	return &Breaker{cfg: cfg, coolDown: cfg.CoolDown}, nil
}

// ErrOpen is the reason a refused send gives.
var ErrOpen = errors.New("provider circuit open")

// State returns the circuit's state now (an open circuit whose cool-down
// is over reads HalfOpen).
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Open && !b.cfg.Clock.Now().Before(b.until) {
		return HalfOpen
	}
	return b.state
}

// Admit asks whether one send may start now. If it may, the Ticket must
// be ended with Record (once the send has an answer) or Release (if it
// never reached the provider). If it may not, retryAt is when it is worth
// asking again: the next probe's time, or the end of the probe out now.
func (b *Breaker) Admit() (t *Ticket, retryAt time.Time, ok bool) {
	var ch *Change
	defer func() { b.notify(ch) }()
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Clock.Now()
	switch b.state {
	case Closed:
		return &Ticket{b: b, gen: b.gen}, time.Time{}, true
	case Open:
		if now.Before(b.until) {
			return nil, b.until, false
		}
		ch = b.set(HalfOpen, now)
	}
	// Half-open: one probe at a time; a probe out longer than
	// ProbeTimeout is lost (its verdict will be ignored).
	if b.probeOut && now.Before(b.probeSince.Add(b.cfg.ProbeTimeout)) {
		return nil, b.probeSince.Add(b.cfg.ProbeTimeout), false
	}
	b.gen++
	b.probeOut, b.probeSince = true, now
	return &Ticket{b: b, gen: b.gen, probe: true}, time.Time{}, true
}

// set changes the state (mu held) and returns the Change to report.
func (b *Breaker) set(to State, now time.Time) *Change {
	ch := &Change{Name: b.cfg.Name, From: b.state, To: to, At: now}
	b.state = to
	b.gen++
	b.probeOut = false
	switch to {
	case Open:
		b.until = now.Add(b.coolDown)
		ch.Until, ch.CoolDown = b.until, b.coolDown
		if ch.From == Closed {
			ch.Failures = b.failures
		}
	case Closed:
		b.coolDown = b.cfg.CoolDown
	}
	b.failures = 0
	return ch
}

func (b *Breaker) notify(ch *Change) {
	if ch != nil && b.cfg.OnChange != nil {
		b.cfg.OnChange(*ch)
	}
}

// record applies ticket t's verdict.
func (b *Breaker) record(t *Ticket, v Verdict) {
	var ch *Change
	defer func() { b.notify(ch) }()
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen != b.gen {
		return // admitted before the last change: says nothing now
	}
	now := b.cfg.Clock.Now()
	switch {
	case t.probe && v == Healthy:
		ch = b.set(Closed, now)
	case t.probe && v == Unwell:
		b.coolDown = min(2*b.coolDown, b.cfg.MaxCoolDown)
		ch = b.set(Open, now)
	case t.probe: // never reached the provider: the next caller probes
		b.probeOut = false
	case v == Healthy:
		b.failures = 0
	case v == Unwell:
		b.failures++
		if b.failures >= b.cfg.Failures {
			ch = b.set(Open, now)
		}
	}
}

// Ticket is one admitted send.
type Ticket struct {
	b     *Breaker
	gen   uint64
	probe bool
	once  sync.Once
}

// Probe reports whether the send is the half-open circuit's probe.
func (t *Ticket) Probe() bool { return t.probe }

// Record ends the ticket with the send's verdict. Only the first of
// Record and Release counts.
func (t *Ticket) Record(v Verdict) {
	t.once.Do(func() { t.b.record(t, v) })
}

// Release ends a ticket whose send never reached the provider: Neutral.
// After Record it does nothing, so it may be deferred.
func (t *Ticket) Release() { t.Record(Neutral) }
