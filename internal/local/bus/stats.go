package bus

import "maps"

// Stats is what a Bus has done since it started.
type Stats struct {
	// Requests is how many requests it answered, PutEvents or refused.
	Requests int
	// Refused counts the requests answered with an error, by the error's
	// type (ValidationException, InternalException, …).
	Refused map[string]int
	// RequestFaults is how many of those were injected faults (500
	// InternalException).
	RequestFaults int
	// Accepted is how many entries were given an event id.
	Accepted int
	// Failed counts the entries that failed, by ErrorCode (injected faults
	// under theirs: InternalFailure or ThrottlingException).
	Failed map[string]int
	// EntryFaults is how many of those were injected faults.
	EntryFaults int
	// Delivered counts the events sent to a rule's target, by rule name.
	Delivered map[string]int
	// TargetFailures counts the events a rule's target refused on every
	// try, by rule name: the events lost to that target.
	TargetFailures map[string]int
}

func newStats() Stats {
	return Stats{Refused: map[string]int{}, Failed: map[string]int{}, Delivered: map[string]int{}, TargetFailures: map[string]int{}}
}

// Stats returns a copy of the bus's counts.
func (b *Bus) Stats() Stats {
	b.statsMu.Lock()
	defer b.statsMu.Unlock()
	s := b.stats
	s.Refused = maps.Clone(s.Refused)
	s.Failed = maps.Clone(s.Failed)
	s.Delivered = maps.Clone(s.Delivered)
	s.TargetFailures = maps.Clone(s.TargetFailures)
	return s
}

func (b *Bus) count(f func(*Stats)) {
	b.statsMu.Lock()
	defer b.statsMu.Unlock()
	f(&b.stats)
}
