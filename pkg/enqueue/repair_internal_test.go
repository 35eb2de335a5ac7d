package enqueue

import (
	"math"
	"testing"
	"time"
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
