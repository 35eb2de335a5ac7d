package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/nudgehq/nudge/pkg/clock"
)

// Config configures a Limiter.
type Config struct {
	// PerSecond is the sustained rate, in sends per second. Required,
	// above 0.
	PerSecond float64
	// Burst is how many sends may go at once after a quiet spell. Default
	// 1: a send every 1/PerSecond.
	Burst int
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
	// Cold makes an idle limiter empty rather than full: its next token
	// comes one interval after the first Reserve. One of several limiters
	// that take turns at one share of a rate (a Lambda execution
	// environment among those an event source mapping's slot lands on)
	// then never adds a free send to what the last one sent.
	Cold bool
}

// Limiter is a token bucket. It is safe for concurrent use.
type Limiter struct {
	cfg      Config
	interval time.Duration // one token's worth of time
	mu       sync.Mutex
	// next is when the bucket is empty again: the time by which every
	// send reserved so far has its token. A send may start at
	// next − Burst·interval or later.
	next time.Time
}

// New validates cfg and returns a full Limiter.
func New(cfg Config) (*Limiter, error) {
	if !(cfg.PerSecond >= 1e-6) || math.IsInf(cfg.PerSecond, 0) || cfg.PerSecond > 1e6 {
		return nil, fmt.Errorf("ratelimit: rate %v per second is outside [0.000001, 1000000]", cfg.PerSecond)
	}
	if cfg.Burst < 0 {
		return nil, errors.New("ratelimit: a negative burst")
	}
	if cfg.Burst == 0 {
		cfg.Burst = 1
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Limiter{cfg: cfg, interval: time.Duration(float64(time.Second) / cfg.PerSecond)}, nil
}

// Reserve takes a token and returns how long to wait before using it; 0
// means send now. If the wait would exceed maxWait it takes nothing and
// returns the wait with ok false: the caller defers the send instead.
func (l *Limiter) Reserve(maxWait time.Duration) (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Clock.Now()
	burst := time.Duration(l.cfg.Burst) * l.interval
	if l.next.Before(now) {
		l.next = now // idle: the bucket is full
		if l.cfg.Cold {
			l.next = now.Add(burst) // idle: empty, and filling from now
		}
	}
	start := l.next.Add(-burst + l.interval) // the earliest this send's token exists
	wait = max(start.Sub(now), 0)
	if wait > maxWait {
		return wait, false
	}
	l.next = l.next.Add(l.interval)
	return wait, true
}

// Rate returns the limiter's rate per second.
func (l *Limiter) Rate() float64 { return l.cfg.PerSecond }

// Share is one instance's share of a stage-wide rate: the rate divided
// among the instances that may run at once (the event source mapping's
// maximum concurrency), so that together they never exceed it.
func Share(perSecond float64, instances int) float64 {
	if instances < 1 {
		instances = 1
	}
	return perSecond / float64(instances)
}
