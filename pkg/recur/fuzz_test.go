package recur_test

import (
	"encoding/binary"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/recur"
)

// fuzzZones are the zones a fuzzed series runs in: none, whole-hour,
// 30-minute (Lord Howe) and 45-minute (Chatham) changes, a change at
// midnight (Santiago), and a skipped day (Apia, 30 December 2011).
var fuzzZones = []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham",
	"America/Santiago", "Pacific/Apia"}

// FuzzRule: Parse never panics and refuses with an *Error and a fix; what
// it takes, String writes back to an equal Rule. A series of it, from a
// start and in a zone the bytes choose, gives (of its first 200)
// occurrences strictly increasing in Wall and never decreasing in At (At
// ties only where a zone skips a whole day), none before the start, past
// UNTIL or beyond COUNT, each on a real date at the start's time of day,
// each a date the rule matches (checked here without the package's
// expansion), with no matching date left out between the start and the
// tenth; Check agrees with what the iteration gives; After agrees with it.
func FuzzRule(f *testing.F) {
	for _, s := range []string{
		"FREQ=DAILY", "FREQ=DAILY;COUNT=10", "FREQ=DAILY;INTERVAL=3;BYDAY=MO,FR", "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29",
		"FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE,FR;UNTIL=20301231T235959", "FREQ=WEEKLY;BYMONTH=12;BYDAY=SU",
		"FREQ=MONTHLY;BYDAY=-1FR;COUNT=12", "FREQ=MONTHLY;BYMONTHDAY=31", "FREQ=MONTHLY;BYMONTHDAY=-1,1;BYDAY=MO,TU",
		"FREQ=MONTHLY;BYDAY=5MO,-5SU;INTERVAL=7", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", "FREQ=YEARLY;BYDAY=20MO",
		"FREQ=YEARLY;BYMONTH=11;BYDAY=4TH", "FREQ=YEARLY;BYDAY=-53SU,53MO", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
		"FREQ=YEARLY;INTERVAL=4;BYMONTH=2;BYMONTHDAY=29", "FREQ=DAILY;INTERVAL=7;BYDAY=TU", "FREQ=DAILY;UNTIL=20270328T013000Z",
		"RRULE:freq=daily;until=20271231", "FREQ=MONTHLY;BYDAY=-6FR", "FREQ=DAILY;COUNT=2;UNTIL=20271231", "FREQ=HOURLY",
		"FREQ=YEARLY;INTERVAL=1000;BYMONTHDAY=-31", "FREQ=MONTHLY;INTERVAL=24;BYMONTH=2,4,6,8,10,12",
	} {
		f.Add(s, []byte{0, 0x27, 0x0b, 3, 9, 17, 2, 30, 0})
		f.Add(s, []byte{1, 0xff, 0x00, 11, 28, 5, 2, 15, 15})
	}
	zones := make([]*time.Location, len(fuzzZones))
	for i, name := range fuzzZones {
		zones[i] = mustZone(f, name)
	}
	f.Fuzz(func(t *testing.T, text string, seed []byte) {
		r, err := recur.Parse(text)
		if err != nil {
			var e *recur.Error
			if !errors.As(err, &e) || e.Problem == "" || e.Fix == "" {
				t.Fatalf("Parse(%q) = %v, not an *Error with a fix", text, err)
			}
			return
		}
		back, err := recur.Parse(r.String())
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("Parse(%q) = %+v; its String %q reads back as %+v, %v", text, r, r.String(), back, err)
		}
		start, zone := fuzzStart(seed, zones)
		checkSeries(t, recur.Series{Rule: r, Start: start, Zone: zone})
	})
}

// fuzzStart is a start and a zone from seed: a year from 1900 to 2199 or,
// for an odd first byte, any from 1 to 9999.
func fuzzStart(seed []byte, zones []*time.Location) (localtime.Wall, *time.Location) {
	b := make([]byte, 9)
	copy(b, seed)
	u := int(binary.BigEndian.Uint16(b[1:3]))
	year := 1900 + u%300
	if b[0]&1 == 1 {
		year = 1 + u%9999
	}
	month := time.Month(1 + int(b[3])%12)
	w := localtime.Wall{Year: year, Month: month, Day: 1 + int(b[4])%monthDays(year, month),
		Hour: int(b[5]) % 24, Minute: int(b[6]) % 60, Second: int(b[7]) % 60}
	if b[7] < 200 {
		w.Second = 0
	}
	if b[6] < 128 {
		w.Minute = int(b[6]) % 4 * 15
	}
	return w, zones[int(b[8])%len(zones)]
}

