package recur_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/recur"
)

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := localtime.LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustWall(t testing.TB, s string) localtime.Wall {
	t.Helper()
	w, err := localtime.ParseWall(s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func series(t testing.TB, rule, start, zone string) recur.Series {
	t.Helper()
	r, err := recur.Parse(rule)
	if err != nil {
		t.Fatal(err)
	}
	return recur.Series{Rule: r, Start: mustWall(t, start), Zone: mustZone(t, zone)}
}

func all(s recur.Series) []recur.Occurrence { return take(s, -1) }

// take is s's first n occurrences; all of them if n < 0.
func take(s recur.Series, n int) []recur.Occurrence {
	var out []recur.Occurrence
	it := s.Iter()
	for o, ok := it.Next(); ok && len(out) != n; o, ok = it.Next() {
		out = append(out, o)
	}
	return out
}

func walls(os []recur.Occurrence) string {
	var s []string
	for _, o := range os {
		s = append(s, o.Wall.String())
	}
	return strings.Join(s, " ")
}

func TestCheckSaysWhenASeriesHasNoOccurrenceOrTooFew(t *testing.T) {
	for _, c := range []struct {
		rule, start, part, problem string
	}{
		{"FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "2027-01-01T09:00", "", "matches no date"},
		{"FREQ=MONTHLY;BYMONTH=4;BYMONTHDAY=31", "2027-01-01T09:00", "", "matches no date"},
		{"FREQ=YEARLY;BYMONTH=2", "2027-01-30T09:00", "", "the day is the start's, 30"},
		{"FREQ=MONTHLY;BYMONTHDAY=1;BYDAY=-1MO", "2027-01-01T09:00", "", "matches no date"},
		{"FREQ=YEARLY;INTERVAL=4;BYMONTH=2;BYMONTHDAY=29", "2025-01-01T09:00", "", "INTERVAL=4"},
		{"FREQ=DAILY;INTERVAL=7;BYDAY=TU", "2027-01-04T09:00", "", "INTERVAL=7"}, // every 7th day from a Monday
		{"FREQ=MONTHLY;INTERVAL=12;BYMONTH=3", "2027-01-15T09:00", "", "INTERVAL=12"},
		{"FREQ=DAILY;UNTIL=20261231", "2027-01-01T09:00", "UNTIL", "before the first occurrence, 2027-01-01T09:00"},
		{"FREQ=MONTHLY;BYDAY=-1FR;UNTIL=20270128T000000Z", "2027-01-01T09:00", "UNTIL", "before the first occurrence, 2027-01-29"},
		{"FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;COUNT=1000", "9000-01-01T09:00", "COUNT", "more than the 242 occurrences"},
		{"FREQ=DAILY;COUNT=3", "9999-12-30T09:00", "COUNT", "more than the 2 occurrences"},
	} {
		err := series(t, c.rule, c.start, "Europe/Berlin").Check()
		var e *recur.Error
		if !errors.As(err, &e) || e.Part != c.part || !strings.Contains(e.Problem, c.problem) || e.Fix == "" {
			t.Errorf("%s from %s: Check() = %v; want an *Error about %q, %q, with a fix", c.rule, c.start, err, c.part, c.problem)
		}
		if c.part != "COUNT" {
			if o, ok := series(t, c.rule, c.start, "Europe/Berlin").First(); ok {
				t.Errorf("%s from %s: First() = %s, want none", c.rule, c.start, o.Wall)
			}
		}
	}
	berlin := mustZone(t, "Europe/Berlin")
	for _, s := range []recur.Series{
		{Rule: recur.Rule{Freq: recur.Daily}, Start: localtime.Wall{Year: 2027, Month: 1, Day: 1}},
		{Rule: recur.Rule{Freq: recur.Daily}, Start: localtime.Wall{Year: 2027, Month: 2, Day: 29}, Zone: berlin},
		{Rule: recur.Rule{Freq: recur.Daily}, Start: localtime.Wall{Year: 10000, Month: 1, Day: 1}, Zone: berlin},
		{Rule: recur.Rule{}, Start: localtime.Wall{Year: 2027, Month: 1, Day: 1}, Zone: berlin},
	} {
		var e *recur.Error
		if err := s.Check(); !errors.As(err, &e) || e.Fix == "" {
			t.Errorf("%+v: Check() = %v, want an *Error with a fix", s, err)
		}
		if _, ok := s.First(); ok || s.After(time.Time{}, 5) != nil {
			t.Errorf("%+v has an occurrence", s)
		}
	}
	for _, rule := range []string{"FREQ=DAILY", "FREQ=MONTHLY;BYMONTHDAY=31;COUNT=1000", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;COUNT=12",
		"FREQ=DAILY;INTERVAL=1000;COUNT=2", "FREQ=WEEKLY;UNTIL=20270101T090000"} {
		if err := series(t, rule, "2027-01-01T09:00", "Europe/Berlin").Check(); err != nil {
			t.Errorf("%s: Check() = %v", rule, err)
		}
	}
}

// A rule that can never match ends its iteration, however its
// impossibility comes about.
func TestImpossibleRulesEnd(t *testing.T) {
	for _, rule := range []string{
		"FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
		"FREQ=DAILY;BYMONTH=4;BYMONTHDAY=31",
		"FREQ=DAILY;INTERVAL=7;BYDAY=TU",
		"FREQ=DAILY;INTERVAL=14;BYDAY=TU,WE,TH",
		"FREQ=WEEKLY;INTERVAL=2;BYMONTH=2;BYDAY=MO;UNTIL=20270201T000000",
		"FREQ=YEARLY;INTERVAL=400;BYMONTH=2;BYMONTHDAY=29",
		"FREQ=YEARLY;INTERVAL=1000;BYMONTH=2;BYMONTHDAY=29",
		"FREQ=MONTHLY;INTERVAL=24;BYMONTH=2,4,6,8,10,12",
		"FREQ=MONTHLY;BYMONTHDAY=13;BYDAY=1FR,-1FR",
	} {
		if got := all(series(t, rule, "2027-01-04T09:00", "America/New_York")); len(got) != 0 {
			t.Errorf("%s: %s", rule, walls(got))
		}
	}
}

func TestStartIsAnOccurrenceOnlyIfTheRuleMatchesIt(t *testing.T) {
	s := series(t, "FREQ=WEEKLY;BYDAY=MO;COUNT=2", "2027-11-03T09:00", "Europe/Berlin") // a Wednesday
	if got := walls(all(s)); got != "2027-11-08T09:00 2027-11-15T09:00" {
		t.Errorf("occurrences %s", got)
	}
	if o, ok := s.First(); !ok || o.N != 1 || o.Wall.String() != "2027-11-08T09:00" {
		t.Errorf("First() = %+v, %v", o, ok)
	}
}

func TestOccurrencesStopAtTheYear9999(t *testing.T) {
	for _, c := range []struct{ rule, start, zone, want string }{
		{"FREQ=DAILY", "9999-12-30T23:59:59", "Pacific/Kiritimati", "9999-12-30T23:59:59 9999-12-31T23:59:59"},
		{"FREQ=YEARLY;INTERVAL=3", "9990-07-01T00:00", "UTC", "9990-07-01T00:00 9993-07-01T00:00 9996-07-01T00:00 9999-07-01T00:00"},
	} {
		if got := walls(all(series(t, c.rule, c.start, c.zone))); got != c.want {
			t.Errorf("%s from %s: occurrences %s, want %s", c.rule, c.start, got, c.want)
		}
	}
}

// A reminder at a time of day that does not exist on the day clocks spring
// forward is kept, later by the gap; one that exists twice is the first.
func TestAfterAcrossDaylightSavingChanges(t *testing.T) {
	s := series(t, "FREQ=DAILY", "2027-01-01T02:30", "Europe/Berlin")
	for _, c := range []struct {
		after string
		want  []string // wall@instant
	}{
		{"2027-03-27T01:30:00Z", []string{"2027-03-28T02:30@2027-03-28T01:30:00Z", "2027-03-29T02:30@2027-03-29T00:30:00Z"}},
		{"2027-03-28T01:29:59Z", []string{"2027-03-28T02:30@2027-03-28T01:30:00Z", "2027-03-29T02:30@2027-03-29T00:30:00Z"}},
		{"2027-10-30T00:30:00Z", []string{"2027-10-31T02:30@2027-10-31T00:30:00Z", "2027-11-01T02:30@2027-11-01T01:30:00Z"}},
		{"2027-10-31T01:30:00Z", []string{"2027-11-01T02:30@2027-11-01T01:30:00Z", "2027-11-02T02:30@2027-11-02T01:30:00Z"}},
	} {
		after, _ := time.Parse(time.RFC3339, c.after)
		var got []string
		for _, o := range s.After(after, 2) {
			got = append(got, o.Wall.String()+"@"+o.At.Format(time.RFC3339))
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("After(%s) = %v, want %v", c.after, got, c.want)
		}
	}
}

// After jumps to its instant a year at a time: it gives the same
// occurrences, with the same places, as iterating from the start, and does
// not resolve the ones before.
func TestAfterIsIteratingFromTheStartWithoutTheWalk(t *testing.T) {
	start := "2022-02-28T08:15"
	for _, c := range []struct{ rule, zone string }{
		{"FREQ=DAILY", "Europe/Berlin"},
		{"FREQ=DAILY;INTERVAL=9;BYMONTHDAY=1,2,3,4,5,6,7,8,9,-1", "Australia/Lord_Howe"},
		{"FREQ=DAILY;COUNT=1000", "America/New_York"},
		{"FREQ=WEEKLY;INTERVAL=3;BYDAY=MO,SU", "Pacific/Chatham"},
		{"FREQ=WEEKLY;BYMONTH=1,12;BYDAY=TU", "Asia/Kathmandu"},
		{"FREQ=MONTHLY;INTERVAL=5;BYDAY=-1FR,1MO", "America/Santiago"},
		{"FREQ=MONTHLY;BYMONTHDAY=31", "America/St_Johns"},
		{"FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", "Australia/Adelaide"},
		{"FREQ=YEARLY;BYDAY=20MO;UNTIL=20400101", "Europe/Berlin"},
	} {
		s := series(t, c.rule, start, c.zone)
		every := take(recur.Series{Rule: withCount(s.Rule, 0), Start: s.Start, Zone: s.Zone}, 20000)
		at := func(i int) time.Time { return every[i].At }
		for _, i := range []int{0, 1, 400, 1000, 1826, 3000, 19990, len(every) - 4} {
			if i < 0 || i >= len(every) {
				continue
			}
			for _, t0 := range []time.Time{at(i).Add(-time.Second), at(i), at(i).Add(time.Hour), at(i).Add(-49 * time.Hour)} {
				got := s.After(t0, 3)
				var want []recur.Occurrence
				for _, o := range every {
					if o.At.After(t0) && len(want) < 3 && (s.Rule.Count == 0 || o.N <= s.Rule.Count) {
						want = append(want, o)
					}
				}
				if walls(got) != walls(want) || len(got) > 0 && got[0].N != want[0].N {
					t.Fatalf("%s: After(%s) = %s, want %s", c.rule, t0.Format(time.RFC3339), walls(got), walls(want))
				}
			}
		}
	}
	s := series(t, "FREQ=DAILY", start, "Europe/Berlin")
	fiveYears := mustWall(t, "2027-03-01T00:00")
	t0, _ := localtime.Resolve(fiveYears, s.Zone)
	if got := s.After(t0, 3); len(got) != 3 || got[0].N != 1828 {
		t.Fatalf("After 5 years = %+v", got)
	}
	if n := recur.ResolvedByAfter(s, t0, 3); n > 5 {
		t.Errorf("After(5 years on, 3) resolved %d dates to instants: it walks the occurrences before", n)
	}
}

func withCount(r recur.Rule, n int) recur.Rule {
	r.Count = n
	return r
}

// Occurrences increase strictly in Wall and, for one time of day a day, in
// At too: even across gaps and repeats, a day apart is more than any
// daylight-saving change.
func TestOccurrencesIncrease(t *testing.T) {
	for _, zone := range []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham", "Asia/Kathmandu",
		"America/St_Johns", "Australia/Adelaide", "America/Santiago"} {
		for _, tod := range []string{"00:00", "00:30", "01:30", "02:15", "02:30", "02:45", "03:00", "23:30"} {
			s := series(t, "FREQ=DAILY;UNTIL=20320101", "2026-01-01T"+tod, zone)
			var last recur.Occurrence
			for i, o := range all(s) {
				if i > 0 && (o.Wall.Compare(last.Wall) <= 0 || !o.At.After(last.At)) {
					t.Fatalf("%s %s: %s (%s) after %s (%s)", zone, tod, o.Wall, o.At, last.Wall, last.At)
				}
				last = o
			}
		}
	}
}

// Samoa skipped 30 December 2011 (clocks went from 23:59:59 on the 29th to
// midnight on the 31st). 09:00 on the 30th is in that gap, moved forward by
// it (a day) to the instant of 09:00 on the 31st: the one case, a zone
// skipping a whole day, where two occurrences share an instant.
func TestAWholeDaySkippedGivesTwoOccurrencesOneInstant(t *testing.T) {
	got := all(series(t, "FREQ=DAILY;COUNT=4", "2011-12-29T09:00", "Pacific/Apia"))
	var s []string
	for _, o := range got {
		s = append(s, o.Wall.String()+"@"+o.At.Format(time.RFC3339))
	}
	want := "2011-12-29T09:00@2011-12-29T19:00:00Z 2011-12-30T09:00@2011-12-30T19:00:00Z " +
		"2011-12-31T09:00@2011-12-30T19:00:00Z 2012-01-01T09:00@2011-12-31T19:00:00Z"
	if strings.Join(s, " ") != want {
		t.Errorf("occurrences %v, want %s", s, want)
	}
}

func TestOccurrenceID(t *testing.T) {
	for _, c := range []struct{ wall, want string }{
		{"2027-03-28T09:30", "rem-1.20270328T0930"},
		{"2027-03-28T00:00", "rem-1.20270328T0000"},
		{"2027-03-28T09:30:15", "rem-1.20270328T093015"},
	} {
		if got := recur.OccurrenceID("rem-1", recur.Occurrence{N: 3, Wall: mustWall(t, c.wall)}); got != c.want {
			t.Errorf("OccurrenceID(%s) = %s, want %s", c.wall, got, c.want)
		}
	}
}
