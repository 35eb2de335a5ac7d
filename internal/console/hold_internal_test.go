package console

import (
	"testing"
	"time"
)

// TestTheHoldKeepsRoomForTheMove: a selection is taken as expired while
// what is left of its hold is less than its move takes at the redriver's
// rate plus a tenth of the hold (at most 30 s): 1000 letters at 10 a
// second need 100 s more than 10 do.
func TestTheHoldKeepsRoomForTheMove(t *testing.T) {
	for _, c := range []struct {
		hold, move, want time.Duration
	}{
		{5 * time.Minute, time.Second, 31 * time.Second},
		{5 * time.Minute, 100 * time.Second, 130 * time.Second},
		{time.Minute, 0, 6 * time.Second},
	} {
		if got := holdMargin(c.hold, c.move); got != c.want {
			t.Errorf("holdMargin(%v, %v) = %v, want %v", c.hold, c.move, got, c.want)
		}
	}
}
