package recur

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
)

// Freq is how often a rule's periods come: a day, a week, a month or a
// year (RFC 5545's FREQ). Its zero value is no frequency, which Validate
// refuses.
type Freq int

// The frequencies Nudge takes. HOURLY, MINUTELY and SECONDLY are not among
// them: a series has one time of day, its start's.
const (
	Daily Freq = iota + 1
	Weekly
	Monthly
	Yearly
)

// String is the frequency as RFC 5545 writes it ("MONTHLY").
func (f Freq) String() string {
	switch f {
	case Daily:
		return "DAILY"
	case Weekly:
		return "WEEKLY"
	case Monthly:
		return "MONTHLY"
	case Yearly:
		return "YEARLY"
	}
	return fmt.Sprintf("Freq(%d)", int(f))
}

// WeekdayNum is one entry of BYDAY: a day of the week, every such day of
// the period when N is 0, else the Nth of the month or the year (1 the
// first, -1 the last, so {-1, time.Friday} is the last Friday).
type WeekdayNum struct {
	N   int // 0 for every such day; 1 to 53 or -53 to -1 for an ordinal
	Day time.Weekday
}

var dayCodes = [7]string{"SU", "MO", "TU", "WE", "TH", "FR", "SA"}

// String is the entry as RFC 5545 writes it: "MO", "-1FR", "2TU".
func (d WeekdayNum) String() string {
	code := fmt.Sprintf("Weekday(%d)", int(d.Day))
	if d.Day >= time.Sunday && d.Day <= time.Saturday {
		code = dayCodes[d.Day]
	}
	if d.N == 0 {
		return code
	}
	return strconv.Itoa(d.N) + code
}

// Rule is a recurrence rule: the common part of RFC 5545's RRULE (section
// 3.3.10), with weeks that start on Monday. Parse reads one from its text
// and String writes it back. A Rule built in Go rather than parsed is
// checked by Validate (Series.Check calls it).
type Rule struct {
	Freq       Freq
	Interval   int             // every Interval-th period, 1 to 1000; 0 is read as 1 (Parse gives 1)
	ByDay      []WeekdayNum    // days of the week, with or without ordinals; nil: none given
	ByMonthDay []int           // days of the month, 1 to 31 or -31 to -1 (-1 the last day); nil: none given
	ByMonth    []time.Month    // months of the year; nil: none given
	Count      int             // the number of occurrences, 1 to 1000; 0: no count
	Until      *localtime.Wall // the last possible occurrence, inclusive, in the series' wall clock; nil: none
	UntilUTC   *time.Time      // the last possible occurrence, inclusive, as an instant (UNTIL ending in Z); nil: none
}

// The bounds Nudge sets on a rule.
const (
	MaxInterval = 1000 // INTERVAL
	MaxCount    = 1000 // COUNT: a counted series is bounded, so that checking and reading one stays cheap
)

// interval is r.Interval with 0 read as 1.
func (r Rule) interval() int {
	if r.Interval == 0 {
		return 1
	}
	return r.Interval
}

// String writes r as Parse reads it, in a fixed order: FREQ, INTERVAL
// (only when above 1), BYMONTH, BYMONTHDAY, BYDAY, COUNT, UNTIL. The
// values of each list keep their order. UNTIL is written as a local date
// and time ("20271231T235959"), or in UTC with a Z for UntilUTC. WKST is
// never written: it is always MO.
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString("FREQ=" + r.Freq.String())
	if r.Interval > 1 {
		b.WriteString(";INTERVAL=" + strconv.Itoa(r.Interval))
	}
	list := func(name string, n int, item func(int) string) {
		if n == 0 {
			return
		}
		b.WriteString(";" + name + "=")
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(item(i))
		}
	}
	list("BYMONTH", len(r.ByMonth), func(i int) string { return strconv.Itoa(int(r.ByMonth[i])) })
	list("BYMONTHDAY", len(r.ByMonthDay), func(i int) string { return strconv.Itoa(r.ByMonthDay[i]) })
	list("BYDAY", len(r.ByDay), func(i int) string { return r.ByDay[i].String() })
	if r.Count > 0 {
		b.WriteString(";COUNT=" + strconv.Itoa(r.Count))
	}
	if r.Until != nil {
		b.WriteString(";UNTIL=" + compact(*r.Until, true))
	}
	if r.UntilUTC != nil {
		b.WriteString(";UNTIL=" + r.UntilUTC.UTC().Format("20060102T150405Z"))
	}
	return b.String()
}

// compact writes w as RFC 5545's basic format: "20271231T235959", or
// without seconds ("20270328T0930") when withZeroSeconds is false and the
// seconds are zero.
func compact(w localtime.Wall, withZeroSeconds bool) string {
	s := fmt.Sprintf("%04d%02d%02dT%02d%02d", w.Year, int(w.Month), w.Day, w.Hour, w.Minute)
	if withZeroSeconds || w.Second != 0 {
		s += fmt.Sprintf("%02d", w.Second)
	}
	return s
}

