package ledger

import (
	"fmt"
	"time"
)

// Earliest is the earliest time a reminder may be due or expire: no
// reminder is due before 2000. A time before it is a mistake (Go's zero
// time, year 1, an epoch read as seconds for milliseconds), and one the
// ledger would store but not tell from "unset".
var Earliest = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Latest is the latest: the ledger's fixed-width time format has four
// digits for the year.
var Latest = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)

// checkTimes refuses a reminder whose times its deliveries could not have:
// so that no reminder item is ever written that its deliveries, or a
// cancel's tombstones, cannot follow (Create refuses a delivery without
// them).
func checkTimes(id string, dueAt, expiresAt time.Time) error {
	switch {
	case dueAt.Before(Earliest) || expiresAt.Before(Earliest):
		return fmt.Errorf("ledger: reminder %q: dueAt %s or expiresAt %s is before %s", id, Format(dueAt), Format(expiresAt), Format(Earliest))
	case dueAt.After(Latest) || expiresAt.After(Latest):
		return fmt.Errorf("ledger: reminder %q: dueAt %s or expiresAt %s is after %s", id, Format(dueAt), Format(expiresAt), Format(Latest))
	case !expiresAt.After(dueAt):
		return fmt.Errorf("ledger: reminder %q: expiresAt %s is not after dueAt %s", id, Format(expiresAt), Format(dueAt))
	}
	return nil
}
