package recur_test

import (
	"fmt"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/recur"
)

// A reminder at 02:30 every Sunday in Berlin. On 28 March 2027 clocks
// spring forward over 02:30: the occurrence is kept, moved forward by the
// gap (03:30 CEST, 01:30 UTC); on 31 October 02:30 happens twice, and it
// is the first (CEST, 00:30 UTC).
func Example() {
	rule, err := recur.Parse("FREQ=WEEKLY;BYDAY=SU")
	if err != nil {
		fmt.Println(err)
		return
	}
	berlin, _ := localtime.LoadZone("Europe/Berlin")
	start, _ := localtime.ParseWall("2027-03-21T02:30")
	s := recur.Series{Rule: rule, Start: start, Zone: berlin}
	it := s.Iter()
	for range 3 {
		o, _ := it.Next()
		fmt.Println(o.N, o.Wall, o.At.Format(time.RFC3339))
	}
	after, _ := time.Parse(time.RFC3339, "2027-10-30T00:00:00Z")
	for _, o := range s.After(after, 2) {
		fmt.Println(o.N, o.Wall, o.At.Format(time.RFC3339))
	}
	// Output:
	// 1 2027-03-21T02:30 2027-03-21T01:30:00Z
	// 2 2027-03-28T02:30 2027-03-28T01:30:00Z
	// 3 2027-04-04T02:30 2027-04-04T00:30:00Z
	// 33 2027-10-31T02:30 2027-10-31T00:30:00Z
	// 34 2027-11-07T02:30 2027-11-07T01:30:00Z
}

// Each occurrence becomes a reminder of its own, with an id from the
// series' id and its nominal local time: reading the series again gives
// the same ids.
func ExampleOccurrenceID() {
	rule, _ := recur.Parse("FREQ=MONTHLY;BYDAY=-1FR;COUNT=3")
	newYork, _ := localtime.LoadZone("America/New_York")
	start, _ := localtime.ParseWall("2027-01-29T17:00")
	it := recur.Series{Rule: rule, Start: start, Zone: newYork}.Iter()
	for o, ok := it.Next(); ok; o, ok = it.Next() {
		fmt.Println(recur.OccurrenceID("rem-42", o))
	}
	// Output:
	// rem-42.20270129T1700
	// rem-42.20270226T1700
	// rem-42.20270326T1700
}

// Parse refuses what Nudge does not take, saying how to fix it.
func ExampleParse_refusal() {
	for _, text := range []string{
		"FREQ=MONTHLY;BYDAY=-6FR",
		"FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
		"FREQ=DAILY;COUNT=10;UNTIL=20271231",
	} {
		_, err := recur.Parse(text)
		fmt.Println(err)
	}
	// Output:
	// rrule BYDAY "-6FR": ordinal -6 is beyond -5 for FREQ=MONTHLY; give -5 to -1 or 1 to 5
	// rrule BYSETPOS "-1": is not supported; give BYDAY with ordinals (-1FR) or BYMONTHDAY (-1 for the last day) instead
	// rrule COUNT "10": is given with UNTIL, which RFC 5545 says MUST NOT be; give COUNT or UNTIL, not both
}

// Check says when a series is made that it will never remind anyone.
// The 31st of every month skips the short months, as RFC 5545 defines;
// -1 is the last day of every month.
func ExampleSeries_Check() {
	utc, _ := localtime.LoadZone("UTC")
	start, _ := localtime.ParseWall("2027-01-31T09:00")
	for _, text := range []string{"FREQ=YEARLY;BYMONTH=4;BYMONTHDAY=31", "FREQ=MONTHLY;BYMONTHDAY=31", "FREQ=MONTHLY;BYMONTHDAY=-1"} {
		rule, _ := recur.Parse(text)
		s := recur.Series{Rule: rule, Start: start, Zone: utc}
		if err := s.Check(); err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Print(text, ":")
		for _, o := range s.After(time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC), 3) {
			fmt.Print(" ", o.Wall)
		}
		fmt.Println()
	}
	// Output:
	// rrule "FREQ=YEARLY;BYMONTH=4;BYMONTHDAY=31": matches no date (like 30 February); check BYMONTHDAY against BYMONTH (-1 is the last day)
	// FREQ=MONTHLY;BYMONTHDAY=31: 2027-03-31T09:00 2027-05-31T09:00 2027-07-31T09:00
	// FREQ=MONTHLY;BYMONTHDAY=-1: 2027-02-28T09:00 2027-03-31T09:00 2027-04-30T09:00
}
