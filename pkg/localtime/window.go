package localtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// TimeOfDay is a time on the wall clock in minutes after local midnight,
// 0 ("00:00") to 1440 ("24:00"); 1440 is only a window's To, the end of the
// day.
type TimeOfDay int

// endOfDay is "24:00", the latest a window can close.
const endOfDay TimeOfDay = 24 * 60

// String writes d as ParseWindow reads it: "08:00", "24:00".
func (d TimeOfDay) String() string {
	return fmt.Sprintf("%02d:%02d", int(d)/60, int(d)%60)
}

// Weekdays is a set of days of the week: bit i is time.Weekday(i), so
// Sunday is 1 and Monday 2.
type Weekdays uint8

// allDays is the set of all seven days.
const allDays Weekdays = 1<<7 - 1

// dayNames are the short names of the days, by time.Weekday.
var dayNames = [7]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// String writes d as ParseWindowSpec reads it: days in runs from Monday,
// three or more days in a row as a range ("mon-fri", "mon,wed,fri",
// "sat,sun"), a run through Sunday into Monday first and as one range
// ("fri-mon"). Every day is "mon-sun", no day "".
func (d Weekdays) String() string {
	d &= allDays
	switch d {
	case 0:
		return ""
	case allDays:
		return "mon-sun"
	}
	// i counts days from Monday, and may run past Sunday or before Monday.
	has := func(i int) bool { return d&(1<<((i%7+8)%7)) != 0 }
	name := func(i int) string { return dayNames[(i%7+8)%7] }
	start := 0
	for has(start) && has(start-1) {
		start--
	}
	var runs []string
	for i := start; i < start+7; {
		if !has(i) {
			i++
			continue
		}
		j := i
		for j+1 < start+7 && has(j+1) {
			j++
		}
		switch j - i {
		case 0:
			runs = append(runs, name(i))
		case 1:
			runs = append(runs, name(i), name(j))
		default:
			runs = append(runs, name(i)+"-"+name(j))
		}
		i = j + 1
	}
	return strings.Join(runs, ",")
}

// names lists the days in d, Monday first.
func (d Weekdays) names() []string {
	var names []string
	for i := 1; i <= 7; i++ {
		if d&(1<<(i%7)) != 0 {
			names = append(names, dayNames[i%7])
		}
	}
	return names
}

// A Window is a send window, the hours a reminder may be sent in ("quiet
// hours" are the rest): from From to To on the wall clock in Zone, opening
// on Days.
//
// The window is open at an instant when the wall clock in Zone reads a
// time in [From, To) on a day in Days. Days are the days the window opens:
// if From is after To, the window spans midnight, and 22:00-06:00 on
// Friday is open from 22:00 on Friday to 06:00 on Saturday morning. Days
// of zero is every day.
//
// Everything follows the wall clock, the daylight-saving changes too. If
// From falls in a gap (the hour skipped when the clocks spring forward),
// the window opens when the clocks jump, at the first instant the wall
// clock reads From or later; a window that lies wholly within a gap does
// not open that day. In the hour repeated when the clocks fall back, the
// wall clock reads the same times twice, and the window is open whenever
// it reads a time within it, so a window can open twice that night.
//
// The zero Window is no window: it is open at every instant. Windows made
// by ParseWindow, ParseWindowSpec and UnmarshalJSON are valid, and can be
// compared with ==; a Window written as a literal should be checked with
// Validate. An invalid Window is never open.
type Window struct {
	From, To TimeOfDay
	// Zone is an IANA zone that LoadZone accepts.
	Zone string
	// Days are the days the window opens; zero is every day.
	Days Weekdays
}

