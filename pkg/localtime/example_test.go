package localtime_test

import (
	"fmt"
	"time"

	"github.com/nudgehq/nudge/pkg/localtime"
)

// Berlin's changes in 2027: 02:30 is skipped in March and repeated in
// October.
func ExampleResolve() {
	berlin, err := localtime.LoadZone("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	for _, s := range []string{"2027-03-28T02:30", "2027-10-31T02:30", "2027-06-01T09:00"} {
		w, err := localtime.ParseWall(s)
		if err != nil {
			panic(err)
		}
		at, how := localtime.Resolve(w, berlin)
		fmt.Println(s, "→", at.Format(time.RFC3339), at.In(berlin).Format("15:04 MST"), how)
	}
	// Output:
	// 2027-03-28T02:30 → 2027-03-28T01:30:00Z 03:30 CEST skipped
	// 2027-10-31T02:30 → 2027-10-31T00:30:00Z 02:30 CEST repeated
	// 2027-06-01T09:00 → 2027-06-01T07:00:00Z 09:00 CEST exact
}

// A weekday window: a reminder due on Friday evening waits for Monday.
func ExampleWindow_Next() {
	w, err := localtime.ParseWindowSpec("08:00-21:00 America/New_York mon-fri")
	if err != nil {
		panic(err)
	}
	friday := time.Date(2027, 6, 5, 2, 0, 0, 0, time.UTC) // Friday 22:00 EDT
	next := w.Next(friday)
	fmt.Println(w.Contains(friday), next.Format(time.RFC3339), next.In(mustLoad("America/New_York")).Format("Mon 15:04 MST"))
	// Output: false 2027-06-07T12:00:00Z Mon 08:00 EDT
}

// A window as the API shows it.
func ExampleWindow_MarshalJSON() {
	w, err := localtime.ParseWindow("22:00", "06:00", "Europe/Berlin", []string{"Friday", "sat"})
	if err != nil {
		panic(err)
	}
	raw, err := w.MarshalJSON()
	if err != nil {
		panic(err)
	}
	fmt.Println(string(raw))
	fmt.Println(w)
	// Output:
	// {"from":"22:00","to":"06:00","timeZone":"Europe/Berlin","days":["fri","sat"]}
	// 22:00-06:00 Europe/Berlin fri,sat
}

func mustLoad(name string) *time.Location {
	loc, err := localtime.LoadZone(name)
	if err != nil {
		panic(err)
	}
	return loc
}