func monthDays(y int, m time.Month) int { return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day() }

func checkSeries(t *testing.T, s recur.Series) {
	t.Helper()
	r := s.Rule
	got := take(s, 200)
	checkErr := s.Check()
	switch {
	case len(got) == 0 && checkErr == nil:
		t.Fatalf("%s from %s: no occurrence, and Check() says nothing", r, s.Start)
	case len(got) > 0 && checkErr != nil && !(r.Count > 0 && len(got) < r.Count):
		t.Fatalf("%s from %s: Check() = %v, yet it has %d occurrences", r, s.Start, checkErr, len(got))
	case r.Count > 0 && len(got) < min(r.Count, 200) && checkErr == nil:
		t.Fatalf("%s from %s: %d occurrences of COUNT=%d, and Check() says nothing", r, s.Start, len(got), r.Count)
	}
	if first, ok := s.First(); ok != (len(got) > 0) || ok && !same(first, got[0]) {
		t.Fatalf("%s from %s: First() = %+v, %v; the iteration's first is %+v", r, s.Start, first, ok, got)
	}
	m := newMatcher(s)
	for i, o := range got {
		if o.N != i+1 {
			t.Fatalf("%s: occurrence %d has N %d", r, i+1, o.N)
		}
		if back, err := localtime.ParseWall(o.Wall.String()); err != nil || back != o.Wall {
			t.Fatalf("%s: occurrence %d is not a real date and time: %+v", r, o.N, o.Wall)
		}
		if o.Wall.Compare(s.Start) < 0 || o.Wall.Hour != s.Start.Hour || o.Wall.Minute != s.Start.Minute || o.Wall.Second != s.Start.Second {
			t.Fatalf("%s from %s: occurrence %s is before the start or at another time of day", r, s.Start, o.Wall)
		}
		if at, _ := localtime.Resolve(o.Wall, s.Zone); !at.Equal(o.At) {
			t.Fatalf("%s: occurrence %s at %s, which resolves to %s", r, o.Wall, o.At, at)
		}
		if r.Count > 0 && o.N > r.Count || r.Until != nil && o.Wall.Compare(*r.Until) > 0 || r.UntilUTC != nil && o.At.After(*r.UntilUTC) {
			t.Fatalf("%s: occurrence %d %s (%s) is past the end", r, o.N, o.Wall, o.At)
		}
		if !m.matches(o.Wall) {
			t.Fatalf("%s from %s: occurrence %s is not a date the rule matches", r, s.Start, o.Wall)
		}
		if i > 0 && (o.Wall.Compare(got[i-1].Wall) <= 0 || o.At.Before(got[i-1].At)) {
			t.Fatalf("%s: occurrence %s (%s) after %s (%s)", r, o.Wall, o.At, got[i-1].Wall, got[i-1].At)
		}
	}
	// No matching date is left out before the tenth occurrence (or in the
	// first 800 days when there are fewer).
	d := time.Date(s.Start.Year, s.Start.Month, s.Start.Day, 0, 0, 0, 0, time.UTC)
	for i, n := 0, 0; n < 800 && d.Year() <= 9999; n, d = n+1, d.AddDate(0, 0, 1) {
		w := localtime.Wall{Year: d.Year(), Month: d.Month(), Day: d.Day(), Hour: s.Start.Hour, Minute: s.Start.Minute, Second: s.Start.Second}
		if i < len(got) && w == got[i].Wall {
			if i++; i == 10 {
				break
			}
			continue
		}
		ended := i == len(got) && (r.Count > 0 && len(got) == r.Count ||
			r.Until != nil && w.Compare(*r.Until) > 0 || r.UntilUTC != nil)
		if m.matches(w) && !ended {
			t.Fatalf("%s from %s: %s matches the rule but is not an occurrence", r, s.Start, w)
		}
	}
	// After, from just before an occurrence, gives it and what follows.
	if len(got) > 2 {
		k := len(got) / 2
		after := s.After(got[k].At.Add(-time.Nanosecond), 2)
		for k > 0 && got[k-1].At.Equal(got[k].At) { // a skipped day's twin
			k--
		}
		if len(after) == 0 || !same(after[0], got[k]) {
			t.Fatalf("%s: After(%s) = %+v, want %+v first", r, got[k].At, after, got[k])
		}
	}
}

