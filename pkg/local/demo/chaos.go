package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/local/standin"
)

// instance is one consumer under the emulator, as the event source mapping
// invokes it, marked busy while an invocation runs so that a kill can land
// in the middle of a batch.
type instance struct {
	*standin.Lambda
	name string // "consumer-1", also the path it posts to the provider on
	busy atomic.Bool
}

// Invoke runs one invocation.
func (i *instance) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	i.busy.Store(true)
	defer i.busy.Store(false)
	out, err := i.Lambda.Invoke(ctx, payload)
	if err != nil && i.Exited() {
		// Not the runtime (the kills' target) but its emulator: every
		// invocation after this fails at once.
		err = fmt.Errorf("%s: the emulator itself has exited (see its log): %w", i.name, err)
	}
	return out, err
}

// kill is one consumer runtime killed mid-batch.
type kill struct {
	instance string
	at       time.Time
}

// killer kills consumer runtimes in the middle of batches, Config.Kills
// times: the k-th kill waits until the provider has accepted k/(Kills+1)
// of the deliveries the plan sends, then picks an instance that is running
// a batch and kills its runtime a random 0–50 ms later, if it is still
// running it. The emulator answers that invocation with an error, as
// Lambda does, so the whole batch returns after the visibility timeout, and
// starts a new runtime for the next.
func (s *system) killer(ctx context.Context) {
	if s.cfg.Kills == 0 {
		return
	}
	rnd := rand.New(rand.NewPCG(uint64(s.cfg.Seed), 0x6b696c6c))
	pause := pauser(ctx)
	for k := 1; k <= s.cfg.Kills; k++ {
		if !s.waitForShare(pause, k, s.cfg.Kills) {
			return
		}
		for {
			var busy []*instance
			for _, in := range s.consumers {
				if in.busy.Load() {
					busy = append(busy, in)
				}
			}
			if len(busy) > 0 {
				in := busy[rnd.IntN(len(busy))]
				if !pause(time.Duration(rnd.Int64N(int64(50 * time.Millisecond)))) {
					return
				}
				if in.busy.Load() && in.KillRuntime() == nil {
					s.mu.Lock()
					s.kills = append(s.kills, kill{instance: in.name, at: time.Now()})
					s.mu.Unlock()
					break
				}
			}
			if !pause(5 * time.Millisecond) {
				return
			}
		}
	}
}

// killedDuring reports whether the instance that path names was killed
// while the invocation that sent a request arriving at t could still be
// running: from just before t (a request in flight when its sender died
// arrives after) to the consumer's timeout after it. A repeat of a delivery
// whose acceptance was answered to an instance killed before it recorded
// the send is the duplicate a provider without idempotency keys would
// deliver; any other repeat is a violation.
func (s *system) killedDuring(path string, t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, to := t.Add(-100*time.Millisecond), t.Add(s.cfg.ConsumerTimeout)
	for _, k := range s.kills {
		if path == "/deliveries/"+k.instance && k.at.After(from) && k.at.Before(to) {
			return true
		}
	}
	return false
}

// enqueueKiller kills the enqueue's runtime in the middle of runs,
// Config.EnqueueKills times, spread over the run as the consumer kills
// are: the k-th waits until the provider has accepted k/(EnqueueKills+1) of
// what the plan sends, then for a run in progress, and kills its runtime
// 0–20 ms into it. The run fails as a whole; the next tick's run resumes
// from the cursors, and what this one published without recording it is
// published again (a duplicate the consumer recognises).
func (s *system) enqueueKiller(ctx context.Context) {
	if s.cfg.EnqueueKills == 0 {
		return
	}
	rnd := rand.New(rand.NewPCG(uint64(s.cfg.Seed), 0x656e71))
	pause := pauser(ctx)
	for k := 1; k <= s.cfg.EnqueueKills; k++ {
		if !s.waitForShare(pause, k, s.cfg.EnqueueKills) {
			return
		}
		for !s.enqueue.busy.Load() {
			if !pause(2 * time.Millisecond) {
				return
			}
		}
		if !pause(time.Duration(rnd.Int64N(int64(20 * time.Millisecond)))) {
			return
		}
		if age, err := s.enqueue.RuntimeAge(); err != nil || age < standin.MinRuntimeAge {
			// Too young for the emulator to take a kill: try again, without
			// counting a kill that a run starting now would take as its own.
			k--
			continue
		}
		// Counted before the kill, so that the run it fails knows why.
		s.enqueueKills.Add(1)
		if !s.enqueue.busy.Load() || s.enqueue.KillRuntime() != nil {
			s.enqueueKills.Add(-1)
			k-- // the run ended first: wait for the next one
		}
	}
}

// pauser returns a sleep that ends early, reporting false, when ctx ends.
func pauser(ctx context.Context) func(time.Duration) bool {
	return func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
}

// waitForShare waits until the providers have accepted k/(n+1) of what the
// plan sends, so that n kills spread over the run; false if the run ended.
func (s *system) waitForShare(pause func(time.Duration) bool, k, n int) bool {
	toSend := s.plan.count(func(d *planned) bool { return d.expect == ledger.StatusSent })
	for s.acceptedSoFar() < toSend*k/(n+1) {
		if !pause(50 * time.Millisecond) {
			return false
		}
	}
	return true
}