// ParseWindow reads a send window: from and to as "HH:MM" (to may be
// "24:00", the end of the day; "00:00" is read as "24:00"), the IANA zone
// its wall clock follows, and the days it opens ("mon" to "sun", or
// "monday" to "sunday", in any case, each once; none is every day). A
// from later than to spans midnight. Every error is an *Error that says
// what is wrong and how to fix it.
func ParseWindow(from, to, zone string, days []string) (Window, error) {
	var w Window
	var err error
	if w.From, err = parseTimeOfDay(from, false); err != nil {
		return Window{}, err
	}
	if w.To, err = parseTimeOfDay(to, true); err != nil {
		return Window{}, err
	}
	if w.From == w.To {
		return Window{}, &Error{Value: clip(from + "-" + to), Problem: "opens and closes at the same time",
			Fix: "give a window that is open part of the day, or leave the window out to send at any time"}
	}
	if w.To == 0 {
		w.To = endOfDay
	}
	if _, err := LoadZone(zone); err != nil {
		return Window{}, err
	}
	w.Zone = zone
	for _, s := range days {
		day, err := parseDay(s)
		if err != nil {
			return Window{}, err
		}
		if w.Days&(1<<day) != 0 {
			return Window{}, &Error{Value: clip(s), Problem: "is listed twice in the window's days", Fix: "list each day once"}
		}
		w.Days |= 1 << day
	}
	if w.Days == allDays {
		w.Days = 0
	}
	return w, nil
}

const specLayout = "write a window like 08:00-21:00 America/New_York, with days after the zone if not every day: mon-fri, or mon,wed,fri"

// ParseWindowSpec reads a window in the compact form String writes, for a
// command line, an import column or storage: "08:00-21:00
// America/New_York", or with the days it opens after the zone,
// "08:00-21:00 America/New_York mon-fri", "09:00-17:00 Europe/Berlin
// mon,wed,fri". A range of days may wrap past Sunday ("fri-mon"). The
// parts are as ParseWindow's, and so are the errors.
func ParseWindowSpec(s string) (Window, error) {
	bad := func(value, problem, fix string) (Window, error) {
		return Window{}, &Error{Value: clip(value), Problem: problem, Fix: fix}
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return bad(s, "is not a send window", specLayout+"; or leave the window out to send at any time")
	}
	from, to, ok := strings.Cut(fields[0], "-")
	switch {
	case !ok:
		return bad(fields[0], "is not a window's hours", specLayout)
	case len(fields) == 1:
		return bad(s, "has no time zone", specLayout)
	case len(fields) > 3:
		return bad(s, "has more than hours, a zone and days", specLayout+"; no spaces within the days")
	}
	var days []string
	if len(fields) == 3 {
		var err error
		if days, err = expandDays(fields[2]); err != nil {
			return Window{}, err
		}
	}
	return ParseWindow(from, to, fields[1], days)
}

// expandDays turns "mon-wed,fri" into ["mon", "tue", "wed", "fri"].
func expandDays(s string) ([]string, error) {
	var days []string
	for item := range strings.SplitSeq(s, ",") {
		if item == "" {
			return nil, &Error{Value: clip(s), Problem: "has an empty day", Fix: "separate days by single commas, like mon,wed,fri"}
		}
		first, last, isRange := strings.Cut(item, "-")
		if !isRange {
			days = append(days, item)
			continue
		}
		a, err := parseDay(first)
		if err != nil {
			return nil, err
		}
		b, err := parseDay(last)
		if err != nil {
			return nil, err
		}
		if a == b {
			return nil, &Error{Value: clip(item), Problem: "is a range of days that starts and ends on one day",
				Fix: "give the day alone (" + dayNames[a] + "), or leave the days out for every day"}
		}
		for d := a; ; d = (d + 1) % 7 {
			days = append(days, dayNames[d])
			if d == b {
				break
			}
		}
	}
	return days, nil
}

