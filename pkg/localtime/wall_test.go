package localtime_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
)

func TestParseWallReadsLocalDateAndTime(t *testing.T) {
	for _, c := range []struct {
		in   string
		want localtime.Wall
		out  string // String(), if not in
	}{
		{"2027-03-28T02:30", localtime.Wall{Year: 2027, Month: time.March, Day: 28, Hour: 2, Minute: 30}, ""},
		{"2027-03-28T02:30:15", localtime.Wall{Year: 2027, Month: time.March, Day: 28, Hour: 2, Minute: 30, Second: 15}, ""},
		{"2027-03-28t02:30", localtime.Wall{Year: 2027, Month: time.March, Day: 28, Hour: 2, Minute: 30}, "2027-03-28T02:30"},
		{"2027-03-28T02:30:00", localtime.Wall{Year: 2027, Month: time.March, Day: 28, Hour: 2, Minute: 30}, "2027-03-28T02:30"},
		{"2028-02-29T23:59:59", localtime.Wall{Year: 2028, Month: time.February, Day: 29, Hour: 23, Minute: 59, Second: 59}, ""},
	} {
		w, err := localtime.ParseWall(c.in)
		if err != nil || w != c.want {
			t.Errorf("ParseWall(%q) = %v, %v; want %v", c.in, w, err, c.want)
			continue
		}
		out := c.out
		if out == "" {
			out = c.in
		}
		if w.String() != out {
			t.Errorf("ParseWall(%q).String() = %q, want %q", c.in, w.String(), out)
		}
	}
}

func TestParseWallRefusesWithAFix(t *testing.T) {
	for _, c := range []struct{ in, fix string }{ // a word of the fix
		{"", "2027-03-28T09:30"},
		{"2027-02-29T09:00", "day of the month"}, // 2027 is not a leap year
		{"2027-04-31T09:00", "day of the month"},
		{"2027-03-28T24:00", "00:00 to 23:59:59"},
		{"2027-03-28T09:60", "00:00 to 23:59:59"},
		{"2027-03-28T09:00Z", "timeZone"},
		{"2027-03-28T09:00z", "timeZone"},
		{"2027-03-28T09:00+01:00", "timeZone"},
		{"2027-03-28T09:00-05:00", "timeZone"},
		{"2027-03-28T09:00:00.5", "whole seconds"},
		{"2027-03-28 09:00", "2027-03-28T09:30"},
		{"27-03-28T09:00", "2027-03-28T09:30"},
		{"2027-3-28T09:00", "2027-03-28T09:30"},
		{"2027-03-28T9:00", "2027-03-28T09:30"},
		{"2027-03-28T09:00:", "2027-03-28T09:30"},
		{"2027-03-28T 9:00", "2027-03-28T09:30"},
		{"0000-03-28T09:00", "day of the month"},
	} {
		t.Run(c.in, func(t *testing.T) {
			w, err := localtime.ParseWall(c.in)
			var e *localtime.Error
			if !errors.As(err, &e) {
				t.Fatalf("ParseWall = %v, %v; want an *Error", w, err)
			}
			if !strings.Contains(e.Fix, c.fix) || !strings.HasPrefix(err.Error(), `"`+c.in+`"`) {
				t.Errorf("error %q; want it to quote the input and a fix that says %q", err, c.fix)
			}
		})
	}
}
