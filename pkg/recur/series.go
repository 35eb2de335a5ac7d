package recur

import (
	"fmt"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
)

// Series is a recurring reminder's times: a rule, the start (the first
// occurrence's local time, RFC 5545's DTSTART) and the zone whose wall
// clock both are in.
type Series struct {
	Rule  Rule
	Start localtime.Wall
	Zone  *time.Location
}

// Occurrence is one time of a series.
type Occurrence struct {
	N    int            // its place in the series, from 1
	Wall localtime.Wall // its nominal local time: a date the rule gives, at the start's time of day
	At   time.Time      // its instant, in UTC: Wall resolved in the series' zone by localtime.Resolve
}

// Iterator gives a series' occurrences in order. Make one with Series.Iter.
type Iterator struct {
	p          *plan
	year       int      // the year days holds
	days       yearDays // the series' dates in year
	pos        int      // the day of year from which to look for the next date
	n          int      // the occurrences given, or skipped, so far
	emptyYears int      // the years scanned since the last that held a date
	resolved   int      // the dates resolved to instants so far (tests count them)
	done       bool
}

// Iter starts at s's first occurrence. A series that Check refuses has
// none.
func (s Series) Iter() *Iterator {
	p := newPlan(s)
	if p == nil || p.never {
		return &Iterator{done: true}
	}
	return &Iterator{p: p, year: s.Start.Year - 1}
}

// Next is the next occurrence, or false once there is none: after COUNT
// occurrences, past UNTIL, past the year 9999, or once a whole cycle of
// the calendar and the interval (400 years for INTERVAL=1) has gone by
// without a date the rule matches, after which none ever comes.
func (it *Iterator) Next() (Occurrence, bool) {
	for !it.done {
		i := it.days.next(it.pos)
		if i < 0 {
			it.nextYear()
			continue
		}
		it.pos = i + 1
		r := it.p.rule
		if r.Count > 0 && it.n >= r.Count {
			it.done = true
			break
		}
		m, d := monthOf(leapIndex(it.year), i)
		st := it.p.start
		w := localtime.Wall{Year: it.year, Month: m, Day: d, Hour: st.Hour, Minute: st.Minute, Second: st.Second}
		if r.Until != nil && w.Compare(*r.Until) > 0 {
			it.done = true
			break
		}
		at, _ := localtime.Resolve(w, it.p.zone)
		it.resolved++
		if r.UntilUTC != nil && at.After(*r.UntilUTC) {
			it.done = true
			break
		}
		it.n++
		return Occurrence{N: it.n, Wall: w, At: at}, true
	}
	return Occurrence{}, false
}

// nextYear moves to the next year that holds a date of the series, or
// ends the iteration.
func (it *Iterator) nextYear() {
	for !it.done {
		it.year++
		if it.year > 9999 {
			it.done = true
			return
		}
		if days := it.p.days(it.year); !days.empty() {
			it.days, it.pos, it.emptyYears = days, 0, 0
			return
		}
		// The start's year may hold no date only because of the
		// start; a whole cycle after it decides.
		it.emptyYears++
		if it.emptyYears > it.p.cycleYears {
			it.done = true
		}
	}
}

// skipBefore moves past the dates before day i of year y, counting them
// as occurrences given, without resolving them: whole years at a time.
func (it *Iterator) skipBefore(y, i int) {
	for !it.done && it.year <= y {
		to := 366
		if it.year == y {
			to = max(it.pos, i)
		}
		it.n += it.days.count(it.pos) - it.days.count(to)
		it.pos = to
		if c := it.p.rule.Count; c > 0 && it.n >= c {
			it.done = true
		}
		if it.year == y {
			return
		}
		it.nextYear()
	}
}

// First is s's first occurrence: its start if the rule matches it, else
// the first date after it that the rule matches. False if s has none.
func (s Series) First() (Occurrence, bool) {
	return s.Iter().Next()
}

// After is the occurrences of s whose instant is after t, up to max, in
// order, each with its place in the series. It finds them without
// resolving, or stepping through, the ones before: it counts them a year
// at a time.
func (s Series) After(t time.Time, max int) []Occurrence {
	out, _ := s.after(t, max)
	return out
}