// parseTimeOfDay reads "HH:MM"; end says it is a window's To, which may
// be "24:00".
func parseTimeOfDay(s string, end bool) (TimeOfDay, error) {
	which, fix := "the window's start (from)", "give HH:MM from 00:00 to 23:59, like 08:00"
	if end {
		which, fix = "the window's end (to)", "give HH:MM from 00:01 to 24:00 (the end of the day), like 21:00"
	}
	digits := len(s) == 5 && s[2] == ':'
	for i := 0; digits && i < 5; i++ {
		digits = i == 2 || (s[i] >= '0' && s[i] <= '9')
	}
	if !digits {
		return 0, &Error{Value: clip(s), Problem: "is not a time of day for " + which, Fix: fix}
	}
	h := int(s[0]-'0')*10 + int(s[1]-'0')
	m := int(s[3]-'0')*10 + int(s[4]-'0')
	switch {
	case h == 24 && m == 0 && !end:
		return 0, &Error{Value: s, Problem: "is the end of the day, too late for " + which, Fix: "open the window at 00:00 instead"}
	case h == 24 && m == 0:
		return endOfDay, nil
	case h > 23 || m > 59:
		return 0, &Error{Value: s, Problem: "is not a time of day for " + which, Fix: fix}
	}
	return TimeOfDay(h*60 + m), nil
}

// parseDay reads a day's short or full name, in any case.
func parseDay(s string) (time.Weekday, error) {
	lower := strings.ToLower(s)
	for d := time.Sunday; d <= time.Saturday; d++ {
		if lower == dayNames[d] || lower == strings.ToLower(d.String()) {
			return d, nil
		}
	}
	return 0, &Error{Value: clip(s), Problem: "is not a day of the week", Fix: "give mon, tue, wed, thu, fri, sat or sun (or the full name)"}
}

// Validate reports whether w is a window ParseWindow could have made, with
// an *Error if not. The zero Window is valid.
func (w Window) Validate() error {
	if w.IsZero() {
		return nil
	}
	_, err := w.location()
	return err
}

// location is w's zone, or why w is invalid. It is LoadZone's cached
// zone, so a Window need not hold it.
func (w Window) location() (*time.Location, error) {
	bad := func(value, problem, fix string) (*time.Location, error) {
		return nil, &Error{Value: value, Problem: problem, Fix: fix}
	}
	switch {
	case w.From < 0 || w.From >= endOfDay:
		return bad(fmt.Sprint(int(w.From)), "is not a window's From (minutes after midnight)", "give 0 to 1439")
	case w.To < 0 || w.To > endOfDay:
		return bad(fmt.Sprint(int(w.To)), "is not a window's To (minutes after midnight)", "give 0 to 1440 (both midnight)")
	case w.From == w.To:
		return bad(w.From.String()+"-"+w.To.String(), "opens and closes at the same time",
			"give a window that is open part of the day, or leave the window out to send at any time")
	case w.Days&^allDays != 0:
		return bad(fmt.Sprintf("%#x", uint8(w.Days)), "is not a set of days", "set only bits 0 (Sunday) to 6 (Saturday)")
	}
	return LoadZone(w.Zone)
}

// IsZero reports whether w is the zero Window, no window at all.
func (w Window) IsZero() bool { return w == Window{} }

// String writes w as ParseWindowSpec reads it, "08:00-21:00
// America/New_York mon-fri", the days left out when every day: for every
// w that ParseWindow makes, ParseWindowSpec(w.String()) == w. The zero
// Window is "".
func (w Window) String() string {
	if w.IsZero() {
		return ""
	}
	s := w.From.String() + "-" + w.To.String() + " " + w.Zone
	if days := w.Days & allDays; days != 0 && days != allDays {
		s += " " + days.String()
	}
	return s
}

// windowJSON is a Window as the API shows it.
type windowJSON struct {
	From     string    `json:"from"`
	To       string    `json:"to"`
	TimeZone string    `json:"timeZone"`
	Days     *[]string `json:"days,omitempty"`
}

