package clock_test

import (
	"fmt"
	"time"

	"github.com/nudgehq/nudge/pkg/clock"
)

// A component takes a clock.Clock; production passes clock.Real{}, a
// test a Fake, which moves only when Advance says. A timer from After
// fires once the fake time has moved past it, at once and without sleeping.
func ExampleFake() {
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	timer := clk.After(30 * time.Second)

	clk.Advance(20 * time.Second)
	select {
	case <-timer:
		fmt.Println("fired early")
	default:
		fmt.Println("at", clk.Now().Format(time.TimeOnly), "the timer waits;", clk.Waiters(), "waiting")
	}

	clk.Advance(20 * time.Second)
	fired := <-timer
	fmt.Println("fired at", fired.Format(time.TimeOnly), "(asked for 09:00:30);", clk.Waiters(), "waiting")
	// Output:
	// at 09:00:20 the timer waits; 1 waiting
	// fired at 09:00:40 (asked for 09:00:30); 0 waiting
}

// WaitForWaiters lets a test advance the clock only once the code under
// test waits on it: here a goroutine that retries after a pause.
func ExampleFake_WaitForWaiters() {
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	done := make(chan time.Time)
	go func() {
		<-clk.After(5 * time.Second) // the pause before a retry
		done <- clk.Now()
	}()

	if !clk.WaitForWaiters(1, time.Minute) { // a minute of real time: the test's patience only
		fmt.Println("the goroutine never waited")
		return
	}
	clk.Advance(5 * time.Second)
	fmt.Println("retried at", (<-done).Format(time.TimeOnly))
	// Output:
	// retried at 09:00:05
}
