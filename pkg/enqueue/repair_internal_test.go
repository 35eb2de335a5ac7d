package enqueue

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/ledger"
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

// TestTheTrailKnowsWhatWasHandedOffAWindowAgo: a cursor moving every
// minute for ten hours, or once in a long while; at each minute the
// position handedOffBy gives for now − window was passed at least a window
// ago and at most one and a half windows and a minute ago, so that a lost
// hand-off is repaired between 10 and 16 minutes after it, never before.
func TestTheTrailKnowsWhatWasHandedOffAWindowAgo(t *testing.T) {
	const window = 10 * time.Minute
	e := &Enqueuer{cfg: Config{RepairAfter: window}}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	pos := func(minute int) string { return fmt.Sprintf("%06d", minute) } // sorts as time does
	for _, every := range []int{1, 3, 7, 25} {
		var cur ledger.Cursor
		passed := map[string]int{"": -1 << 20} // position → the minute the cursor passed it
		for minute := 0; minute <= 600; minute++ {
			now := t0.Add(time.Duration(minute) * time.Minute)
			if minute%every == 0 {
				cur = ledger.Cursor{Pos: pos(minute), MovedAt: now, Trail: e.trail(cur)}
				passed[cur.Pos] = minute
				if len(cur.Trail) > ledger.MaxTrail {
					t.Fatalf("every %d: a trail of %d marks", every, len(cur.Trail))
				}
			}
			got, ok := passed[handedOffBy(cur, now.Add(-window))]
			if !ok {
				t.Fatalf("every %d, minute %d: a position never passed", every, minute)
			}
			age := minute - got
			if age < 10 {
				t.Fatalf("every %d, minute %d: passed %d minutes ago, less than the window", every, minute, age)
			}
			// Moving every minute, the answer lags by at most half a window
			// and a move; moving rarely, the cursor itself is the answer
			// once its last move is a window old.
			if limit := max(16, 10+every); minute >= 20 && age > limit {
				t.Fatalf("every %d, minute %d: the furthest position known is %d minutes old; want at most %d", every, minute, age, limit)
			}
		}
	}
}