// MarshalJSON writes w as the API shows it: {"from": "08:00", "to":
// "21:00", "timeZone": "America/New_York", "days": ["mon", "tue"]}, days
// Monday first and left out when every day. The zero Window is null; an
// invalid one is an error.
func (w Window) MarshalJSON() ([]byte, error) {
	if w.IsZero() {
		return []byte("null"), nil
	}
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("window: %w", err)
	}
	out := windowJSON{From: w.From.String(), To: w.To.String(), TimeZone: w.Zone}
	if days := w.Days; days != 0 && days != allDays {
		names := days.names()
		out.Days = &names
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes, and validates it as
// ParseWindow does; unknown fields and an empty list of days are refused.
// Null leaves w as it is.
func (w *Window) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var in windowJSON
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("window: %w; give {\"from\": \"08:00\", \"to\": \"21:00\", \"timeZone\": \"America/New_York\"}", err)
	}
	var days []string
	if in.Days != nil {
		if len(*in.Days) == 0 {
			return &Error{Value: "[]", Problem: "are the window's days, and name none", Fix: "leave days out for every day"}
		}
		days = *in.Days
	}
	parsed, err := ParseWindow(in.From, in.To, in.TimeZone, days)
	if err != nil {
		return err
	}
	*w = parsed
	return nil
}

// Contains reports whether w is open at instant t: whether the wall clock
// in w's zone reads a time within it on a day it opens. The zero Window is
// open at every instant; an invalid one never.
func (w Window) Contains(t time.Time) bool {
	if w.IsZero() {
		return true
	}
	loc, err := w.location()
	if err != nil {
		return false
	}
	_, off := t.In(loc).Zone()
	return w.openAt(t.UTC().Add(time.Duration(off) * time.Second))
}

// Next is the earliest instant at or after t at which w is open: t itself
// if w is open at t, else the instant it opens, which is the instant of a
// daylight-saving change if the change moves the wall clock into the
// window. It is exact to the nanosecond, in t's location. Next returns the
// zero Time only if w is invalid (or if its zone changed offset 64 times
// before it opened, which no zone in the database does).
func (w Window) Next(t time.Time) time.Time {
	if w.IsZero() {
		return t
	}
	loc, err := w.location()
	if err != nil {
		return time.Time{}
	}
	// Between two of the zone's transitions the offset is fixed, and the
	// wall clock runs with the instant: find the window's next opening on
	// the wall clock, and take it if it comes before the next transition,
	// else look again from the transition. The opening is at most eight
	// days away on the wall clock, so few transitions are crossed; the
	// bound only keeps a zone database with absurd transitions finite.
	u := t
	for i := range 64 {
		local := u.In(loc)
		_, off := local.Zone()
		end := zoneEnd(local)
		shift := time.Duration(off) * time.Second
		open := w.nextOpen(u.UTC().Add(shift)).Add(-shift)
		switch {
		case i == 0 && open.Equal(t):
			return t
		case end.IsZero() || open.Before(end):
			return open.In(t.Location())
		}
		u = end
	}
	return time.Time{}
}

// opensOn reports whether w opens on day.
func (w Window) opensOn(day time.Weekday) bool {
	return w.Days&allDays == 0 || w.Days&(1<<day) != 0
}

// openAt reports whether w is open when the wall clock reads wall (a wall
// time written in UTC).
func (w Window) openAt(wall time.Time) bool {
	sec := wall.Hour()*3600 + wall.Minute()*60 + wall.Second()
	from, to, day := int(w.From)*60, int(w.To)*60, wall.Weekday()
	if w.From < w.To {
		return sec >= from && sec < to && w.opensOn(day)
	}
	return (sec >= from && w.opensOn(day)) || (sec < to && w.opensOn((day+6)%7))
}

// nextOpen is the earliest wall time at or after wall (written in UTC) at
// which w is open, reading the wall clock as if it ran without changes.
func (w Window) nextOpen(wall time.Time) time.Time {
	if w.openAt(wall) {
		return wall
	}
	midnight := time.Date(wall.Year(), wall.Month(), wall.Day(), 0, 0, 0, 0, time.UTC)
	from := time.Duration(w.From) * time.Minute
	for day := range 8 {
		open := midnight.Add(time.Duration(day)*24*time.Hour + from)
		if open.After(wall) && w.opensOn(open.Weekday()) {
			return open
		}
	}
	panic("localtime: a window opens on no day") // opensOn holds on some day of any eight
}
