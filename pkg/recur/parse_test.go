package recur_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/recur"
)

func TestParseReadsTheCommonPart(t *testing.T) {
	until := localtime.Wall{Year: 2027, Month: 12, Day: 31, Hour: 23, Minute: 59, Second: 59}
	untilUTC := time.Date(2027, 12, 31, 23, 59, 59, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want recur.Rule
	}{
		{"FREQ=MONTHLY;BYDAY=-1FR;COUNT=12", recur.Rule{Freq: recur.Monthly, Interval: 1,
			ByDay: []recur.WeekdayNum{{N: -1, Day: time.Friday}}, Count: 12}},
		{"RRULE:FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE", recur.Rule{Freq: recur.Weekly, Interval: 2,
			ByDay: []recur.WeekdayNum{{Day: time.Monday}, {Day: time.Wednesday}}}},
		{"rrule:freq=yearly;bymonth=11;byday=+4th", recur.Rule{Freq: recur.Yearly, Interval: 1,
			ByMonth: []time.Month{time.November}, ByDay: []recur.WeekdayNum{{N: 4, Day: time.Thursday}}}},
		{"COUNT=3;BYMONTHDAY=31,-1;FREQ=MONTHLY;WKST=MO", recur.Rule{Freq: recur.Monthly, Interval: 1,
			ByMonthDay: []int{31, -1}, Count: 3}},
		{"  FREQ=DAILY;INTERVAL=1  ", recur.Rule{Freq: recur.Daily, Interval: 1}},
		{"FREQ=DAILY;UNTIL=20271231T235959", recur.Rule{Freq: recur.Daily, Interval: 1, Until: &until}},
		{"FREQ=DAILY;UNTIL=20271231", recur.Rule{Freq: recur.Daily, Interval: 1, Until: &until}}, // the end of the day
		{"FREQ=DAILY;UNTIL=20271231T235959Z", recur.Rule{Freq: recur.Daily, Interval: 1, UntilUTC: &untilUTC}},
		{"FREQ=DAILY;until=20271231t235959z", recur.Rule{Freq: recur.Daily, Interval: 1, UntilUTC: &untilUTC}},
		{"FREQ=YEARLY;BYDAY=-53SU,53MO", recur.Rule{Freq: recur.Yearly, Interval: 1,
			ByDay: []recur.WeekdayNum{{N: -53, Day: time.Sunday}, {N: 53, Day: time.Monday}}}},
		{"FREQ=DAILY;INTERVAL=1000;COUNT=1000", recur.Rule{Freq: recur.Daily, Interval: 1000, Count: 1000}},
	} {
		got, err := recur.Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Parse(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// Every refusal is an *Error naming the part, with a fix.
func TestParseRefusesWithAFix(t *testing.T) {
	for _, c := range []struct {
		in, part, problem string
	}{
		{"", "", "is empty"},
		{"RRULE:", "", "is empty"},
		{"DTSTART:20270101T090000\nRRULE:FREQ=DAILY", "", "more than one rule"},
		{"FREQ=DAILY;", "", "empty part"},
		{"FREQ=DAILY;;COUNT=2", "", "empty part"},
		{"FREQ", "", "is not a part"},
		{"FREQ=DAILY;FREQ=WEEKLY", "FREQ", "given twice"},
		{"FREQ=DAILY;COUNT=2;count=3", "COUNT", "given twice"},
		{"FREQ=MONTHLY;BYDAY=MO;BYSETPOS=-1", "BYSETPOS", "not supported"},
		{"FREQ=DAILY;BYHOUR=9,17", "BYHOUR", "not supported"},
		{"FREQ=DAILY;BYMINUTE=30", "BYMINUTE", "not supported"},
		{"FREQ=DAILY;BYSECOND=1", "BYSECOND", "not supported"},
		{"FREQ=YEARLY;BYWEEKNO=20", "BYWEEKNO", "not supported"},
		{"FREQ=YEARLY;BYYEARDAY=100", "BYYEARDAY", "not supported"},
		{"FREQ=DAILY;X-NAME=1", "X-NAME", "not an RRULE part"},
		{"FREQ=DAILY;RSCALE=GREGORIAN", "RSCALE", "not an RRULE part"},
		{"FREQ=DAILY;COUNT=", "COUNT", "has no value"},
		{"COUNT=2", "FREQ", "is missing"},
		{"FREQ=HOURLY", "FREQ", "not supported"},
		{"FREQ=MINUTELY", "FREQ", "not supported"},
		{"FREQ=SECONDLY", "FREQ", "not supported"},
		{"FREQ=FORTNIGHTLY", "FREQ", "not a frequency"},
		{"FREQ=WEEKLY;WKST=SU", "WKST", "not supported"},
		{"FREQ=DAILY;INTERVAL=0", "INTERVAL", "between 1 and 1000"},
		{"FREQ=DAILY;INTERVAL=1001", "INTERVAL", "between 1 and 1000"},
		{"FREQ=DAILY;INTERVAL=-1", "INTERVAL", "not a number"},
		{"FREQ=DAILY;INTERVAL=two", "INTERVAL", "not a number"},
		{"FREQ=DAILY;INTERVAL=99999999999999999999", "INTERVAL", "not a number"},
		{"FREQ=DAILY;COUNT=0", "COUNT", "between 1 and 1000"},
		{"FREQ=DAILY;COUNT=1001", "COUNT", "between 1 and 1000"},
		{"FREQ=DAILY;COUNT=2;UNTIL=20271231", "COUNT", "MUST NOT"},
		{"FREQ=DAILY;UNTIL=2027", "UNTIL", "not a date"},
		{"FREQ=DAILY;UNTIL=20271231Z", "UNTIL", "not a date"},
		{"FREQ=DAILY;UNTIL=20271231T2359", "UNTIL", "not a date"},
		{"FREQ=DAILY;UNTIL=2027-12-31", "UNTIL", "not a date"},
		{"FREQ=DAILY;UNTIL=20270230", "UNTIL", "exists on a calendar"},
		{"FREQ=DAILY;UNTIL=20271231T240000", "UNTIL", "exists on a calendar"},
		{"FREQ=DAILY;UNTIL=00001231T000000", "UNTIL", "exists on a calendar"},
		{"FREQ=YEARLY;BYMONTH=13", "BYMONTH", "not a month"},
		{"FREQ=YEARLY;BYMONTH=0", "BYMONTH", "not a month"},
		{"FREQ=YEARLY;BYMONTH=-1", "BYMONTH", "not a number"},
		{"FREQ=YEARLY;BYMONTH=1,,2", "BYMONTH", "not a number"},
		{"FREQ=YEARLY;BYMONTH=3,3", "BYMONTH", "given twice"},
		{"FREQ=MONTHLY;BYMONTHDAY=0", "BYMONTHDAY", "not a day of the month"},
		{"FREQ=MONTHLY;BYMONTHDAY=32", "BYMONTHDAY", "not a day of the month"},
		{"FREQ=MONTHLY;BYMONTHDAY=-32", "BYMONTHDAY", "not a day of the month"},
		{"FREQ=MONTHLY;BYMONTHDAY=1,+1", "BYMONTHDAY", "given twice"},
		{"FREQ=WEEKLY;BYMONTHDAY=1", "BYMONTHDAY", "FREQ=WEEKLY"},
		{"FREQ=WEEKLY;BYDAY=XX", "BYDAY", "not a day of the week"},
		{"FREQ=WEEKLY;BYDAY=M", "BYDAY", "not a day of the week"},
		{"FREQ=MONTHLY;BYDAY=0MO", "BYDAY", "ordinal 0"},
		{"FREQ=MONTHLY;BYDAY=+MO", "BYDAY", "not a number"},
		{"FREQ=MONTHLY;BYDAY=1.5MO", "BYDAY", "not a number"},
		{"FREQ=WEEKLY;BYDAY=MO,MO", "BYDAY", "given twice"},
		{"FREQ=MONTHLY;BYDAY=1MO,+1MO", "BYDAY", "given twice"},
		{"FREQ=DAILY;BYDAY=1MO", "BYDAY", "FREQ=DAILY"},
		{"FREQ=WEEKLY;BYDAY=-1FR", "BYDAY", "FREQ=WEEKLY"},
		{"FREQ=MONTHLY;BYDAY=-6FR", "BYDAY", "beyond -5"},
		{"FREQ=MONTHLY;BYDAY=6FR", "BYDAY", "beyond 5"},
		{"FREQ=YEARLY;BYDAY=54MO", "BYDAY", "beyond 53"},
		{"FREQ=YEARLY;BYDAY=-54MO", "BYDAY", "beyond -53"},
		{"FREQ=YEARLY;BYMONTH=3;BYDAY=6SU", "BYDAY", "within the month"},
	} {
		_, err := recur.Parse(c.in)
		var e *recur.Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, want an *Error", c.in, err)
			continue
		}
		if e.Part != c.part || !strings.Contains(e.Problem, c.problem) || e.Fix == "" {
			t.Errorf("Parse(%q) = Part %q, %q, fix %q; want Part %q, a problem with %q and a fix", c.in, e.Part, e.Problem, e.Fix,
				c.part, c.problem)
		}
	}
}

func TestErrorReadsAsPartValueProblemFix(t *testing.T) {
	_, err := recur.Parse("FREQ=MONTHLY;BYDAY=-6FR")
	const want = `rrule BYDAY "-6FR": ordinal -6 is beyond -5 for FREQ=MONTHLY; give -5 to -1 or 1 to 5`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestValidateChecksARuleBuiltInGo(t *testing.T) {
	until := localtime.Wall{Year: 2027, Month: 2, Day: 30}
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		rule recur.Rule
		part string
	}{
		{recur.Rule{}, "FREQ"},
		{recur.Rule{Freq: recur.Yearly + 1}, "FREQ"},
		{recur.Rule{Freq: recur.Daily, Interval: -1}, "INTERVAL"},
		{recur.Rule{Freq: recur.Daily, Count: -1}, "COUNT"},
		{recur.Rule{Freq: recur.Daily, Until: &until}, "UNTIL"},
		{recur.Rule{Freq: recur.Daily, Until: &localtime.Wall{Year: 2027, Month: 1, Day: 1}, UntilUTC: &now}, "UNTIL"},
		{recur.Rule{Freq: recur.Daily, ByDay: []recur.WeekdayNum{{Day: 7}}}, "BYDAY"},
		{recur.Rule{Freq: recur.Daily, ByMonth: []time.Month{0}}, "BYMONTH"},
	} {
		var e *recur.Error
		if err := c.rule.Validate(); !errors.As(err, &e) || e.Part != c.part || e.Fix == "" {
			t.Errorf("%+v: Validate() = %v, want an *Error about %s with a fix", c.rule, err, c.part)
		}
	}
	if err := (recur.Rule{Freq: recur.Daily}).Validate(); err != nil {
		t.Errorf("Interval 0 (read as 1): %v", err)
	}
}

// String writes the parts in a fixed order, FREQ first; Parse reads it back
// to an equal Rule.
func TestStringIsCanonicalAndRoundTrips(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"FREQ=MONTHLY;BYDAY=-1FR;COUNT=12", "FREQ=MONTHLY;BYDAY=-1FR;COUNT=12"},
		{"COUNT=12;byday=-1fr;FREQ=monthly;INTERVAL=1;WKST=MO", "FREQ=MONTHLY;BYDAY=-1FR;COUNT=12"},
		{"RRULE:UNTIL=20271231;FREQ=DAILY", "FREQ=DAILY;UNTIL=20271231T235959"},
		{"FREQ=DAILY;UNTIL=20270328T013000Z", "FREQ=DAILY;UNTIL=20270328T013000Z"},
		{"BYDAY=+4TH;BYMONTH=11;FREQ=YEARLY;INTERVAL=2", "FREQ=YEARLY;INTERVAL=2;BYMONTH=11;BYDAY=4TH"},
		{"FREQ=YEARLY;BYMONTHDAY=-1,29;BYMONTH=2,1", "FREQ=YEARLY;BYMONTH=2,1;BYMONTHDAY=-1,29"},
		{"FREQ=WEEKLY;BYDAY=SU,SA,FR,TH,WE,TU,MO", "FREQ=WEEKLY;BYDAY=SU,SA,FR,TH,WE,TU,MO"},
		{"FREQ=MONTHLY;BYMONTHDAY=+007", "FREQ=MONTHLY;BYMONTHDAY=7"},
	} {
		r, err := recur.Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := r.String(); got != c.want {
			t.Errorf("Parse(%q).String() = %q, want %q", c.in, got, c.want)
		}
		back, err := recur.Parse(r.String())
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", r.String(), back, err, r)
		}
	}
}
