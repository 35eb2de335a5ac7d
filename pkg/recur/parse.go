package recur

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
)

// unsupported are the RRULE parts RFC 5545 defines that Nudge refuses,
// each with what to do instead.
var unsupported = map[string]string{
	"BYSETPOS":  "give BYDAY with ordinals (-1FR) or BYMONTHDAY (-1 for the last day) instead",
	"BYHOUR":    "the time of day is the series' start; for several times a day, make one series for each",
	"BYMINUTE":  "the time of day is the series' start; for several times a day, make one series for each",
	"BYSECOND":  "the time of day is the series' start; for several times a day, make one series for each",
	"BYWEEKNO":  "give the days with BYMONTH and BYDAY or BYMONTHDAY",
	"BYYEARDAY": "give the days with BYMONTH and BYMONTHDAY",
}

// Parse reads a recurrence rule: the value of an RRULE property, such as
// "FREQ=MONTHLY;BYDAY=-1FR;COUNT=12", with or without the "RRULE:" in
// front. Parts may come in any order, and names and values in any case.
// It takes FREQ (DAILY, WEEKLY, MONTHLY, YEARLY), INTERVAL, BYDAY,
// BYMONTHDAY, BYMONTH, COUNT, UNTIL and WKST=MO, and refuses, as an *Error
// with a fix, anything else: the parts Nudge does not support (BYSETPOS,
// BYHOUR, BYMINUTE, BYSECOND, BYWEEKNO, BYYEARDAY, WKST other than MO,
// HOURLY and faster), unknown parts, a part given twice, COUNT with UNTIL,
// and values out of range (see Validate).
//
// UNTIL is a local date and time ("20271231T235959", in the series' wall
// clock: Until), a time in UTC ("20271231T235959Z", an instant: UntilUTC),
// or a date ("20271231"), which ends the series at the end of that day
// (Until 23:59:59).
func Parse(s string) (Rule, error) {
	text := strings.TrimSpace(s)
	if len(text) >= 6 && strings.EqualFold(text[:6], "RRULE:") {
		text = text[6:]
	}
	if text == "" {
		return Rule{}, refuse("", "", "is empty", "give a rule such as FREQ=WEEKLY;BYDAY=MO")
	}
	if strings.ContainsAny(text, "\r\n") || strings.Contains(strings.ToUpper(text), "DTSTART") {
		return Rule{}, refuse("", s, "holds more than one rule (a DTSTART or a second line)",
			"give only the RRULE's value; the first occurrence is the series' start, given apart")
	}
	values := map[string]string{}
	for part := range strings.SplitSeq(text, ";") {
		if part == "" {
			return Rule{}, refuse("", s, "has an empty part (two ';' together, or one at an end)", "remove the extra ';'")
		}
		key, value, ok := strings.Cut(part, "=")
		key = strings.ToUpper(key)
		if !ok {
			return Rule{}, refuse("", part, "is not a part (NAME=VALUE)", "give parts like FREQ=WEEKLY, separated by ';'")
		}
		if _, dup := values[key]; dup {
			return Rule{}, refuse(key, value, "is given twice, which RFC 5545 does not allow", "give each part once")
		}
		if fix, no := unsupported[key]; no {
			return Rule{}, refuse(key, value, "is not supported", fix)
		}
		switch key {
		case "FREQ", "INTERVAL", "COUNT", "UNTIL", "BYDAY", "BYMONTHDAY", "BYMONTH", "WKST":
		default:
			return Rule{}, refuse(key, value, "is not an RRULE part Nudge knows",
				"give FREQ, INTERVAL, COUNT or UNTIL, BYMONTH, BYMONTHDAY, BYDAY (and WKST=MO)")
		}
		if value == "" {
			return Rule{}, refuse(key, "", "has no value", "give one after the '='")
		}
		values[key] = strings.ToUpper(value)
	}
	return parseParts(values)
}

func parseParts(values map[string]string) (Rule, error) {
	var r Rule
	var err error
	freq, ok := values["FREQ"]
	if !ok {
		return Rule{}, refuse("FREQ", "", "is missing", "give FREQ=DAILY, WEEKLY, MONTHLY or YEARLY")
	}
	switch freq {
	case "DAILY":
		r.Freq = Daily
	case "WEEKLY":
		r.Freq = Weekly
	case "MONTHLY":
		r.Freq = Monthly
	case "YEARLY":
		r.Freq = Yearly
	case "HOURLY", "MINUTELY", "SECONDLY":
		return Rule{}, refuse("FREQ", freq, "is not supported: a series has one time of day, its start's",
			"give FREQ=DAILY at the least; for several times a day, make one series for each")
	default:
		return Rule{}, refuse("FREQ", freq, "is not a frequency", "give DAILY, WEEKLY, MONTHLY or YEARLY")
	}
	if wkst, ok := values["WKST"]; ok && wkst != "MO" {
		return Rule{}, refuse("WKST", wkst, "is not supported: Nudge's weeks start on Monday",
			"leave WKST out, or give WKST=MO")
	}
	r.Interval = 1
	if v, ok := values["INTERVAL"]; ok {
		fix := fmt.Sprintf("give 1 (every period, the default) to %d", MaxInterval)
		if r.Interval, err = positive("INTERVAL", v, MaxInterval, fix); err != nil {
			return Rule{}, err
		}
	}
	if v, ok := values["COUNT"]; ok {
		fix := fmt.Sprintf("give 1 to %d; Nudge bounds a counted series, so that checking it and reading it from its start"+
			" stay cheap: for a longer one give UNTIL, or no end", MaxCount)
		if r.Count, err = positive("COUNT", v, MaxCount, fix); err != nil {
			return Rule{}, err
		}
	}
	if v, ok := values["UNTIL"]; ok {
		if r.Until, r.UntilUTC, err = parseUntil(v); err != nil {
			return Rule{}, err
		}
	}
	if v, ok := values["BYMONTH"]; ok {
		for item := range strings.SplitSeq(v, ",") {
			m, err := number("BYMONTH", item, false, "give 1 (January) to 12 (December)")
			if err != nil {
				return Rule{}, err
			}
			r.ByMonth = append(r.ByMonth, time.Month(m))
		}
	}
	if v, ok := values["BYMONTHDAY"]; ok {
		for item := range strings.SplitSeq(v, ",") {
			d, err := number("BYMONTHDAY", item, true, "give 1 to 31, or -31 to -1 to count from the month's end (-1 is the last day)")
			if err != nil {
				return Rule{}, err
			}
			r.ByMonthDay = append(r.ByMonthDay, d)
		}
	}
	if v, ok := values["BYDAY"]; ok {
		for item := range strings.SplitSeq(v, ",") {
			d, err := parseWeekdayNum(item)
			if err != nil {
				return Rule{}, err
			}
			r.ByDay = append(r.ByDay, d)
		}
	}
	if err := r.Validate(); err != nil {
		return Rule{}, err
	}
	return r, nil
}

