// Package clock is the time source of Nudge's components.
//
// Every component that reads the time or waits takes a Clock, so tests can
// drive it with a Fake: deadlines, backoff, leases and the visibility
// heartbeat are all tested without sleeping.
package clock
