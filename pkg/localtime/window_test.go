package localtime_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
)

func mustWindow(t testing.TB, spec string) localtime.Window {
	t.Helper()
	w, err := localtime.ParseWindowSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func mustInstant(t testing.TB, s string) time.Time {
	t.Helper()
	u, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestParseWindowSpecReadsTheCompactForm(t *testing.T) {
	for _, c := range []struct {
		spec      string
		want      localtime.Window
		canonical string // String(), if not spec
	}{
		{"08:00-21:00 America/New_York", localtime.Window{From: 8 * 60, To: 21 * 60, Zone: "America/New_York"}, ""},
		{"08:00-21:00 America/New_York mon-fri", localtime.Window{From: 480, To: 1260, Zone: "America/New_York", Days: 0b0111110}, ""},
		{"09:00-17:00 Europe/Berlin mon,wed,fri", localtime.Window{From: 540, To: 1020, Zone: "Europe/Berlin", Days: 0b0101010}, ""},
		{"22:00-06:00 Europe/Berlin fri-mon", localtime.Window{From: 1320, To: 360, Zone: "Europe/Berlin", Days: 0b1100011}, ""},
		{"22:00-00:00 UTC", localtime.Window{From: 1320, To: 1440, Zone: "UTC"}, "22:00-24:00 UTC"},
		{"00:00-24:00 Asia/Kathmandu sat,sun", localtime.Window{From: 0, To: 1440, Zone: "Asia/Kathmandu", Days: 0b1000001}, ""},
		{"08:00-21:00 UTC mon-sun", localtime.Window{From: 480, To: 1260, Zone: "UTC"}, "08:00-21:00 UTC"},
		{"08:00-21:00 UTC tue-mon", localtime.Window{From: 480, To: 1260, Zone: "UTC"}, "08:00-21:00 UTC"},
		{"08:00-21:00 UTC Wed,MONDAY,sun", localtime.Window{From: 480, To: 1260, Zone: "UTC", Days: 0b0001011}, "08:00-21:00 UTC sun,mon,wed"},
		{"08:00-21:00 UTC sat-mon", localtime.Window{From: 480, To: 1260, Zone: "UTC", Days: 0b1000011}, ""},
		{"08:00-21:00 UTC mon-tue,thu", localtime.Window{From: 480, To: 1260, Zone: "UTC", Days: 0b0010110}, "08:00-21:00 UTC mon,tue,thu"},
		{"  08:00-21:00\tUTC   sun ", localtime.Window{From: 480, To: 1260, Zone: "UTC", Days: 0b0000001}, "08:00-21:00 UTC sun"},
	} {
		t.Run(c.spec, func(t *testing.T) {
			w := mustWindow(t, c.spec)
			if w != c.want {
				t.Fatalf("ParseWindowSpec = %#v, want %#v", w, c.want)
			}
			canonical := c.canonical
			if canonical == "" {
				canonical = c.spec
			}
			if w.String() != canonical {
				t.Errorf("String() = %q, want %q", w.String(), canonical)
			}
			if again := mustWindow(t, w.String()); again != w {
				t.Errorf("ParseWindowSpec(String()) = %#v, want %#v", again, w)
			}
		})
	}
}

// Every refusal is an *Error naming the part that is wrong and a fix.
func TestParseWindowRefusesWithAFix(t *testing.T) {
	for _, c := range []struct {
		spec, value, fix string // the Error's Value, and a word of its Fix
	}{
		{"", "", "08:00-21:00"},
		{"08:00-21:00", "08:00-21:00", "America/New_York"},
		{"08:00 21:00 UTC", "08:00", "08:00-21:00"},
		{"8:00-21:00 UTC", "8:00", "HH:MM"},
		{"08:00-21:60 UTC", "21:60", "HH:MM"},
		{"24:00-06:00 UTC", "24:00", "00:00"},
		{"08:00-24:01 UTC", "24:01", "24:00"},
		{"08:00:00-21:00 UTC", "08:00:00", "HH:MM"},
		{"09:00-09:00 UTC", "09:00-09:00", "leave the window out"},
		{"00:00-00:00 UTC", "00:00-00:00", "leave the window out"},
		{"08:00-21:00 europe/berlin", "europe/berlin", "Europe/Berlin"},
		{"08:00-21:00 Local", "Local", "region zone"},
		{"08:00-21:00 EST", "EST", "America/New_York"},
		{"08:00-21:00 UTC mon fri", "08:00-21:00 UTC mon fri", "no spaces"},
		{"08:00-21:00 UTC funday", "funday", "mon"},
		{"08:00-21:00 UTC mon,mon", "mon", "once"},
		{"08:00-21:00 UTC mon-fri,wed", "wed", "once"},
		{"08:00-21:00 UTC mon-mon", "mon-mon", "mon"},
		{"08:00-21:00 UTC mon,,fri", "mon,,fri", "commas"},
		{"08:00-21:00 UTC mon,", "mon,", "commas"},
		{"08:00-21:00 UTC mon-", "", "mon"},
	} {
		t.Run(c.spec, func(t *testing.T) {
			w, err := localtime.ParseWindowSpec(c.spec)
			var e *localtime.Error
			if !errors.As(err, &e) {
				t.Fatalf("ParseWindowSpec = %v, %v; want an *Error", w, err)
			}
			if e.Value != c.value || e.Fix == "" || !strings.Contains(e.Fix, c.fix) {
				t.Errorf("error %q (Value %q); want Value %q and a fix that says %q", err, e.Value, c.value, c.fix)
			}
		})
	}
	for _, days := range [][]string{{"mon", "Monday"}, {"mon-fri"}, {""}} {
		_, err := localtime.ParseWindow("08:00", "21:00", "UTC", days)
		if e := (*localtime.Error)(nil); !errors.As(err, &e) || e.Fix == "" {
			t.Errorf("ParseWindow(days %q) = %v, want an *Error with a fix", days, err)
		}
	}
}

func TestWindowsCompareByWhatTheyMean(t *testing.T) {
	a := mustWindow(t, "22:00-00:00 Europe/Berlin mon-sun")
	b, err := localtime.ParseWindow("22:00", "24:00", "Europe/Berlin", nil)
	if err != nil {
		t.Fatal(err)
	}
	var c localtime.Window
	if err := json.Unmarshal([]byte(`{"from":"22:00","to":"24:00","timeZone":"Europe/Berlin"}`), &c); err != nil {
		t.Fatal(err)
	}
	if a != b || b != c || a != (localtime.Window{From: 1320, To: 1440, Zone: "Europe/Berlin"}) {
		t.Errorf("windows differ: %#v %#v %#v", a, b, c)
	}
}

func TestWindowJSON(t *testing.T) {
	w := mustWindow(t, "08:00-21:00 America/New_York fri-mon")
	raw, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"from":"08:00","to":"21:00","timeZone":"America/New_York","days":["mon","fri","sat","sun"]}`
	if string(raw) != want {
		t.Errorf("Marshal = %s, want %s", raw, want)
	}
	var back localtime.Window
	if err := json.Unmarshal(raw, &back); err != nil || back != w {
		t.Errorf("Unmarshal(%s) = %#v, %v; want %#v", raw, back, err, w)
	}

	every, _ := json.Marshal(mustWindow(t, "22:00-06:00 Europe/Berlin"))
	if string(every) != `{"from":"22:00","to":"06:00","timeZone":"Europe/Berlin"}` {
		t.Errorf("Marshal of an every-day window = %s, want no days", every)
	}

	type delivery struct {
		Window localtime.Window `json:"window,omitzero"`
	}
	if raw, _ := json.Marshal(delivery{}); string(raw) != `{}` {
		t.Errorf("a delivery without a window = %s, want {}", raw)
	}
	var d delivery
	if err := json.Unmarshal([]byte(`{"window":null}`), &d); err != nil || !d.Window.IsZero() {
		t.Errorf("null window = %#v, %v; want the zero Window", d.Window, err)
	}

	if _, err := json.Marshal(localtime.Window{From: 60, To: 60, Zone: "UTC"}); err == nil {
		t.Error("Marshal of an invalid window succeeded")
	}

	for _, bad := range []string{
		`{"from":"08:00","to":"21:00","timeZone":"UTC","day":["mon"]}`,
		`{"from":"08:00","to":"21:00","timeZone":"UTC","days":[]}`,
		`{"from":"08:00","to":"21:00","timeZone":"UTC","days":["mon","mon"]}`,
		`{"from":"08:00","to":"25:00","timeZone":"UTC"}`,
		`{"from":"08:00","to":"21:00"}`,
		`{"from":8,"to":"21:00","timeZone":"UTC"}`,
		`"08:00-21:00 UTC"`,
	} {
		var w localtime.Window
		if err := json.Unmarshal([]byte(bad), &w); err == nil || !w.IsZero() {
			t.Errorf("Unmarshal(%s) = %#v, %v; want an error", bad, w, err)
		}
	}
}

func TestInvalidWindowsNeverOpen(t *testing.T) {
	at := mustInstant(t, "2027-06-01T12:00:00Z")
	for _, w := range []localtime.Window{
		{Zone: "UTC"},
		{From: 60, To: 60, Zone: "UTC"},
		{From: -1, To: 60, Zone: "UTC"},
		{From: 1440, To: 60, Zone: "UTC"},
		{From: 0, To: 1441, Zone: "UTC"},
		{From: 0, To: 60, Zone: "UTC", Days: 0x80},
		{From: 0, To: 60, Zone: "Local"},
		{From: 0, To: 60},
	} {
		var e *localtime.Error
		if err := w.Validate(); !errors.As(err, &e) || e.Fix == "" {
			t.Errorf("%#v: Validate = %v, want an *Error with a fix", w, err)
		}
		if w.Contains(at) || !w.Next(at).IsZero() {
			t.Errorf("%#v: Contains = %v, Next = %v; want never open", w, w.Contains(at), w.Next(at))
		}
	}
	var zero localtime.Window
	if err := zero.Validate(); err != nil || !zero.Contains(at) || !zero.Next(at).Equal(at) || zero.String() != "" {
		t.Errorf("the zero Window: Validate %v, Contains %v, Next %v, String %q; want no window, always open",
			err, zero.Contains(at), zero.Next(at), zero.String())
	}
}

// Each case is a window, an instant t, and the instant Next(t) should be;
// Contains(t) is whether they are equal, and Contains is checked just
// before the opening too. The comments give the wall clock.
func TestWindowOpensByTheWallClock(t *testing.T) {
	for _, c := range []struct {
		window, t, next string
	}{
		// Europe/Berlin springs forward on Sunday 2027-03-28 at 01:00Z, 02:00 CET → 03:00 CEST.
		{"02:30-05:00 Europe/Berlin", "2027-03-28T00:30:00Z", "2027-03-28T01:00:00Z"},         // 01:30 CET; From in the gap: opens at the jump
		{"02:00-02:30 Europe/Berlin", "2027-03-28T00:30:00Z", "2027-03-29T00:00:00Z"},         // wholly in the gap: not that day
		{"01:00-02:30 Europe/Berlin", "2027-03-28T00:59:59Z", "2027-03-28T00:59:59Z"},         // 01:59:59 CET, open
		{"01:00-02:30 Europe/Berlin", "2027-03-28T01:00:00Z", "2027-03-28T23:00:00Z"},         // 03:00 CEST; To in the gap: closed at the jump
		{"03:00-04:00 Europe/Berlin", "2027-03-28T00:30:00Z", "2027-03-28T01:00:00Z"},         // From at the gap's end
		{"08:00-18:00 Europe/Berlin mon-fri", "2027-03-26T18:00:00Z", "2027-03-29T06:00:00Z"}, // Fri 19:00 CET → Mon 08:00 CEST
		// Europe/Berlin falls back on 2027-10-31 at 01:00Z, 03:00 CEST → 02:00 CET: 02:00–03:00 twice.
		{"02:30-03:00 Europe/Berlin", "2027-10-31T00:00:00Z", "2027-10-31T00:30:00Z"}, // 02:00 CEST → 02:30 CEST
		{"02:30-03:00 Europe/Berlin", "2027-10-31T00:45:00Z", "2027-10-31T00:45:00Z"}, // 02:45 CEST, open
		{"02:30-03:00 Europe/Berlin", "2027-10-31T01:00:00Z", "2027-10-31T01:30:00Z"}, // 02:00 CET → 02:30 CET, open again
		{"02:30-03:00 Europe/Berlin", "2027-10-31T02:00:00Z", "2027-11-01T01:30:00Z"}, // 03:00 CET → tomorrow
		{"01:00-02:15 Europe/Berlin", "2027-10-31T00:20:00Z", "2027-10-31T01:00:00Z"}, // 02:20 CEST; the clock falls back into it
		{"02:45-04:00 Europe/Berlin", "2027-10-31T00:50:00Z", "2027-10-31T00:50:00Z"}, // 02:50 CEST, open
		{"02:45-04:00 Europe/Berlin", "2027-10-31T01:00:00Z", "2027-10-31T01:45:00Z"}, // 02:00 CET: closed until 02:45 CET
		// America/New_York: 2027-03-14 02:00 EST → 03:00 EDT at 07:00Z; 2027-11-07 02:00 EDT → 01:00 EST at 06:00Z.
		{"02:15-03:00 America/New_York", "2027-03-14T06:00:00Z", "2027-03-15T06:15:00Z"}, // wholly in the gap
		{"02:30-09:00 America/New_York", "2027-03-14T06:00:00Z", "2027-03-14T07:00:00Z"},
		{"22:00-01:30 America/New_York sat", "2027-11-07T02:00:00Z", "2027-11-07T02:00:00Z"},     // Sat 22:00 EDT
		{"22:00-01:30 America/New_York sat", "2027-11-07T05:30:00Z", "2027-11-07T06:00:00Z"},     // Sun 01:30 EDT → 01:00 EST
		{"22:00-01:30 America/New_York sat", "2027-11-07T06:15:00Z", "2027-11-07T06:15:00Z"},     // 01:15 EST, open
		{"22:00-01:30 America/New_York sat", "2027-11-07T06:30:00Z", "2027-11-14T03:00:00Z"},     // 01:30 EST → next Saturday
		{"08:00-21:00 America/New_York mon-fri", "2027-06-05T02:00:00Z", "2027-06-07T12:00:00Z"}, // Fri 22:00 → Mon 08:00
		// Australia/Lord_Howe, a 30-minute change: 2027-10-03 02:00 +10:30 → 02:30 +11 at 15:30Z the day before;
		// 2027-04-04 02:00 +11 → 01:30 +10:30 at 15:00Z the day before.
		{"02:15-06:00 Australia/Lord_Howe", "2027-10-02T15:00:00Z", "2027-10-02T15:30:00Z"},
		{"02:00-02:30 Australia/Lord_Howe", "2027-10-02T15:00:00Z", "2027-10-03T15:00:00Z"},
		{"01:45-03:00 Australia/Lord_Howe", "2027-04-03T14:40:00Z", "2027-04-03T14:45:00Z"}, // 01:45 +11
		{"01:45-03:00 Australia/Lord_Howe", "2027-04-03T14:59:59Z", "2027-04-03T14:59:59Z"},
		{"01:45-03:00 Australia/Lord_Howe", "2027-04-03T15:00:00Z", "2027-04-03T15:15:00Z"}, // 01:30 +10:30 → 01:45 +10:30
		// Pacific/Chatham, +12:45 and +13:45: 2027-09-26 02:45 → 03:45 at 14:00Z the day before;
		// 2027-04-04 03:45 → 02:45 at 14:00Z the day before.
		{"03:00-04:00 Pacific/Chatham", "2027-09-25T13:30:00Z", "2027-09-25T14:00:00Z"},
		{"03:00-04:00 Pacific/Chatham", "2027-09-25T14:15:00Z", "2027-09-26T13:15:00Z"}, // 04:00 +13:45 → tomorrow 03:00
		{"03:00-03:30 Pacific/Chatham", "2027-04-03T13:00:00Z", "2027-04-03T13:15:00Z"},
		{"03:00-03:30 Pacific/Chatham", "2027-04-03T13:45:00Z", "2027-04-03T14:15:00Z"}, // 03:30 +13:45 → 03:00 +12:45
		// America/St_Johns, −3:30 and −2:30: 2027-03-14 02:00 → 03:00 at 05:30Z; 2027-11-07 02:00 → 01:00 at 04:30Z.
		{"02:30-04:00 America/St_Johns", "2027-03-14T05:00:00Z", "2027-03-14T05:30:00Z"},
		{"01:30-02:00 America/St_Johns", "2027-11-07T04:10:00Z", "2027-11-07T04:10:00Z"}, // 01:40 NDT
		{"01:30-02:00 America/St_Johns", "2027-11-07T04:30:00Z", "2027-11-07T05:00:00Z"}, // 01:00 NST → 01:30 NST
		// America/Santiago changes at midnight: Sat 2027-09-04 24:00 −04 → Sun 01:00 −03 at 04:00Z;
		// Sun 2027-04-04 00:00 −03 → Sat 23:00 −04 at 03:00Z.
		{"00:00-00:30 America/Santiago sun", "2027-09-05T03:00:00Z", "2027-09-12T03:00:00Z"}, // skipped this Sunday
		{"23:00-00:30 America/Santiago sat", "2027-09-05T03:59:59Z", "2027-09-05T03:59:59Z"}, // Sat 23:59:59 −04
		{"23:00-00:30 America/Santiago sat", "2027-09-05T04:00:00Z", "2027-09-12T02:00:00Z"}, // Sun 01:00 −03 → Sat 23:00 −03
		{"23:30-24:00 America/Santiago sat", "2027-04-04T02:00:00Z", "2027-04-04T02:30:00Z"}, // Sat 23:30 −03
		{"23:30-24:00 America/Santiago sat", "2027-04-04T03:00:00Z", "2027-04-04T03:30:00Z"}, // Sat 23:00 −04 → 23:30 −04
		{"00:00-01:00 America/Santiago sun", "2027-04-04T02:00:00Z", "2027-04-04T04:00:00Z"}, // Sunday's midnight comes once, at −04
		// Asia/Kathmandu, +5:45 all year.
		{"09:00-17:00 Asia/Kathmandu mon-fri", "2027-06-04T11:15:00Z", "2027-06-07T03:15:00Z"}, // Fri 17:00 → Mon 09:00
		{"09:00-17:00 Asia/Kathmandu mon-fri", "2027-06-07T11:14:59.999999999Z", "2027-06-07T11:14:59.999999999Z"},
		// The last UTC day of a leap year, where Go's ZoneBounds ends a zone before the instant (golang/go#81583).
		{"08:00-09:00 Europe/Berlin", "2028-12-31T10:00:00Z", "2029-01-01T07:00:00Z"},
		{"00:00-01:00 Australia/Lord_Howe", "2028-12-31T00:00:00Z", "2028-12-31T13:00:00Z"}, // 11:00 +11 → 00:00 on 1 January
		{"06:00-07:00 America/New_York", "2032-12-31T12:00:00Z", "2033-01-01T11:00:00Z"},
		// To = 24:00, and windows over midnight.
		{"20:00-24:00 UTC", "2027-06-01T23:59:59.999999999Z", "2027-06-01T23:59:59.999999999Z"},
		{"20:00-24:00 UTC", "2027-06-02T00:00:00Z", "2027-06-02T20:00:00Z"},
		{"22:00-06:00 Europe/Berlin fri", "2027-06-05T03:59:00Z", "2027-06-05T03:59:00Z"}, // Sat 05:59 CEST, opened Friday
		{"22:00-06:00 Europe/Berlin fri", "2027-06-05T04:00:00Z", "2027-06-11T20:00:00Z"}, // Sat 06:00 → next Friday 22:00
	} {
		t.Run(c.window+" "+c.t, func(t *testing.T) {
			w := mustWindow(t, c.window)
			at, want := mustInstant(t, c.t), mustInstant(t, c.next)
			got := w.Next(at)
			if !got.Equal(want) {
				t.Errorf("Next = %s, want %s", got.UTC().Format(time.RFC3339Nano), c.next)
			}
			if w.Contains(at) != at.Equal(want) {
				t.Errorf("Contains = %v, want %v", w.Contains(at), at.Equal(want))
			}
			if !w.Contains(want) {
				t.Errorf("Contains(%s) = false at the opening", c.next)
			}
			if !at.Equal(want) && w.Contains(want.Add(-time.Nanosecond)) {
				t.Errorf("Contains(%s − 1ns) = true, before the opening", c.next)
			}
		})
	}
}

func TestNextKeepsTAndItsLocation(t *testing.T) {
	w := mustWindow(t, "08:00-21:00 Europe/Berlin")
	tokyo := mustZone(t, "Asia/Tokyo")
	open := time.Date(2027, 6, 1, 19, 0, 0, 5, tokyo) // 12:00:00.000000005 CEST
	if got := w.Next(open); got != open {
		t.Errorf("Next(%v) = %v, want t itself", open, got)
	}
	closed := time.Date(2027, 6, 1, 8, 0, 0, 0, tokyo) // 01:00 CEST
	if got := w.Next(closed); got.Location() != tokyo || !got.Equal(time.Date(2027, 6, 1, 6, 0, 0, 0, time.UTC)) {
		t.Errorf("Next(%v) = %v, want 06:00Z in Asia/Tokyo", closed, got)
	}
}

// propertyZones are zones whose changes are unusual: 30- and 45-minute
// offsets and changes, changes at midnight, negative daylight saving
// (Dublin, Casablanca in Ramadan), a two-hour change (Troll), and Samoa's
// skipped day (2011-12-30).
var propertyZones = []string{
	"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham", "America/St_Johns",
	"America/Santiago", "Asia/Kathmandu", "Australia/Adelaide", "Europe/Dublin", "Africa/Casablanca",
	"Antarctica/Troll", "Pacific/Apia", "America/Havana", "Asia/Beirut", "America/Asuncion", "UTC",
}

// transitions lists the instants in [from, to) at which loc's offset
// changes.
func transitions(loc *time.Location, from, to time.Time) []time.Time {
	var out []time.Time
	for u := from; ; {
		_, end := u.In(loc).ZoneBounds()
		if !end.IsZero() && !end.After(u) {
			// golang/go#81583: in the last UTC day of a leap year a
			// footer rule's zone ends at that day's start; it goes on
			// to the year's end.
			end = time.Date(u.UTC().Year()+1, time.January, 1, 0, 0, 0, 0, time.UTC)
		}
		if end.IsZero() || !end.Before(to) {
			return out
		}
		_, before := end.Add(-time.Second).In(loc).Zone()
		if _, after := end.In(loc).Zone(); after != before {
			out = append(out, end)
		}
		u = end
	}
}

// bruteNext is Next by stepping: t if open, else the first whole minute
// after t at which w is open, refined to the second (a change of offset
// at an odd second would open a window between two minutes).
func bruteNext(w localtime.Window, t time.Time) time.Time {
	if w.Contains(t) {
		return t
	}
	prev := t
	for u := t.Truncate(time.Minute).Add(time.Minute); u.Before(t.Add(16 * 24 * time.Hour)); u = u.Add(time.Minute) {
		if w.Contains(u) {
			for s := prev.Truncate(time.Second).Add(time.Second); s.Before(u); s = s.Add(time.Second) {
				if w.Contains(s) {
					return s
				}
			}
			return u
		}
		prev = u
	}
	return time.Time{}
}

// For random windows, zones and instants (most near a change of offset),
// Next is the first open instant found by stepping, it is open, and
// nothing before it is, checked second by second around every change and
// just before the opening.
func TestNextIsTheFirstOpenInstant(t *testing.T) {
	rng := rand.New(rand.NewPCG(2027, 3))
	edges := []int{0, 30, 60, 90, 105, 120, 135, 150, 165, 180, 225, 240, 1380, 1410, 1425, 1440}
	start, end := time.Date(2009, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)
	changes := map[string][]time.Time{}
	for _, name := range propertyZones {
		changes[name] = transitions(mustZone(t, name), start, end)
	}
	cases := 400
	if testing.Short() {
		cases = 100
	}
	for i := range cases {
		zone := propertyZones[rng.IntN(len(propertyZones))]
		var w localtime.Window
		for {
			minute := func() int {
				if rng.IntN(2) == 0 {
					return edges[rng.IntN(len(edges))]
				}
				return rng.IntN(1441)
			}
			from, to := minute()%1440, minute()
			if to == 0 {
				to = 1440
			}
			days := localtime.Weekdays(0)
			if rng.IntN(3) == 0 {
				days = localtime.Weekdays(1 + rng.IntN(126))
			}
			w = localtime.Window{From: localtime.TimeOfDay(from), To: localtime.TimeOfDay(to), Zone: zone, Days: days}
			if w.Validate() == nil {
				break
			}
		}
		var at time.Time
		if rng.IntN(8) == 0 { // about the last day of a leap year (golang/go#81583)
			at = time.Date(2012+4*rng.IntN(6), 12, 31, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(72*time.Hour))) - 36*time.Hour)
		} else if ch := changes[zone]; len(ch) > 0 && rng.IntN(4) != 0 {
			at = ch[rng.IntN(len(ch))].Add(time.Duration(rng.Int64N(int64(72*time.Hour))) - 48*time.Hour)
		} else {
			at = start.Add(time.Duration(rng.Int64N(int64(end.Sub(start)))))
		}
		if rng.IntN(2) == 0 {
			at = at.Truncate(time.Minute)
		}
		next := w.Next(at)
		if want := bruteNext(w, at); !next.Equal(want) {
			t.Fatalf("case %d: %v.Next(%s) = %s, stepping finds %s", i, w, at.Format(time.RFC3339Nano),
				next.UTC().Format(time.RFC3339Nano), want.UTC().Format(time.RFC3339Nano))
		}
		if !w.Contains(next) {
			t.Fatalf("case %d: %v.Next(%s) = %s, which it does not contain", i, w, at.Format(time.RFC3339Nano), next.Format(time.RFC3339Nano))
		}
		closed := func(from, to time.Time) {
			for u := from; u.Before(to) && u.Before(next); u = u.Add(time.Second) {
				if !u.Before(at) && w.Contains(u) {
					t.Fatalf("case %d: %v.Next(%s) = %s, but it contains %s", i, w, at.Format(time.RFC3339Nano),
						next.Format(time.RFC3339Nano), u.Format(time.RFC3339Nano))
				}
			}
		}
		closed(next.Add(-2*time.Minute), next)
		for _, ch := range transitions(mustZone(t, zone), at, next) {
			closed(ch.Add(-time.Minute), ch.Add(time.Minute))
		}
	}
}