// positive reads a count from 1 to max: INTERVAL or COUNT.
func positive(part, v string, max int, fix string) (int, error) {
	n, err := number(part, v, false, fix)
	if err != nil {
		return 0, err
	}
	if n < 1 || n > max {
		return 0, refuse(part, v, fmt.Sprintf("is not between 1 and %d", max), fix)
	}
	return n, nil
}

// number reads a decimal integer of at most four digits, with a sign only
// if signed.
func number(part, v string, signed bool, fix string) (int, error) {
	digits := v
	if signed && len(v) > 0 && (v[0] == '+' || v[0] == '-') {
		digits = v[1:]
	}
	if digits == "" || len(digits) > 4 || strings.Trim(digits, "0123456789") != "" {
		return 0, refuse(part, v, "is not a number", fix)
	}
	n, _ := strconv.Atoi(digits)
	if v[0] == '-' {
		n = -n
	}
	return n, nil
}

// parseWeekdayNum reads one BYDAY entry: "MO", "+2TU", "-1FR".
func parseWeekdayNum(v string) (WeekdayNum, error) {
	const fix = "give a day (MO, TU, WE, TH, FR, SA, SU), with an ordinal in front for the Nth of the month or year (-1FR, 2TU)"
	if len(v) < 2 {
		return WeekdayNum{}, refuse("BYDAY", v, "is not a day of the week", fix)
	}
	code, ord := v[len(v)-2:], v[:len(v)-2]
	d := WeekdayNum{Day: -1}
	for i, c := range dayCodes {
		if c == code {
			d.Day = time.Weekday(i)
		}
	}
	if d.Day < 0 {
		return WeekdayNum{}, refuse("BYDAY", v, "is not a day of the week", fix)
	}
	if ord != "" {
		n, err := number("BYDAY", ord, true, fix)
		if err != nil {
			return WeekdayNum{}, refuse("BYDAY", v, "has an ordinal that is not a number", fix)
		}
		if n == 0 {
			return WeekdayNum{}, refuse("BYDAY", v, "has the ordinal 0, which names no day",
				fmt.Sprintf("give %s for every %s, or 1 (the first) or -1 (the last)", code, d.Day))
		}
		d.N = n
	}
	return d, nil
}

// parseUntil reads UNTIL's three forms: a local date and time, a time in
// UTC, a date (the end of that day).
func parseUntil(v string) (*localtime.Wall, *time.Time, error) {
	const fix = "give a local date and time like 20271231T235959, a time in UTC like 20271231T235959Z," +
		" or a date like 20271231 (the end of that day)"
	utc := strings.HasSuffix(v, "Z")
	body := strings.TrimSuffix(v, "Z")
	var w localtime.Wall
	var ok bool
	switch {
	case len(body) == 8 && !utc:
		w, ok = basicDateTime(body + "T235959")
	case len(body) == 15:
		w, ok = basicDateTime(body)
	}
	if !ok {
		return nil, nil, refuse("UNTIL", v, "is not a date or a date and time", fix)
	}
	if !validWall(w) {
		return nil, nil, refuse("UNTIL", v, "is not a date and time that exists on a calendar",
			"check the day of the month and the time (000000 to 235959)")
	}
	if utc {
		t := time.Date(w.Year, w.Month, w.Day, w.Hour, w.Minute, w.Second, 0, time.UTC)
		return nil, &t, nil
	}
	return &w, nil, nil
}

// basicDateTime reads "20271231T235959", without checking the calendar.
func basicDateTime(s string) (localtime.Wall, bool) {
	if len(s) != 15 || s[8] != 'T' || strings.Trim(s[:8]+s[9:], "0123456789") != "" {
		return localtime.Wall{}, false
	}
	n := func(from, to int) int {
		v, _ := strconv.Atoi(s[from:to])
		return v
	}
	return localtime.Wall{Year: n(0, 4), Month: time.Month(n(4, 6)), Day: n(6, 8), Hour: n(9, 11), Minute: n(11, 13), Second: n(13, 15)}, true
}
