package localtime

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Wall is a wall-clock date and time with no zone, to the second: what a
// person writes on a calendar. Its zero value is not a valid time.
type Wall struct {
	Year   int
	Month  time.Month
	Day    int
	Hour   int
	Minute int
	Second int
}

// WallOf is the wall-clock time of t in loc, to the second.
func WallOf(t time.Time, loc *time.Location) Wall {
	t = t.In(loc)
	return Wall{Year: t.Year(), Month: t.Month(), Day: t.Day(), Hour: t.Hour(), Minute: t.Minute(), Second: t.Second()}
}

// String writes w as ParseWall reads it: "2027-03-28T02:30", with seconds
// only where they are not zero ("2027-03-28T02:30:15").
func (w Wall) String() string {
	s := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d", w.Year, int(w.Month), w.Day, w.Hour, w.Minute)
	if w.Second != 0 {
		s += fmt.Sprintf(":%02d", w.Second)
	}
	return s
}

// Compare orders wall-clock times: -1 if w is before v, 0 if equal, +1 if
// after.
func (w Wall) Compare(v Wall) int {
	a := [6]int{w.Year, int(w.Month), w.Day, w.Hour, w.Minute, w.Second}
	b := [6]int{v.Year, int(v.Month), v.Day, v.Hour, v.Minute, v.Second}
	for i := range a {
		switch {
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
	return 0
}

// naive is w read as if it were UTC: the arithmetic of wall-clock times,
// free of any zone's transitions.
func (w Wall) naive() time.Time {
	return time.Date(w.Year, w.Month, w.Day, w.Hour, w.Minute, w.Second, 0, time.UTC)
}

// valid reports whether w names a real calendar date and time (no 30
// February, no 24:00).
func (w Wall) valid() bool {
	return w.Year >= 1 && w.Year <= 9999 && w.Month >= 1 && w.Month <= 12 && w.Day >= 1 &&
		w.Hour >= 0 && w.Hour < 24 && w.Minute >= 0 && w.Minute < 60 && w.Second >= 0 && w.Second < 60 &&
		WallOf(w.naive(), time.UTC) == w
}

// An Error is a local time or a zone that cannot be used. It says what is
// wrong and how to fix it.
type Error struct {
	Value   string // what was given, clipped
	Problem string
	Fix     string
}

// Error writes what was given, what is wrong with it, and the fix:
// `"2027-02-29T09:00" is not a date and time that exists on a calendar;
// check the day of the month and the time (00:00 to 23:59:59)`.
func (e *Error) Error() string {
	s := fmt.Sprintf("%q %s", e.Value, e.Problem)
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

// clip shortens what a caller gave to a length fit for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// ParseWall reads a local date and time: "2006-01-02T15:04" or
// "2006-01-02T15:04:05". It refuses an offset or a Z, fractions of a
// second, and dates that do not exist, each with a fix.
func ParseWall(s string) (Wall, error) {
	bad := func(problem, fix string) (Wall, error) {
		return Wall{}, &Error{Value: clip(s), Problem: problem, Fix: fix}
	}
	const layout = "give a local date and time like 2027-03-28T09:30 (or 09:30:15), with the zone apart"
	if s == "" {
		return bad("is empty", layout)
	}
	if i := strings.IndexAny(s, "Zz+"); i >= 10 || (strings.Count(s, "-") > 2 && len(s) > 16) {
		return bad("has an offset",
			"a local time takes no offset: drop it and name the zone (timeZone), or give an absolute RFC 3339 time instead (dueAt)")
	}
	if strings.Contains(s, ".") {
		return bad("has a fraction of a second", "give whole seconds at most, like 2027-03-28T09:30:15")
	}
	if len(s) != 16 && len(s) != 19 {
		return bad("is not a local date and time", layout)
	}
	if s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || (len(s) == 19 && s[16] != ':') {
		return bad("is not a local date and time", layout)
	}
	num := func(from, to int) (int, bool) {
		for _, c := range s[from:to] {
			if c < '0' || c > '9' {
				return 0, false
			}
		}
		n, err := strconv.Atoi(s[from:to])
		return n, err == nil
	}
	var w Wall
	var ok [6]bool
	var month int
	w.Year, ok[0] = num(0, 4)
	month, ok[1] = num(5, 7)
	w.Month = time.Month(month)
	w.Day, ok[2] = num(8, 10)
	w.Hour, ok[3] = num(11, 13)
	w.Minute, ok[4] = num(14, 16)
	ok[5] = true
	if len(s) == 19 {
		w.Second, ok[5] = num(17, 19)
	}
	for _, k := range ok {
		if !k {
			return bad("is not a local date and time", layout)
		}
	}
	if !w.valid() {
		return bad("is not a date and time that exists on a calendar", "check the day of the month and the time (00:00 to 23:59:59)")
	}
	return w, nil
}
