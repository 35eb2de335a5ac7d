package localtime_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
)

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := localtime.LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustWall(t *testing.T, s string) localtime.Wall {
	t.Helper()
	w, err := localtime.ParseWall(s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The daylight-saving changes in both directions, in zones with whole-hour,
// half-hour (Lord Howe's change is 30 minutes) and 45-minute offsets.
func TestResolveFollowsRFC5545AtEveryKindOfChange(t *testing.T) {
	for _, c := range []struct {
		zone, wall, want string
		how              localtime.Resolution
	}{
		{"Europe/Berlin", "2027-03-28T02:30", "2027-03-28T01:30:00Z", localtime.Skipped}, // 02:30 CET = 03:30 CEST
		{"Europe/Berlin", "2027-03-28T03:00", "2027-03-28T01:00:00Z", localtime.Exact},
		{"Europe/Berlin", "2027-03-28T01:59:59", "2027-03-28T00:59:59Z", localtime.Exact},
		{"Europe/Berlin", "2027-10-31T02:30", "2027-10-31T00:30:00Z", localtime.Repeated}, // the CEST one
		{"Europe/Berlin", "2027-10-31T03:00", "2027-10-31T02:00:00Z", localtime.Exact},
		{"America/New_York", "2027-03-14T02:15", "2027-03-14T07:15:00Z", localtime.Skipped},
		{"America/New_York", "2027-11-07T01:30", "2027-11-07T05:30:00Z", localtime.Repeated},   // EDT
		{"Australia/Lord_Howe", "2027-10-03T02:15", "2027-10-02T15:45:00Z", localtime.Skipped}, // +10:30 → +11 at 02:00, a 30-minute gap: 02:45
		{"Australia/Lord_Howe", "2027-04-04T01:45", "2027-04-03T14:45:00Z", localtime.Repeated},
		{"Pacific/Chatham", "2027-09-26T03:00", "2027-09-25T14:15:00Z", localtime.Skipped}, // +12:45 → +13:45 at 02:45
		{"Pacific/Chatham", "2027-04-04T03:00", "2027-04-03T13:15:00Z", localtime.Repeated},
		{"Asia/Kathmandu", "2027-06-01T09:00", "2027-06-01T03:15:00Z", localtime.Exact},
		{"America/St_Johns", "2027-03-14T02:30", "2027-03-14T06:00:00Z", localtime.Skipped}, // −3:30 → −2:30 at 02:00: 03:30
		{"America/St_Johns", "2027-11-07T01:30", "2027-11-07T04:00:00Z", localtime.Repeated},
		{"America/Santiago", "2027-09-05T00:30", "2027-09-05T04:30:00Z", localtime.Skipped}, // midnight is skipped
		{"America/Santiago", "2027-04-03T23:30", "2027-04-04T02:30:00Z", localtime.Repeated},
		{"UTC", "2027-01-01T00:00", "2027-01-01T00:00:00Z", localtime.Exact},
	} {
		t.Run(c.zone+" "+c.wall, func(t *testing.T) {
			got, how := localtime.Resolve(mustWall(t, c.wall), mustZone(t, c.zone))
			if got.Format(time.RFC3339) != c.want || how != c.how {
				t.Errorf("Resolve = %s (%v), want %s (%v)", got.Format(time.RFC3339), how, c.want, c.how)
			}
		})
	}
}

// resolve.json is Python's zoneinfo resolving wall-clock times around every
// change of offset in 2020–2040 in eight zones, from this package's
// zoneinfo.zip (testdata/resolve.py): an oracle that shares no code with
// Resolve.
func TestResolveAgreesWithPython(t *testing.T) {
	raw, err := os.ReadFile("testdata/resolve.json")
	if err != nil {
		t.Fatal(err)
	}
	var oracle struct {
		Version string
		Cases   []struct{ Zone, Wall, Want, How string }
	}
	if err := json.Unmarshal(raw, &oracle); err != nil {
		t.Fatal(err)
	}
	if oracle.Version != localtime.Version {
		t.Fatalf("resolve.json is from release %s, the package embeds %s: regenerate it (python3 testdata/resolve.py > testdata/resolve.json)",
			oracle.Version, localtime.Version)
	}
	if len(oracle.Cases) < 1000 {
		t.Fatalf("resolve.json has %d cases, want more than 1000", len(oracle.Cases))
	}
	for _, c := range oracle.Cases {
		got, how := localtime.Resolve(mustWall(t, c.Wall), mustZone(t, c.Zone))
		if got.Format(time.RFC3339) != c.Want || how.String() != c.How {
			t.Errorf("Resolve(%s, %s) = %s (%v), Python says %s (%s)", c.Wall, c.Zone, got.Format(time.RFC3339), how, c.Want, c.How)
		}
	}
}

// For every zone LoadZone takes and every change of offset in 2020–2035,
// Resolve of the wall-clock times at and around the change's gap or
// repeat is what RFC 5545 defines: the unique instant whose wall clock
// reads the time; in a gap, the time read with the offset before the
// change; in a repeat, the earlier instant. So too on the last day of
// each leap year, where Go's ZoneBounds errs (golang/go#81583).
func TestResolveAtEveryChangeInEveryZone(t *testing.T) {
	from, to := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)
	checked, zones := 0, 0
	for _, name := range localtime.Names() {
		loc, err := localtime.LoadZone(name)
		if err != nil {
			continue
		}
		zones++
		offsetAt := func(u time.Time) time.Duration { _, o := u.In(loc).Zone(); return time.Duration(o) * time.Second }
		// check resolves naive (a wall time written in UTC) given the
		// offset before the change nearest it, and every offset in force
		// within two days of it.
		check := func(naive time.Time, before time.Duration) {
			t.Helper()
			w := localtime.WallOf(naive, time.UTC)
			offsets := map[time.Duration]bool{before: true}
			for d := -48 * time.Hour; d <= 48*time.Hour; d += 4 * time.Hour {
				offsets[offsetAt(naive.Add(d))] = true
			}
			var matches []time.Time
			for o := range offsets {
				if u := naive.Add(-o); localtime.WallOf(u, loc) == w {
					matches = append(matches, u)
				}
			}
			want, how := naive.Add(-before), localtime.Skipped
			switch len(matches) {
			case 1:
				want, how = matches[0], localtime.Exact
			case 2:
				want, how = matches[0], localtime.Repeated
				if matches[1].Before(want) {
					want = matches[1]
				}
			}
			checked++
			if got, gotHow := localtime.Resolve(w, loc); !got.Equal(want) || gotHow != how {
				t.Errorf("%s: Resolve(%v) = %s (%v), want %s (%v)", name, w, got.Format(time.RFC3339), gotHow, want.UTC().Format(time.RFC3339), how)
			}
		}
		for _, at := range transitions(loc, from, to) {
			before, after := offsetAt(at.Add(-time.Second)), offsetAt(at)
			lo, hi := at.Add(min(before, after)), at.Add(max(before, after))
			for _, naive := range []time.Time{lo.Add(-time.Second), lo, lo.Add(hi.Sub(lo) / 2).Truncate(time.Second), hi.Add(-time.Second), hi} {
				check(naive, before)
			}
		}
		for year := 2020; year < 2036; year += 4 {
			for _, naive := range []time.Time{
				time.Date(year, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(year, 12, 31, 12, 0, 0, 0, time.UTC),
				time.Date(year, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(year+1, 1, 1, 0, 0, 0, 0, time.UTC),
			} {
				check(naive, offsetAt(naive.Add(-offsetAt(naive)).Add(-48*time.Hour)))
			}
		}
	}
	t.Logf("%d wall times in %d zones", checked, zones)
	if checked < 10000 {
		t.Errorf("checked %d wall times, want the whole database's changes", checked)
	}
}
