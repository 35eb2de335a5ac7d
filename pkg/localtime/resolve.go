package localtime

import "time"

// Resolution says how Resolve turned a wall-clock time into an instant.
type Resolution int

const (
	// Exact: the wall-clock time happens once in the zone.
	Exact Resolution = iota
	// Skipped: the wall-clock time does not exist (clocks sprang forward
	// over it); the instant is moved forward by the gap, so 02:30 in a
	// one-hour gap that starts at 02:00 is 03:30.
	Skipped
	// Repeated: the wall-clock time happens twice (clocks fell back over
	// it); the instant is the first of the two.
	Repeated
)

// String names r: "exact", "skipped" or "repeated".
func (r Resolution) String() string {
	switch r {
	case Skipped:
		return "skipped"
	case Repeated:
		return "repeated"
	}
	return "exact"
}

// Resolve is the instant of wall-clock time w in loc, by RFC 5545's rules
// (section 3.3.5): a time in a gap is moved forward by the gap's length,
// and a time that happens twice is the first. The instant is in UTC.
//
// A time in a gap is read with the offset in force before the gap, which
// moves it forward by exactly the gap; a repeated time with the larger of
// the two offsets, which is the earlier instant. time.Date promises
// neither, so Resolve does not leave it the choice.
func Resolve(w Wall, loc *time.Location) (time.Time, Resolution) {
	naive := w.naive()
	t := time.Date(w.Year, w.Month, w.Day, w.Hour, w.Minute, w.Second, 0, loc)
	// Every offset that could apply: the one at t, and those in force
	// just before and just after the transitions around t.
	offsets := map[int]bool{}
	_, off := t.Zone()
	offsets[off] = true
	start, _ := t.ZoneBounds()
	end := zoneEnd(t)
	if !start.IsZero() {
		_, o := start.Add(-time.Second).Zone()
		offsets[o] = true
	}
	if !end.IsZero() {
		_, o := end.Zone()
		offsets[o] = true
	}
	var matches []time.Time
	for o := range offsets {
		u := naive.Add(-time.Duration(o) * time.Second)
		if _, uo := u.In(loc).Zone(); uo == o {
			matches = append(matches, u)
		}
	}
	switch len(matches) {
	case 1:
		return matches[0].UTC(), Exact
	case 0:
		// In a gap: read it with the offset before the transition that
		// made the gap.
		before := beforeGap(naive, loc)
		return naive.Add(-time.Duration(before) * time.Second).UTC(), Skipped
	}
	first := matches[0]
	for _, m := range matches[1:] {
		if m.Before(first) {
			first = m
		}
	}
	return first.UTC(), Repeated
}

// beforeGap is the offset in force just before the transition whose gap
// holds the wall-clock time naive (read as UTC).
func beforeGap(naive time.Time, loc *time.Location) int {
	// The gap's transition lies within a day of naive − offset for any
	// offset the zone uses (at most ±26 h); find the transition after
	// which the wall clock first reads later than naive.
	probe := naive.Add(-14 * time.Hour)
	for range 4 {
		end := zoneEnd(probe.In(loc))
		if end.IsZero() {
			break
		}
		_, before := end.Add(-time.Second).In(loc).Zone()
		_, after := end.In(loc).Zone()
		if !end.Add(time.Duration(before)*time.Second).After(naive) && end.Add(time.Duration(after)*time.Second).After(naive) {
			return before
		}
		probe = end
	}
	_, off := naive.In(loc).Zone()
	return off
}