func (s Series) after(t time.Time, max int) ([]Occurrence, *Iterator) {
	it := s.Iter()
	if max <= 0 || it.done {
		return nil, it
	}
	w := localtime.WallOf(t, s.Zone)
	if w.Year > 9999 {
		return nil, it
	}
	if w.Year >= 1 {
		// An occurrence after t is at most as far before t's wall-clock
		// time as two of the zone's offsets differ: under two days (the
		// database's offsets run from -15:56 to +15:13).
		day := dayNumber(w.Year, w.Month, w.Day) - 2
		y := w.Year
		if jan1 := dayNumber(y, time.January, 1); day < jan1 {
			y--
		}
		it.skipBefore(y, int(day-dayNumber(y, time.January, 1)))
	}
	var out []Occurrence
	for len(out) < max {
		o, ok := it.Next()
		if !ok {
			break
		}
		if o.At.After(t) {
			out = append(out, o)
		}
	}
	return out, it
}

// Check says, as an *Error with a fix, when s cannot be used: its rule is
// not valid (Validate), it has no zone or its start is not a date and time,
// it has no occurrence at all (a rule no date matches, such as
// FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30, or UNTIL before the first), or
// fewer than its COUNT (the rule stops matching before the year 10000).
// It does not refuse a rule that skips some periods, such as
// BYMONTHDAY=31, which RFC 5545 defines so.
func (s Series) Check() error {
	r := s.Rule
	if err := r.Validate(); err != nil {
		return err
	}
	if s.Zone == nil {
		return refuse("", "", "the series has no zone", "load one with localtime.LoadZone")
	}
	if !validWall(s.Start) {
		return refuse("", s.Start.String(), "the series' start is not a date and time that exists on a calendar (years 1 to 9999)",
			"give a real date and a time from 00:00 to 23:59:59")
	}
	if newPlan(s).never {
		problem := "matches no date (like 30 February)"
		if len(r.ByDay) == 0 && len(r.ByMonthDay) == 0 && r.Freq >= Monthly {
			problem = fmt.Sprintf("matches no date: without BYDAY or BYMONTHDAY, the day is the start's, %d", s.Start.Day)
		}
		fix := "check BYMONTHDAY against BYMONTH (-1 is the last day)"
		if len(r.ByDay) > 0 {
			fix = "check BYDAY, BYMONTHDAY and BYMONTH against each other"
		}
		return refuse("", r.String(), problem, fix)
	}
	it := s.Iter()
	first, ok := it.Next()
	if !ok {
		open := r
		open.Until, open.UntilUTC = nil, nil
		if f, ok := (Series{Rule: open, Start: s.Start, Zone: s.Zone}).First(); ok {
			return refuse("UNTIL", untilText(r), fmt.Sprintf("is before the first occurrence, %s", f.Wall),
				"give an UNTIL at or after the first occurrence")
		}
		return refuse("", r.String(), fmt.Sprintf("matches no date from the start, %s, to the year 9999 (with INTERVAL=%d)",
			s.Start, r.interval()), "give a start on a date the rule matches, or another INTERVAL")
	}
	if r.Count > 0 {
		it.skipBefore(9999, 366)
		if it.n < r.Count {
			return refuse("COUNT", fmt.Sprint(r.Count), fmt.Sprintf("is more than the %d occurrences the rule has from %s,"+
				" the first, to the year 9999", it.n, first.Wall), fmt.Sprintf("give COUNT=%d at most", it.n))
		}
	}
	return nil
}

func untilText(r Rule) string {
	if r.UntilUTC != nil {
		return r.UntilUTC.UTC().Format("20060102T150405Z")
	}
	return compact(*r.Until, true)
}

// OccurrenceID is the id of occurrence o of the series called seriesID:
// the series' id, a dot and o's nominal local time in RFC 5545's basic
// format, with seconds only where they are not zero
// ("rem-1.20270328T0930"). The same series gives the same ids however
// often it is read, and no two occurrences of it share one.
func OccurrenceID(seriesID string, o Occurrence) string {
	return seriesID + "." + compact(o.Wall, false)
}
