package localtime_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nudgehq/nudge/pkg/localtime"
)

func TestLoadZoneRefusesWhatIsNotARegion(t *testing.T) {
	for _, c := range []struct{ name, fix string }{ // a word of the fix
		{"", "Europe/Berlin"},
		{"Local", "Europe/Berlin"},
		{"europe/berlin", "did you mean Europe/Berlin?"},
		{"EST", "America/New_York"},
		{"CET", "Europe/Berlin"},
		{"EST5EDT", "America/New_York"},
		{"Japan", "region zone"},
		{"Etc/GMT+5", "America/New_York"},
		{"Etc/GMT-14", "America/New_York"},
		{"Mars/Olympus", "Europe/Berlin"},
		{"Europe/Berlin ", "Europe/Berlin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			loc, err := localtime.LoadZone(c.name)
			var e *localtime.Error
			if !errors.As(err, &e) {
				t.Fatalf("LoadZone = %v, %v; want an *Error", loc, err)
			}
			if e.Fix == "" || !strings.Contains(e.Fix, c.fix) {
				t.Errorf("error %q; want a fix that says %q", err, c.fix)
			}
		})
	}
}

func TestLoadZoneTakesRegionsAndUTC(t *testing.T) {
	for _, name := range []string{"UTC", "Etc/UTC", "Etc/GMT", "Europe/Berlin", "America/Argentina/Buenos_Aires", "US/Eastern"} {
		loc, err := localtime.LoadZone(name)
		if err != nil {
			t.Errorf("LoadZone(%q): %v", name, err)
			continue
		}
		if loc.String() != name {
			t.Errorf("LoadZone(%q) is called %q", name, loc)
		}
		if again, _ := localtime.LoadZone(name); again != loc {
			t.Errorf("LoadZone(%q) twice gave two Locations; want the cached one", name)
		}
	}
}

// Names holds every zone, sorted, and LoadZone takes most of them; what it
// refuses it refuses with a fix.
func TestNamesAreTheDatabase(t *testing.T) {
	names := localtime.Names()
	if len(names) < 400 {
		t.Fatalf("Names has %d zones, want the whole database", len(names))
	}
	taken := 0
	for i, name := range names {
		if i > 0 && names[i-1] >= name {
			t.Fatalf("Names is not sorted: %q before %q", names[i-1], name)
		}
		_, err := localtime.LoadZone(name)
		if err == nil {
			taken++
			continue
		}
		if e := (*localtime.Error)(nil); !errors.As(err, &e) || e.Fix == "" {
			t.Errorf("LoadZone(%q) = %v, want a zone or an *Error with a fix", name, err)
		}
	}
	if taken < 400 {
		t.Errorf("LoadZone takes %d of %d zones, want most", taken, len(names))
	}
	names[0] = "changed"
	if localtime.Names()[0] == "changed" {
		t.Error("Names gave away its own slice")
	}
}
