package awsclient_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/awsclient"
)

func TestWarmMakesNOfEachCallAtOnceAndIgnoresErrors(t *testing.T) {
	t.Parallel()
	var a, b, inFlight, peak atomic.Int32
	release := make(chan struct{})
	call := func(count *atomic.Int32) func(context.Context) error {
		return func(ctx context.Context) error {
			count.Add(1)
			n := inFlight.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			if n == 6 {
				close(release)
			}
			<-release
			inFlight.Add(-1)
			return errors.New("AccessDenied")
		}
	}
	awsclient.Warm(context.Background(), time.Minute, 3, call(&a), call(&b))
	if a.Load() != 3 || b.Load() != 3 || peak.Load() != 6 {
		t.Fatalf("calls %d and %d, %d at once; want 3 of each, all 6 at once", a.Load(), b.Load(), peak.Load())
	}
}

func TestWarmStopsAtItsLimit(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	go func() {
		awsclient.Warm(context.Background(), 50*time.Millisecond, 2, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Warm did not return at its limit")
	}
}
