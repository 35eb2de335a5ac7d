package localtime

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

//go:generate sh update-zoneinfo.sh

// zoneinfo is the Go toolchain's copy of the IANA database (release
// Version), one file per zone, stored uncompressed.
//
//go:embed zoneinfo.zip
var zoneinfo []byte

var (
	zonesOnce sync.Once
	zoneFiles map[string]*zip.File
	zoneNames []string
	zoneErr   error
	loaded    sync.Map // name → *time.Location
)

func openZones() {
	r, err := zip.NewReader(bytes.NewReader(zoneinfo), int64(len(zoneinfo)))
	if err != nil {
		zoneErr = fmt.Errorf("localtime: the embedded zone database is unreadable: %w", err)
		return
	}
	zoneFiles = make(map[string]*zip.File, len(r.File))
	for _, f := range r.File {
		zoneFiles[f.Name] = f
		zoneNames = append(zoneNames, f.Name)
	}
	slices.Sort(zoneNames)
}

// Names lists every zone in the embedded database, sorted, including the
// ones LoadZone refuses as ambiguous.
func Names() []string {
	zonesOnce.Do(openZones)
	return slices.Clone(zoneNames)
}

// LoadZone loads the IANA zone called name ("Europe/Berlin") from the
// embedded database. It refuses, with a fix:
//   - an empty name, and "Local" (whichever machine runs the code);
//   - a name the database does not hold (suggesting the right spelling
//     where only the case differs);
//   - a legacy name or abbreviation without a region ("EST", "CET",
//     "EST5EDT", "Japan"), which may look like a region's time without
//     following it, and a fixed offset in POSIX's inverted sign
//     ("Etc/GMT+5"): give a region zone such as "America/New_York".
//     "UTC", "Etc/UTC" and "Etc/GMT" are taken.
//
// Loaded zones are cached.
func LoadZone(name string) (*time.Location, error) {
	if loc, ok := loaded.Load(name); ok {
		return loc.(*time.Location), nil
	}
	zonesOnce.Do(openZones)
	if zoneErr != nil {
		return nil, zoneErr
	}
	bad := func(problem, fix string) (*time.Location, error) {
		return nil, &Error{Value: clip(name), Problem: problem, Fix: fix}
	}
	const region = "give an IANA region zone such as Europe/Berlin or America/New_York, or UTC"
	switch {
	case name == "":
		return bad("is not a time zone", region)
	case name == "Local":
		return bad("names whichever zone the machine is set to", region)
	}
	f := zoneFiles[name]
	if f == nil {
		for _, n := range zoneNames {
			if strings.EqualFold(n, name) {
				return bad("is not a time zone", fmt.Sprintf("zone names are case-sensitive: did you mean %s?", n))
			}
		}
		return bad("is not a time zone in the database (release "+Version+")", region)
	}
	if !strings.Contains(name, "/") && name != "UTC" {
		return bad("is a legacy name or an abbreviation, not a region zone (Area/Location)",
			region+"; a region zone follows its region's daylight-saving changes")
	}
	if strings.HasPrefix(name, "Etc/GMT") && len(name) > len("Etc/GMT") && name != "Etc/GMT0" {
		return bad("is a fixed offset written with POSIX's inverted sign (Etc/GMT+5 is five hours behind UTC)", region)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("localtime: zone %s: %w", name, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("localtime: zone %s: %w", name, err)
	}
	loc, err := time.LoadLocationFromTZData(name, data)
	if err != nil {
		return nil, fmt.Errorf("localtime: zone %s: %w", name, err)
	}
	actual, _ := loaded.LoadOrStore(name, loc)
	return actual.(*time.Location), nil
}

// zoneEnd is when the zone in force at t ends (the zero Time if never):
// t.ZoneBounds' end, mended. Where a zone's TZ footer rule serves (the
// years after its last listed transition: from about 2008 in Go's
// zoneinfo.zip), Go takes every year to be 365 days long, so in the last
// UTC day of a leap year ZoneBounds ends the zone at that day's start, at
// or before t (golang/go#81583). The rule's year, and the zone, then go on
// to the end of the UTC year.
func zoneEnd(t time.Time) time.Time {
	_, end := t.ZoneBounds()
	if end.IsZero() || end.After(t) {
		return end
	}
	return time.Date(t.UTC().Year()+1, time.January, 1, 0, 0, 0, 0, time.UTC).In(t.Location())
}
