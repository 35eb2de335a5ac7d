// Package clock is the time source of Nudge's components.
//
// Every component that reads the time or waits takes a Clock, so tests can
// drive it with a Fake: deadlines, backoff, leases and the visibility
// heartbeat are all tested without sleeping.
//
// Production code reads the machine's clock only through Real, or where a
// comment says "wall clock:" and why (a context deadline, which is Lambda's;
// a SigV4 signature, which is AWS's; a pause for a service to recover).
// TestProductionCodeTakesTimeFromItsClock fails on a read without one.
package clock