func same(a, b recur.Occurrence) bool { return a.N == b.N && a.Wall == b.Wall && a.At.Equal(b.At) }

// matcher tells whether a date is one of a rule's, by RFC 5545's words
// rather than the package's sets of days: in a period the interval
// selects, in BYMONTH, on a BYMONTHDAY, on a BYDAY (the Nth of the month,
// or of the year for a yearly rule without BYMONTH), with the start's
// defaults.
type matcher struct {
	s                   recur.Series
	byDay               []recur.WeekdayNum
	byMonthDay          []int
	byMonth             []time.Month
	start               time.Time
	interval            int
	ordinalsWithinMonth bool
}

func newMatcher(s recur.Series) matcher {
	r := s.Rule
	m := matcher{s: s, byDay: r.ByDay, byMonthDay: r.ByMonthDay, byMonth: r.ByMonth, interval: max(r.Interval, 1)}
	m.start = time.Date(s.Start.Year, s.Start.Month, s.Start.Day, 0, 0, 0, 0, time.UTC)
	if len(r.ByDay) == 0 && len(r.ByMonthDay) == 0 {
		switch r.Freq {
		case recur.Weekly:
			m.byDay = []recur.WeekdayNum{{Day: m.start.Weekday()}}
		case recur.Monthly:
			m.byMonthDay = []int{s.Start.Day}
		case recur.Yearly:
			m.byMonthDay = []int{s.Start.Day}
			if len(m.byMonth) == 0 {
				m.byMonth = []time.Month{s.Start.Month}
			}
		}
	}
	m.ordinalsWithinMonth = r.Freq == recur.Monthly || len(m.byMonth) > 0
	return m
}

// days is the number of days from 1970 to midnight t (time.Duration
// reaches only 292 years).
func days(t time.Time) int { return int(t.Unix() / 86400) }

func (m matcher) matches(w localtime.Wall) bool {
	d := time.Date(w.Year, w.Month, w.Day, 0, 0, 0, 0, time.UTC)
	var periods int
	switch m.s.Rule.Freq {
	case recur.Daily:
		periods = days(d) - days(m.start)
	case recur.Weekly:
		monday := func(t time.Time) time.Time { return t.AddDate(0, 0, -(int(t.Weekday())+6)%7) }
		periods = (days(monday(d)) - days(monday(m.start))) / 7
	case recur.Monthly:
		periods = (d.Year()-m.start.Year())*12 + int(d.Month()) - int(m.start.Month())
	case recur.Yearly:
		periods = d.Year() - m.start.Year()
	}
	if periods%m.interval != 0 {
		return false
	}
	if len(m.byMonth) > 0 && !slices.Contains(m.byMonth, d.Month()) {
		return false
	}
	if len(m.byMonthDay) > 0 && !slices.Contains(m.byMonthDay, d.Day()) &&
		!slices.Contains(m.byMonthDay, d.Day()-monthDays(d.Year(), d.Month())-1) {
		return false
	}
	if len(m.byDay) == 0 {
		return true
	}
	for _, bd := range m.byDay {
		if bd.Day != d.Weekday() {
			continue
		}
		if bd.N == 0 {
			return true
		}
		// The frame is the month or the year; count this weekday's
		// place in it from both ends.
		first, next := time.Date(d.Year(), 1, 1, 0, 0, 0, 0, time.UTC), time.Date(d.Year()+1, 1, 1, 0, 0, 0, 0, time.UTC)
		if m.ordinalsWithinMonth {
			first, next = time.Date(d.Year(), d.Month(), 1, 0, 0, 0, 0, time.UTC), time.Date(d.Year(), d.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		}
		fromStart := int(d.Sub(first).Hours())/24/7 + 1
		fromEnd := -(int(next.Sub(d).Hours())/24-1)/7 - 1
		if bd.N == fromStart || bd.N == fromEnd {
			return true
		}
	}
	return false
}
