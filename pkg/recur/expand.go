package recur

import (
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
)

// A plan is a rule expanded for one start: which days of a year match the
// rule's BY parts (the same for every year of one kind: leap or not, and
// the day of the week of 1 January), and which days its periods select
// (the INTERVAL-th days, weeks, months or years counted from the start's).
// A day is a date of the series when it is both matched and selected and
// not before the start; the time of day is always the start's. Since the
// matched days depend only on the date (an ordinal counts within a month
// or a year, never within a period), this is RFC 5545's table of
// expansions and limits, period by period.
type plan struct {
	rule  Rule
	start localtime.Wall
	zone  *time.Location

	interval int64
	startDay int64 // the start's day number

	// The periods the interval selects are those whose index, counted
	// like this, is anchor plus a multiple of interval.
	anchor int64 // the start's day number, week, month (year×12+month−1) or year

	matched [14]yearDays // by kind: 7×leap + the weekday of 1 January
	never   bool         // no kind has a matched day

	// cycleYears is the number of years after which matched and selected
	// days repeat: 400 (the Gregorian calendar's cycle, a whole number of
	// weeks) times the interval over its common divisor with the number of
	// periods in 400 years. A scan that finds no day in that many years
	// will never find one.
	cycleYears int
}

// periodsIn400Years is the number of periods of each frequency in the
// Gregorian calendar's cycle of 400 years (146097 days, 20871 weeks).
var periodsIn400Years = map[Freq]int{Daily: 146097, Weekly: 20871, Monthly: 4800, Yearly: 400}

// mondayDay is the day number of a Monday (5 January 1970): weeks, which
// start on Monday (WKST=MO), are counted from it.
const mondayDay = 4

func week(day int64) int64 { return floorDiv(day-mondayDay, 7) }

// newPlan expands s's rule; nil if the series is not valid.
func newPlan(s Series) *plan {
	if s.Zone == nil || !validWall(s.Start) || s.Rule.Validate() != nil {
		return nil
	}
	r := s.Rule
	p := &plan{rule: r, start: s.Start, zone: s.Zone, interval: int64(r.interval())}
	p.startDay = dayNumber(s.Start.Year, s.Start.Month, s.Start.Day)
	switch r.Freq {
	case Daily:
		p.anchor = p.startDay
	case Weekly:
		p.anchor = week(p.startDay)
	case Monthly:
		p.anchor = int64(s.Start.Year)*12 + int64(s.Start.Month) - 1
	case Yearly:
		p.anchor = int64(s.Start.Year)
	}
	p.cycleYears = 400 * r.interval() / gcd(periodsIn400Years[r.Freq], r.interval())

	// The defaults RFC 5545 takes from the start (and python-dateutil
	// the same way): without a day part, a weekly rule repeats on the
	// start's weekday, a monthly one on the start's day of the month, a
	// yearly one on the start's day and, without BYMONTH, month.
	byDay, byMonthDay, byMonth := r.ByDay, r.ByMonthDay, r.ByMonth
	if len(byDay) == 0 && len(byMonthDay) == 0 {
		switch r.Freq {
		case Weekly:
			byDay = []WeekdayNum{{Day: weekdayOf(p.startDay)}}
		case Monthly:
			byMonthDay = []int{s.Start.Day}
		case Yearly:
			byMonthDay = []int{s.Start.Day}
			if len(byMonth) == 0 {
				byMonth = []time.Month{s.Start.Month}
			}
		}
	}
	// An ordinal counts within the month for a monthly rule, and for a
	// yearly one with BYMONTH; else within the year.
	withinMonth := r.Freq == Monthly || len(byMonth) > 0
	p.never = true
	for leap := range 2 {
		for jan1 := time.Sunday; jan1 <= time.Saturday; jan1++ {
			m := match(leap, jan1, byDay, byMonthDay, byMonth, withinMonth)
			p.matched[7*leap+int(jan1)] = m
			p.never = p.never && m.empty()
		}
	}
	return p
}

// match is the set of days of a year of a kind (leap or not, the weekday
// of 1 January) that every given BY part matches: a day matches BYMONTH if
// its month is in it, BYMONTHDAY if it is one of its days (counted from the
// month's end when negative), BYDAY if any entry names it.
func match(leap int, jan1 time.Weekday, byDay []WeekdayNum, byMonthDay []int, byMonth []time.Month, withinMonth bool) yearDays {
	length := before[leap][13]
	var days yearDays
	days.setRange(0, length-1)
	if len(byMonth) > 0 {
		var in yearDays
		for _, m := range byMonth {
			in = in.or(monthDays[leap][m])
		}
		days = days.and(in)
	}
	if len(byMonthDay) > 0 {
		var in yearDays
		for m := time.January; m <= time.December; m++ {
			n := monthLen(leap, m)
			for _, d := range byMonthDay {
				if d < 0 {
					d = n + 1 + d
				}
				if d >= 1 && d <= n {
					in.set(before[leap][m] + d - 1)
				}
			}
		}
		days = days.and(in)
	}
	if len(byDay) > 0 {
		var in yearDays
		// nth adds the n-th day of the week wd (from the end when n is
		// negative) of the frame of length days that starts on day first.
		nth := func(first, length int, wd time.Weekday, n int) {
			firstWd := time.Weekday((int(jan1) + first) % 7)
			var i int
			if n > 0 {
				i = (int(wd)-int(firstWd)+7)%7 + 7*(n-1)
			} else {
				lastWd := time.Weekday((int(firstWd) + length - 1) % 7)
				i = length - 1 - (int(lastWd)-int(wd)+7)%7 - 7*(-n-1)
			}
			if i >= 0 && i < length {
				in.set(first + i)
			}
		}
		for _, d := range byDay {
			switch {
			case d.N == 0:
				in = in.or(mod7[(int(d.Day)-int(jan1)+7)%7])
			case withinMonth:
				for m := time.January; m <= time.December; m++ {
					nth(before[leap][m], monthLen(leap, m), d.Day, d.N)
				}
			default:
				nth(0, length, d.Day, d.N)
			}
		}
		days = days.and(in)
	}
	return days
}

// days is the set of the days of year y that are dates of the series:
// matched, selected by the interval, and not before the start.
func (p *plan) days(y int) yearDays {
	leap := leapIndex(y)
	jan1 := dayNumber(y, time.January, 1)
	days := p.matched[7*leap+int(weekdayOf(jan1))]
	if days.empty() {
		return days
	}
	length := before[leap][13]
	var sel yearDays
	k := p.interval
	switch p.rule.Freq {
	case Yearly:
		if mod(int64(y)-p.anchor, k) == 0 {
			sel = days
		}
	case Monthly:
		for m := time.January; m <= time.December; m++ {
			if mod(int64(y)*12+int64(m)-1-p.anchor, k) == 0 {
				sel = sel.or(monthDays[leap][m])
			}
		}
	case Weekly:
		last := jan1 + int64(length) - 1
		for w := week(jan1) + mod(p.anchor-week(jan1), k); w <= week(last); w += k {
			monday := mondayDay + 7*w
			sel.setRange(int(max(monday, jan1)-jan1), int(min(monday+6, last)-jan1))
		}
	case Daily:
		if k == 1 {
			sel.setRange(0, length-1)
			break
		}
		for i := mod(p.anchor-jan1, k); i < int64(length); i += k {
			sel.set(int(i))
		}
	}
	days = days.and(sel)
	if y == p.start.Year {
		days.clearBelow(int(p.startDay - jan1))
	}
	return days
}
