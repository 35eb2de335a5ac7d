package demo

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/check"
	"github.com/nudgehq/nudge/internal/local/standin"
)

// The chaos run is the demo with kills: consumer runtimes killed in the
// middle of batches (killer) and the enqueue's in the middle of runs
// (enqueueKiller), spread over the run. What a kill explains is the
// checker's to say (check.Evidence.Kills).

// kills are what a chaos run killed.
type kills struct {
	mu       sync.Mutex
	consumer []check.Kill // consumer runtimes killed mid-batch, in order
	enqueue  atomic.Int64 // enqueue runtimes killed mid-run
	outcomes atomic.Int64 // outcomes runtimes killed mid-batch
}

// killed returns the consumer runtimes killed so far.
func (k *kills) killed() []check.Kill {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]check.Kill(nil), k.consumer...)
}

// killer kills consumer runtimes in the middle of batches, Config.Kills
// times: the k-th kill waits until the provider has accepted k/(Kills+1)
// of the deliveries the plan sends, then picks an instance that is running
// a batch and kills its runtime a random 0–50 ms later, if it is still
// running it. The emulator answers that invocation with an error, as
// Lambda does, so the whole batch returns after the visibility timeout, and
// starts a new runtime for the next.
func (r *run) killer(ctx context.Context) {
	if r.cfg.Kills == 0 {
		return
	}
	rnd := rand.New(rand.NewPCG(uint64(r.cfg.Seed), 0x6b696c6c))
	pause := pauser(ctx)
	for k := 1; k <= r.cfg.Kills; k++ {
		if !r.waitForShare(pause, k, r.cfg.Kills) {
			return
		}
		for {
			var busy []*local.Function
			for _, in := range r.h.Consumers {
				if in.Busy() {
					busy = append(busy, in)
				}
			}
			if len(busy) > 0 {
				in := busy[rnd.IntN(len(busy))]
				if !pause(time.Duration(rnd.Int64N(int64(50 * time.Millisecond)))) {
					return
				}
				if in.Busy() && in.KillRuntime() == nil {
					r.kills.mu.Lock()
					// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
					r.kills.consumer = append(r.kills.consumer, check.Kill{Instance: in.Name, At: time.Now()})
					r.kills.mu.Unlock()
					break
				}
			}
			if !pause(5 * time.Millisecond) {
				return
			}
		}
	}
}

// enqueueKiller kills the enqueue's runtime in the middle of runs,
// Config.EnqueueKills times, spread over the run as the consumer kills
// are: the k-th waits until the provider has accepted k/(EnqueueKills+1) of
// what the plan sends, then for a run in progress, and kills its runtime
// 0–20 ms into it. The run fails as a whole; the next tick's run resumes
// from the cursors, and what this one published without recording it is
// published again (a duplicate the consumer recognises).
func (r *run) enqueueKiller(ctx context.Context) {
	r.midRunKiller(ctx, r.h.Enqueue, r.cfg.EnqueueKills, &r.kills.enqueue, 0x656e71)
}

// outcomesKiller kills the outcomes function's runtime in the middle of a
// batch of the ledger's stream, Config.OutcomeKills times, spread as the
// enqueue kills are. The invocation fails; the stream mapping retries the
// batch, and the events the killed invocation had put are put again with
// their eventIds (repeats the checker counts, never a loss).
func (r *run) outcomesKiller(ctx context.Context) {
	r.midRunKiller(ctx, r.h.Outcomes, r.cfg.OutcomeKills, &r.kills.outcomes, 0x6f7574)
}

// midRunKiller kills fn's runtime n times while it runs an invocation,
// counting each in killed (before the kill, so the run it fails knows why).
func (r *run) midRunKiller(ctx context.Context, fn *local.Function, n int, killed *atomic.Int64, seed uint64) {
	if n == 0 {
		return
	}
	rnd := rand.New(rand.NewPCG(uint64(r.cfg.Seed), seed))
	pause := pauser(ctx)
	for k := 1; k <= n; k++ {
		if !r.waitForShare(pause, k, n) {
			return
		}
		for !fn.Busy() {
			if !pause(2 * time.Millisecond) {
				return
			}
		}
		if !pause(time.Duration(rnd.Int64N(int64(20 * time.Millisecond)))) {
			return
		}
		if age, err := fn.RuntimeAge(); err != nil || age < standin.MinRuntimeAge {
			// Too young for the emulator to take a kill: try again, without
			// counting a kill that an invocation starting now would take as
			// its own.
			k--
			continue
		}
		killed.Add(1)
		if !fn.Busy() || fn.KillRuntime() != nil {
			killed.Add(-1)
			k-- // the invocation ended first: wait for the next one
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
func (r *run) waitForShare(pause func(time.Duration) bool, k, n int) bool {
	toSend := r.plan.count(func(d check.Planned) bool { return d.Expect == ledger.StatusSent })
	for r.ch.acceptedSoFar() < toSend*k/(n+1) {
		if !pause(50 * time.Millisecond) {
			return false
		}
	}
	return true
}
