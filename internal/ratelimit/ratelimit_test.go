package ratelimit

import (
	"sync"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/clock"
)

func TestLimiterSpacesSendsAtItsRate(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	l, err := New(Config{PerSecond: 4, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	for range 5 {
		w, ok := l.Reserve(time.Hour)
		if !ok {
			t.Fatal("refused within an hour's wait")
		}
		waits = append(waits, w)
	}
	want := []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	// After a quiet second and more, the bucket is full again: no wait.
	clk.Advance(3 * time.Second)
	if w, _ := l.Reserve(0); w != 0 {
		t.Fatalf("after a quiet spell the wait is %v, want 0", w)
	}
}

func TestLimiterBurstThenRate(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	l, _ := New(Config{PerSecond: 10, Burst: 3, Clock: clk})
	for i := range 3 {
		if w, _ := l.Reserve(0); w != 0 {
			t.Fatalf("send %d of the burst waits %v", i, w)
		}
	}
	if w, _ := l.Reserve(time.Second); w != 100*time.Millisecond {
		t.Fatalf("the send after the burst waits %v, want 100ms", w)
	}
}

func TestLimiterRefusesAWaitBeyondTheMaximumWithoutTakingAToken(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	l, _ := New(Config{PerSecond: 1, Clock: clk})
	l.Reserve(0)
	w, ok := l.Reserve(500 * time.Millisecond)
	if ok || w != time.Second {
		t.Fatalf("Reserve(500ms) = %v, %v; want 1s, false", w, ok)
	}
	// The refused reservation took nothing: the next waits 1 s, not 2 s.
	if w, ok := l.Reserve(time.Minute); !ok || w != time.Second {
		t.Fatalf("after a refusal Reserve = %v, %v; want 1s, true", w, ok)
	}
}

func TestLimiterHoldsItsRateUnderConcurrentCallers(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	l, _ := New(Config{PerSecond: 100, Clock: clk})
	var mu sync.Mutex
	seen := map[time.Duration]bool{}
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			w, _ := l.Reserve(time.Hour)
			mu.Lock()
			defer mu.Unlock()
			if seen[w] {
				t.Errorf("two sends share the slot %v", w)
			}
			seen[w] = true
		})
	}
	wg.Wait()
	if !seen[1990*time.Millisecond] || len(seen) != 200 {
		t.Fatalf("200 sends at 100/s should take slots 0 to 1.99 s; got %d slots", len(seen))
	}
}

func TestNewRefusesNonsense(t *testing.T) {
	for _, r := range []float64{0, -1, 2e6} {
		if _, err := New(Config{PerSecond: r}); err == nil {
			t.Errorf("rate %v accepted", r)
		}
	}
	if _, err := New(Config{PerSecond: 1, Burst: -1}); err == nil {
		t.Error("negative burst accepted")
	}
}

func TestShareDividesAmongInstances(t *testing.T) {
	if got := Share(14, 5); got != 2.8 {
		t.Fatalf("Share(14, 5) = %v", got)
	}
	if got := Share(1, 1000); got*1000 > 1.0000001 {
		t.Fatalf("Share(1, 1000) = %v: a thousand instances would exceed the rate", got)
	}
}

// TestAColdLimiterGivesNoFreeSendAfterIdling: a cold limiter, idle, waits
// one interval for its first token (a full one sends at once), so that
// limiters taking turns at one share never exceed it.
func TestAColdLimiterGivesNoFreeSendAfterIdling(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	for _, cold := range []bool{false, true} {
		l, err := New(Config{PerSecond: 4, Clock: clk, Cold: cold})
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute) // idle
		want := map[bool]time.Duration{false: 0, true: 250 * time.Millisecond}[cold]
		if wait, ok := l.Reserve(time.Second); !ok || wait != want {
			t.Errorf("cold %v: first wait %v, %v; want %v", cold, wait, ok, want)
		}
		if wait, _ := l.Reserve(time.Second); wait != want+250*time.Millisecond {
			t.Errorf("cold %v: second wait %v; want %v", cold, wait, want+250*time.Millisecond)
		}
	}
}
