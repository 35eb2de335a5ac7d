package clock

import (
	"testing"
	"time"
)

func TestFakeAfterFiresOnlyWhenDue(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewFake(start)
	ch := c.After(10 * time.Second)
	c.Advance(9 * time.Second)
	select {
	case <-ch:
		t.Fatal("fired before it was due")
	default:
	}
	c.Advance(time.Second)
	select {
	case got := <-ch:
		if !got.Equal(start.Add(10 * time.Second)) {
			t.Fatalf("fired at %v, want %v", got, start.Add(10*time.Second))
		}
	default:
		t.Fatal("did not fire when due")
	}
	if c.Waiters() != 0 {
		t.Fatalf("waiters = %d, want 0", c.Waiters())
	}
}

func TestFakeWaitForWaiters(t *testing.T) {
	t.Parallel()
	c := NewFake(time.Unix(0, 0))
	if c.WaitForWaiters(1, 10*time.Millisecond) {
		t.Fatal("reported a waiter that does not exist")
	}
	go c.After(time.Minute)
	if !c.WaitForWaiters(1, 5*time.Second) {
		t.Fatal("did not see the waiter")
	}
}
