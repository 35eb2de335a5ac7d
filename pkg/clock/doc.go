// Package clock is an injectable time source: a Clock (Now and After),
// the machine's (Real) or a Fake that moves only when a test advances it.
// Every Nudge component that reads the time or waits takes a Clock
// (batch.Config.Clock, heartbeat.Config.Clock, …), so its tests, and yours
// of code built on it, drive it with a Fake: deadlines, backoff, leases
// and the visibility heartbeat are all tested without sleeping. This
// package is part of Nudge's public Go API; see the README's “Go
// packages”.
//
// Nudge's production code reads the machine's clock only through Real, or
// where a comment says "wall clock:" and why (a context deadline, which is
// Lambda's; a SigV4 signature, which is AWS's; a pause for a service to
// recover). TestProductionCodeTakesTimeFromItsClock fails on a read
// without one.
package clock
