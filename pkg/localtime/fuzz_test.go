package localtime_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
)

// fuzzZones are zones with every kind of change: an hour, 30 minutes
// (Lord Howe), at midnight (Santiago), 45-minute offsets (Chatham), a
// skipped day (Apia), and none.
var fuzzZones = []string{"Europe/Berlin", "Australia/Lord_Howe", "America/Santiago", "Pacific/Chatham", "Pacific/Apia", "UTC"}

// refusedWithFix fails t unless err is an *Error with a fix.
func refusedWithFix(t *testing.T, input string, err error) {
	t.Helper()
	var e *localtime.Error
	if !errors.As(err, &e) || e.Fix == "" {
		t.Fatalf("%q refused with %T %v, want an *Error with a fix", input, err, err)
	}
}

// FuzzParseWall: nothing panics; a refusal is an *Error with a fix; what
// is read writes back the same, and resolves in every zone to an instant
// whose wall clock is the time given, or later only if it was skipped.
func FuzzParseWall(f *testing.F) {
	for _, s := range []string{
		"2027-03-28T02:30", "2027-03-28T02:30:15", "2027-10-31t02:30", "2011-12-30T12:00", "2027-09-05T00:00",
		"0001-01-01T00:00", "9999-12-31T23:59:59", "2027-02-29T09:00", "2027-03-28T09:00Z", "2027-03-28T09:00+01:00",
		"2027-03-28T09:00:00.5", "2027-03-28 09:00", "27-03-28T09:00", "", "2027-03-28T-1:30", "+027-03-28T09:00",
	} {
		f.Add(s)
	}
	var zones []*time.Location
	for _, name := range fuzzZones {
		zones = append(zones, mustZone(f, name))
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := localtime.ParseWall(s)
		if err != nil {
			refusedWithFix(t, s, err)
			return
		}
		if again, err := localtime.ParseWall(w.String()); err != nil || again != w {
			t.Fatalf("ParseWall(%q) = %v; ParseWall(%q) = %v, %v", s, w, w.String(), again, err)
		}
		for _, loc := range zones {
			at, how := localtime.Resolve(w, loc)
			wall := localtime.WallOf(at, loc)
			if c := wall.Compare(w); c < 0 || (c > 0) != (how == localtime.Skipped) {
				t.Fatalf("Resolve(%v, %s) = %s (%v), which reads %v there", w, loc, at.Format(time.RFC3339), how, wall)
			}
		}
	})
}

// FuzzParseWindowSpec: nothing panics; a refusal is an *Error with a fix;
// a window read writes back the same, as a spec and as JSON; and from
// instants derived from the input, Next is at or after the instant, open,
// and its own next.
func FuzzParseWindowSpec(f *testing.F) {
	for _, s := range []string{
		"08:00-21:00 America/New_York", "08:00-21:00 America/New_York mon-fri", "09:00-17:00 Europe/Berlin mon,wed,fri",
		"22:00-06:00 Europe/Berlin fri-mon", "02:00-02:30 Europe/Berlin sun", "00:00-00:30 America/Santiago sun",
		"23:00-24:00 Pacific/Apia", "02:45-03:45 Pacific/Chatham", "01:30-02:00 Australia/Lord_Howe sat,sun",
		"09:00-09:00 UTC", "8:00-21:00 UTC", "08:00-21:00 europe/berlin", "08:00-21:00 UTC mon-fri,wed", "",
	} {
		f.Add(s, int64(1806400800)) // 2027-03-28T01:00:00Z, Berlin's change
		f.Add(s, int64(1325203200)) // 2011-12-30T00:00:00Z, the day Apia skipped
	}
	f.Fuzz(func(t *testing.T, s string, unix int64) {
		w, err := localtime.ParseWindowSpec(s)
		if err != nil {
			refusedWithFix(t, s, err)
			return
		}
		if again, err := localtime.ParseWindowSpec(w.String()); err != nil || again != w {
			t.Fatalf("ParseWindowSpec(%q) = %#v; ParseWindowSpec(%q) = %#v, %v", s, w, w.String(), again, err)
		}
		raw, err := json.Marshal(w)
		var back localtime.Window
		if err != nil || json.Unmarshal(raw, &back) != nil || back != w {
			t.Fatalf("ParseWindowSpec(%q) = %#v; as JSON %s, %v; back %#v", s, w, raw, err, back)
		}
		// Instants from 1800 to 2400, where zones have their oldest
		// offsets (to the second) and their footer rules.
		const from, span = -5364662400, 18934156800
		base := time.Unix(from+(unix%span+span)%span, unix%1e9)
		for _, at := range []time.Time{base, base.Truncate(time.Hour), base.Add(-time.Nanosecond), base.Add(7*24*time.Hour + 30*time.Minute)} {
			next := w.Next(at)
			a, n := at.UTC().Format(time.RFC3339Nano), next.UTC().Format(time.RFC3339Nano)
			if next.Before(at) || !w.Contains(next) || !w.Next(next).Equal(next) {
				t.Fatalf("%v: Next(%s) = %s (open %v)", w, a, n, w.Contains(next))
			}
			if w.Contains(at) != next.Equal(at) {
				t.Fatalf("%v: Contains(%s) = %v, but Next is %s", w, a, w.Contains(at), n)
			}
		}
	})
}

// FuzzLoadZone: nothing panics; a zone loads only if the database holds
// it, and a refusal is an *Error with a fix.
func FuzzLoadZone(f *testing.F) {
	for _, s := range []string{
		"Europe/Berlin", "UTC", "Etc/UTC", "America/Argentina/Buenos_Aires", "US/Eastern", "", "Local", "europe/berlin",
		"EST", "Japan", "Etc/GMT+5", "Mars/Olympus", "../../etc/passwd", "Europe/Berlin/", "Europe//Berlin",
	} {
		f.Add(s)
	}
	names := localtime.Names()
	f.Fuzz(func(t *testing.T, name string) {
		loc, err := localtime.LoadZone(name)
		if err != nil {
			refusedWithFix(t, name, err)
			return
		}
		if _, found := slices.BinarySearch(names, name); !found || loc.String() != name {
			t.Fatalf("LoadZone(%q) = %v, a zone the database does not hold", name, loc)
		}
	})
}
