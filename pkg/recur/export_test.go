package recur

import "time"

// ResolvedByAfter is the number of dates s.After(t, max) resolves to
// instants: those it gives, and the few (at most two days' worth) before t
// it looks at.
func ResolvedByAfter(s Series, t time.Time, max int) int {
	_, it := s.after(t, max)
	return it.resolved
}
