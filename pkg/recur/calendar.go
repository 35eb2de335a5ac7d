package recur

import (
	"math/bits"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
)

// yearDays is a set of the days of one year: bit i is the day i days after
// 1 January.
type yearDays [6]uint64

func (d *yearDays) set(i int) { d[i>>6] |= 1 << (i & 63) }

// setRange adds the days lo to hi, both included.
func (d *yearDays) setRange(lo, hi int) {
	for i := lo; i <= hi; {
		if i&63 == 0 && hi-i >= 63 {
			d[i>>6] = ^uint64(0)
			i += 64
			continue
		}
		d.set(i)
		i++
	}
}

func (d yearDays) and(e yearDays) yearDays {
	for i := range d {
		d[i] &= e[i]
	}
	return d
}

func (d yearDays) or(e yearDays) yearDays {
	for i := range d {
		d[i] |= e[i]
	}
	return d
}

func (d yearDays) empty() bool { return d == yearDays{} }

// count is the number of days in d from day from on.
func (d yearDays) count(from int) int {
	d.clearBelow(from)
	n := 0
	for _, w := range d {
		n += bits.OnesCount64(w)
	}
	return n
}

// clearBelow removes the days before day i.
func (d *yearDays) clearBelow(i int) {
	for w := range d {
		switch lo := w * 64; {
		case i >= lo+64:
			d[w] = 0
		case i > lo:
			d[w] &^= 1<<(i-lo) - 1
		}
	}
}

// next is the first day in d at or after day i, or -1.
func (d yearDays) next(i int) int {
	for w := i >> 6; w < len(d); w++ {
		word := d[w]
		if w == i>>6 {
			word &^= 1<<(i&63) - 1
		}
		if word != 0 {
			return w*64 + bits.TrailingZeros64(word)
		}
	}
	return -1
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func leapIndex(y int) int {
	if isLeap(y) {
		return 1
	}
	return 0
}

// before[leap][m] is the number of days in the months before month m;
// before[leap][13] the year's length.
var before = [2][14]int{
	{0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365},
	{0, 0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335, 366},
}

func monthLen(leap int, m time.Month) int { return before[leap][m+1] - before[leap][m] }

// monthOf is the month and day of the month of the day i days after 1
// January.
func monthOf(leap, i int) (time.Month, int) {
	m := time.Month(i/31 + 1) // at or before the month holding day i
	for before[leap][m+1] <= i {
		m++
	}
	return m, i - before[leap][m] + 1
}

// monthDays[leap][m] is the set of the days of month m; mod7[r] the days
// i with i%7 == r.
var monthDays, mod7 = func() (months [2][13]yearDays, mod7 [7]yearDays) {
	for leap := range 2 {
		for m := time.January; m <= time.December; m++ {
			months[leap][m].setRange(before[leap][m], before[leap][m+1]-1)
		}
	}
	for i := range 366 {
		mod7[i%7].set(i)
	}
	return months, mod7
}()

// dayNumber is the number of days from 1 January 1970 to the date, in the
// proleptic Gregorian calendar (Howard Hinnant's days_from_civil).
func dayNumber(y int, m time.Month, d int) int64 {
	yy := int64(y)
	if m <= 2 {
		yy--
	}
	era := floorDiv(yy, 400)
	yoe := yy - era*400
	mp := (int64(m) + 9) % 12
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// weekdayOf is the day of the week of a day number.
func weekdayOf(day int64) time.Weekday { return time.Weekday(mod(day+4, 7)) } // 1 January 1970 was a Thursday

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// mod is a modulo b, from 0 to b-1 for a positive b.
func mod(a, b int64) int64 { return a - floorDiv(a, b)*b }

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// validWall reports whether w names a real calendar date and time from
// the year 1 to 9999 (localtime has the same check, unexported).
func validWall(w localtime.Wall) bool {
	if w.Year < 1 || w.Year > 9999 || w.Month < time.January || w.Month > time.December {
		return false
	}
	return w.Day >= 1 && w.Day <= monthLen(leapIndex(w.Year), w.Month) &&
		w.Hour >= 0 && w.Hour < 24 && w.Minute >= 0 && w.Minute < 60 && w.Second >= 0 && w.Second < 60
}