// Validate reports the first thing wrong with r as an *Error, with a fix:
// what Parse refuses, for a Rule built in Go.
func (r Rule) Validate() error {
	if r.Freq < Daily || r.Freq > Yearly {
		return refuse("FREQ", "", "is missing", "give FREQ=DAILY, WEEKLY, MONTHLY or YEARLY")
	}
	if r.Interval < 0 || r.Interval > MaxInterval {
		return refuse("INTERVAL", strconv.Itoa(r.Interval), fmt.Sprintf("is not between 1 and %d", MaxInterval),
			fmt.Sprintf("give 1 (every period, the default) to %d", MaxInterval))
	}
	if r.Count < 0 || r.Count > MaxCount {
		return refuse("COUNT", strconv.Itoa(r.Count), fmt.Sprintf("is not between 1 and %d: Nudge bounds a counted series,"+
			" so that checking it and reading it from its start stay cheap", MaxCount),
			fmt.Sprintf("give at most %d, or UNTIL, or no end", MaxCount))
	}
	if r.Count > 0 && (r.Until != nil || r.UntilUTC != nil) {
		return refuse("COUNT", strconv.Itoa(r.Count), "is given with UNTIL, which RFC 5545 says MUST NOT be",
			"give COUNT or UNTIL, not both")
	}
	if r.Until != nil && r.UntilUTC != nil {
		return refuse("UNTIL", "", "is given twice, as a local time and as UTC", "give Until or UntilUTC, not both")
	}
	if r.Until != nil && !validWall(*r.Until) {
		return refuse("UNTIL", compact(*r.Until, true), "is not a date and time that exists on a calendar",
			"check the day of the month and the time (000000 to 235959)")
	}
	if err := r.validateByMonth(); err != nil {
		return err
	}
	if err := r.validateByMonthDay(); err != nil {
		return err
	}
	return r.validateByDay()
}

func (r Rule) validateByMonth() error {
	var seen [13]bool
	for _, m := range r.ByMonth {
		v := strconv.Itoa(int(m))
		if m < time.January || m > time.December {
			return refuse("BYMONTH", v, "is not a month", "give 1 (January) to 12 (December)")
		}
		if seen[m] {
			return refuse("BYMONTH", v, "is given twice", "give each month once")
		}
		seen[m] = true
	}
	return nil
}

func (r Rule) validateByMonthDay() error {
	var seen [63]bool
	for _, d := range r.ByMonthDay {
		v := strconv.Itoa(d)
		if r.Freq == Weekly {
			return refuse("BYMONTHDAY", v, "is given with FREQ=WEEKLY, which RFC 5545 does not allow",
				"give FREQ=MONTHLY for days of the month, or BYDAY for days of the week")
		}
		if d == 0 || d < -31 || d > 31 {
			return refuse("BYMONTHDAY", v, "is not a day of the month",
				"give 1 to 31, or -31 to -1 to count from the month's end (-1 is the last day)")
		}
		if seen[d+31] {
			return refuse("BYMONTHDAY", v, "is given twice", "give each day once")
		}
		seen[d+31] = true
	}
	return nil
}

func (r Rule) validateByDay() error {
	seen := map[WeekdayNum]bool{}
	for _, d := range r.ByDay {
		v := d.String()
		if d.Day < time.Sunday || d.Day > time.Saturday {
			return refuse("BYDAY", v, "is not a day of the week", "give MO, TU, WE, TH, FR, SA or SU")
		}
		if d.N != 0 {
			switch {
			case r.Freq == Daily || r.Freq == Weekly:
				return refuse("BYDAY", v, fmt.Sprintf("has an ordinal (%d), which RFC 5545 does not allow with FREQ=%s", d.N, r.Freq),
					fmt.Sprintf("give %s for every %s, or FREQ=MONTHLY or YEARLY for the Nth of a month or year",
						dayCodes[d.Day], d.Day))
			case r.Freq == Monthly && (d.N > 5 || d.N < -5):
				return refuse("BYDAY", v, fmt.Sprintf("ordinal %d is beyond %s for FREQ=MONTHLY", d.N, bound(d.N, 5)),
					"give -5 to -1 or 1 to 5")
			case r.Freq == Yearly && len(r.ByMonth) > 0 && (d.N > 5 || d.N < -5):
				return refuse("BYDAY", v, fmt.Sprintf("ordinal %d is beyond %s for FREQ=YEARLY with BYMONTH,"+
					" which counts within the month", d.N, bound(d.N, 5)),
					"give -5 to -1 or 1 to 5, or leave BYMONTH out to count within the year")
			case d.N > 53 || d.N < -53:
				return refuse("BYDAY", v, fmt.Sprintf("ordinal %d is beyond %s for FREQ=YEARLY", d.N, bound(d.N, 53)),
					"give -53 to -1 or 1 to 53")
			}
		}
		if seen[d] {
			return refuse("BYDAY", v, "is given twice", "give each day once")
		}
		seen[d] = true
	}
	return nil
}

// bound is the limit an ordinal n went past, with n's sign.
func bound(n, limit int) string {
	if n < 0 {
		return strconv.Itoa(-limit)
	}
	return strconv.Itoa(limit)
}
