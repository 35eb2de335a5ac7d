package recur

import (
	"fmt"
	"unicode/utf8"
)

// An Error is a recurrence rule, or a series, that cannot be used. It
// names the part that is wrong and what was given, says what is wrong and
// how to fix it:
//
//	rrule BYDAY "-6FR": ordinal -6 is beyond -5 for FREQ=MONTHLY; give -5 to -1 or 1 to 5
type Error struct {
	Part    string // the rule part ("BYDAY", "UNTIL"), or "" for the rule or series as a whole
	Value   string // what was given for it, clipped; "" when nothing was
	Problem string
	Fix     string
}

func (e *Error) Error() string {
	s := "rrule"
	if e.Part != "" {
		s += " " + e.Part
	}
	if e.Value != "" {
		s += fmt.Sprintf(" %q", e.Value)
	}
	s += ": " + e.Problem
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

// clip shortens what a caller gave to a length fit for an error message.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	n := 40
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func refuse(part, value, problem, fix string) *Error {
	return &Error{Part: part, Value: clip(value), Problem: problem, Fix: fix}
}
