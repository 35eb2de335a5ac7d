package enqueue

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
)

// TestRepairWaitDoublesUpToItsCap: the wait after n repairs, to the cap of
// 16 windows, and a window too large to double stays the longest wait
// there is rather than overflowing into a short one.
func TestRepairWaitDoublesUpToItsCap(t *testing.T) {
	w := 10 * time.Minute
	for _, c := range []struct {
		window time.Duration
		n      int
		want   time.Duration
	}{
		{w, -1, w}, {w, 0, w}, {w, 1, 2 * w}, {w, 2, 4 * w}, {w, 3, 8 * w},
		{w, 4, 16 * w}, {w, 5, 16 * w}, {w, 1000, 16 * w},
		{math.MaxInt64 / 16, 4, math.MaxInt64 / 16 * 16},
		{math.MaxInt64/16 + 1, 4, math.MaxInt64},
		{math.MaxInt64, 1, math.MaxInt64},
	} {
		if got := repairWait(c.window, c.n); got != c.want {
			t.Errorf("repairWait(%v, %d) = %v; want %v", c.window, c.n, got, c.want)
		}
	}
}

// TestTheTrailKnowsWhatWasHandedOffAWindowAgo: a cursor that moves at
// random (each minute with a chance from 2 % to 100 %, so in bursts and
// gaps) or at fixed intervals, for over a day. Each position it passes
// becomes known to handedOffBy as passed a window ago between 10 and 16
// minutes after the move that passed it: never before (a fresh message
// repaired), and never much after (a lost one left waiting).
func TestTheTrailKnowsWhatWasHandedOffAWindowAgo(t *testing.T) {
	const window = 10 * time.Minute
	e := &Enqueuer{cfg: Config{RepairAfter: window}}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	// Positions as the due index writes them, a UUID reminder id each, so
	// that they sort as the minutes do.
	pos := func(minute int) string {
		return ledger.IndexSort(t0.Add(time.Duration(minute)*time.Minute), message.DeliveryKey{
			ReminderID: fmt.Sprintf("%08d-d9cb-469f-a165-70867728950e", minute), Channel: "email", Provider: "webhook"})
	}
	simulate := func(name string, moves func(minute int) bool) {
		var cur ledger.Cursor
		known := map[int]int{} // the minute of a move → the minute handedOffBy first covers it
		var moved []int
		for minute := 0; minute <= 1600; minute++ {
			now := t0.Add(time.Duration(minute) * time.Minute)
			if minute <= 1500 && moves(minute) {
				trail := e.trail(cur, now)
				for i := range trail { // as the ledger stores it
					trail[i].Pos = trail[i].Pos[:min(len(trail[i].Pos), ledger.MaxMarkPos)]
				}
				if len(trail) > ledger.MaxTrail {
					t.Fatalf("%s: a trail of %d marks", name, len(trail))
				}
				cur = ledger.Cursor{Pos: pos(minute), MovedAt: now, Trail: trail}
				moved = append(moved, minute)
			}
			by := handedOffBy(cur, now.Add(-window))
			for _, m := range moved {
				if _, ok := known[m]; !ok && pos(m) <= by {
					known[m] = minute
				}
			}
		}
		for _, m := range moved {
			at, ok := known[m]
			if !ok || at-m < 10 || at-m > 16 {
				t.Fatalf("%s: the move at minute %d known as a window old at minute %d (%v); want 10 to 16 minutes after it", name, m, at, ok)
			}
		}
	}
	for _, every := range []int{1, 2, 3, 5, 7, 11, 25} {
		simulate(fmt.Sprintf("every %d min", every), func(minute int) bool { return minute%every == 0 })
	}
	for seed := range int64(100) {
		rng := rand.New(rand.NewSource(seed))
		p := 0.02 + 0.98*rng.Float64()
		simulate(fmt.Sprintf("seed %d, moving %.0f %% of minutes", seed, 100*p), func(int) bool { return rng.Float64() < p })
	}
}
