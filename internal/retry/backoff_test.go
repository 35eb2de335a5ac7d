package retry

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCeilingDoublesUpToCap(t *testing.T) {
	t.Parallel()
	b, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute}
	for i, w := range want {
		if got := b.Ceiling(i + 1); got != w {
			t.Errorf("Ceiling(%d) = %v, want %v", i+1, got, w)
		}
	}
	if got := b.Ceiling(0); got != 15*time.Second {
		t.Errorf("Ceiling(0) = %v, want base", got)
	}
	if got := b.Ceiling(12); got != 6*time.Hour {
		t.Errorf("Ceiling(12) = %v, want the 6h cap", got)
	}
	if got := b.Ceiling(1 << 20); got != 6*time.Hour {
		t.Errorf("Ceiling(huge) = %v, want the cap without overflow", got)
	}
}

func TestDelayFullJitterAndRetryAfter(t *testing.T) {
	t.Parallel()
	r := 0.5
	b, err := New(Config{Base: 10 * time.Second, Cap: time.Hour, Rand: func() float64 { return r }})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Delay(3, 0); got != 20*time.Second {
		t.Errorf("Delay(3) with r=0.5 = %v, want 20s (half of the 40s ceiling)", got)
	}
	if got := b.Delay(1, 2*time.Minute); got != 2*time.Minute {
		t.Errorf("Retry-After 2m not honoured: %v", got)
	}
	if got := b.Delay(1, 48*time.Hour); got != time.Hour {
		t.Errorf("Retry-After above the cap not capped: %v", got)
	}
	r = 0
	if got := b.Delay(1, 0); got != time.Second {
		t.Errorf("Delay with r=0 = %v, want the 1s floor", got)
	}
	r = 0.999999
	if got := b.Delay(30, 0); got != time.Hour {
		t.Errorf("Delay near the top = %v, want the cap", got)
	}
}

func TestJitterStaysInRange(t *testing.T) {
	t.Parallel()
	for i := 0; i < 1000; i++ {
		r := float64(i) / 1000
		d := Jitter(time.Minute, 0, time.Hour, r)
		if d < time.Second || d > time.Minute || d%time.Second != 0 {
			t.Fatalf("Jitter(1m, r=%v) = %v, outside [1s, 1m] or not whole seconds", r, d)
		}
	}
}

func TestNewRejectsNonsense(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Base: time.Millisecond}, "below 1s"},
		{Config{Base: time.Minute, Cap: time.Second * 30}, "below base"},
		{Config{Cap: 13 * time.Hour}, "12h0m0s"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}

func ExampleBackoff_Ceiling() {
	b, _ := New(Config{Base: 15 * time.Second, Cap: 6 * time.Hour})
	for attempt := 1; attempt <= 12; attempt += 3 {
		fmt.Println(attempt, b.Ceiling(attempt))
	}
	// Output:
	// 1 15s
	// 4 2m0s
	// 7 16m0s
	// 10 2h8m0s
}
