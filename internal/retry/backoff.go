package retry

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// MaxDelay is the longest delay SQS can apply to a received message: its
// visibility timeout cannot exceed 12 hours.
const MaxDelay = 12 * time.Hour

// Backoff is the retry policy. The zero value is not usable: call New.
type Backoff struct {
	base, cap time.Duration
	rand      func() float64
}

// Config configures a Backoff.
type Config struct {
	// Base is the delay ceiling after the first attempt; it doubles with each
	// attempt. Default 15s.
	Base time.Duration
	// Cap bounds every delay, including a Retry-After. Default 6h; at most
	// 12h (MaxDelay).
	Cap time.Duration
	// Rand returns a uniform number in [0, 1); default math/rand/v2.Float64.
	// Tests inject a fixed source.
	Rand func() float64
}

// New validates cfg, applies its defaults and returns the policy.
func New(cfg Config) (*Backoff, error) {
	if cfg.Base == 0 {
		cfg.Base = 15 * time.Second
	}
	if cfg.Cap == 0 {
		cfg.Cap = 6 * time.Hour
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	switch {
	case cfg.Base < time.Second:
		return nil, fmt.Errorf("retry: base %v is below 1s, the granularity of SQS visibility; raise it", cfg.Base)
	case cfg.Cap < cfg.Base:
		return nil, fmt.Errorf("retry: cap %v is below base %v; raise the cap", cfg.Cap, cfg.Base)
	case cfg.Cap > MaxDelay:
		return nil, fmt.Errorf("retry: cap %v is above %v, the longest SQS visibility timeout; lower it", cfg.Cap, MaxDelay)
	}
	return &Backoff{base: cfg.Base, cap: cfg.Cap, rand: cfg.Rand}, nil
}

// Ceiling returns the largest delay after the given attempt (1 is the first):
// min(cap, base·2^(attempt-1)).
func (b *Backoff) Ceiling(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := b.base
	for i := 1; i < attempt; i++ {
		if d >= b.cap/2 {
			return b.cap
		}
		d *= 2
	}
	return min(d, b.cap)
}

// Delay returns the delay before the next attempt: a uniform draw from
// [1s, Ceiling(attempt)] (full jitter), raised to retryAfter when the server
// asked for more, and never above the cap.
func (b *Backoff) Delay(attempt int, retryAfter time.Duration) time.Duration {
	return Jitter(b.Ceiling(attempt), retryAfter, b.cap, b.rand())
}

// Jitter applies full jitter to ceiling with the uniform number r in [0, 1),
// then honours retryAfter, bounded by limit. The result is whole seconds, at
// least 1s, as SQS visibility timeouts are.
func Jitter(ceiling, retryAfter, limit time.Duration, r float64) time.Duration {
	d := time.Duration(r * float64(ceiling))
	if retryAfter > d {
		d = retryAfter
	}
	d = min(d, limit)
	d = d.Round(time.Second)
	if d < time.Second {
		d = time.Second
	}
	return d
}
