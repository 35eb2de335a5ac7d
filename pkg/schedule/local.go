package schedule

import (
	"errors"
	"fmt"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/localtime"
)

// Local is a reminder's local times, as its caller gave them: the
// recipient's IANA zone and, where the caller wrote them so, the due and
// expiry times on the recipient's wall clock (pkg/localtime's form,
// "2027-03-28T09:30"). DueAt and ExpiresAt are always the instants,
// computed from these by RFC 5545's rules (docs/api.md#local-times): a
// local time that does not exist (clocks spring forward over it) is moved
// forward by the gap; one that exists twice (clocks fall back) is the
// first, unless dueAt is given with it and names the second.
type Local struct {
	// TimeZone is the recipient's IANA zone ("Europe/Berlin"); empty for
	// a reminder given in absolute times only.
	TimeZone string `json:"timeZone,omitempty"`
	// DueLocal is the due time on the recipient's wall clock, as given;
	// empty where dueAt was given alone.
	DueLocal string `json:"dueLocal,omitempty"`
	// ExpiresLocal is the expiry on the recipient's wall clock, as given;
	// empty where expiresAt was given, or left to its default.
	ExpiresLocal string `json:"expiresLocal,omitempty"`
}

// IsZero reports whether l holds nothing: a reminder in absolute times.
func (l Local) IsZero() bool { return l == Local{} }

// localIn is what a caller gave of a reminder's times (an Input's, or a
// reschedule's Times).
type localIn struct {
	dueAt, expiresAt, dueLocal, expiresLocal, timeZone string
}

// resolveLocal turns the local times a caller gave into the RFC 3339
// dueAt and expiresAt that Validator.times checks (an empty expiresAt is
// left to its default), and the Local to store. A caller who gives no
// local time and no zone gets its absolute times back unchanged.
//
// dueLocal and dueAt may both be given: then dueAt must be dueLocal in the
// zone, which is how a caller picks the second of a repeated time (the
// hour clocks fall back over). The same holds for expiresLocal and
// expiresAt.
func resolveLocal(id string, in localIn) (dueAt, expiresAt string, l Local, err error) {
	bad := func(field, problem, fix string) (string, string, Local, error) {
		return "", "", Local{}, &ValidationError{ID: id, Field: field, Problem: problem, Fix: fix}
	}
	if in.timeZone == "" {
		for _, f := range []struct{ field, value string }{{"dueLocal", in.dueLocal}, {"expiresLocal", in.expiresLocal}} {
			if f.value != "" {
				return bad("timeZone", "is missing, and "+f.field+" needs it",
					"name the recipient's IANA zone, like \"timeZone\": \"Europe/Berlin\", or give an absolute RFC 3339 time instead")
			}
		}
		return in.dueAt, in.expiresAt, Local{}, nil
	}
	loc, err := localtime.LoadZone(in.timeZone)
	if err != nil {
		return bad("timeZone", problemOf(err), fixOf(err))
	}
	l.TimeZone = in.timeZone
	if in.dueLocal == "" && in.dueAt == "" {
		return bad("dueLocal", "is missing", "give the local due time, like \"dueLocal\": \"2027-03-28T09:30\", or an RFC 3339 dueAt")
	}
	if dueAt, l.DueLocal, err = resolveOne(id, "dueLocal", "dueAt", in.dueLocal, in.dueAt, loc); err != nil {
		return "", "", Local{}, err
	}
	if expiresAt, l.ExpiresLocal, err = resolveOne(id, "expiresLocal", "expiresAt", in.expiresLocal, in.expiresAt, loc); err != nil {
		return "", "", Local{}, err
	}
	return dueAt, expiresAt, l, nil
}

// resolveOne resolves one local time (localField's value local) in loc,
// checking it against the absolute one given beside it (atField's value
// at), and returns the absolute time to check and the local time to
// store, in its canonical form.
func resolveOne(id, localField, atField, local, at string, loc *time.Location) (string, string, error) {
	if local == "" {
		return at, "", nil
	}
	w, err := localtime.ParseWall(local)
	if err != nil {
		return "", "", &ValidationError{ID: id, Field: localField, Problem: problemOf(err), Fix: fixOf(err)}
	}
	resolved, how := localtime.Resolve(w, loc)
	if at == "" {
		return FormatTime(resolved), w.String(), nil
	}
	given, err := parseTime(at)
	if err != nil {
		return "", "", &ValidationError{ID: id, Field: atField, Problem: describeTime(at, err), Fix: "write an RFC 3339 time with a zone, or leave it out: " + localField + " says the time"}
	}
	// Either instant of a repeated time; the resolved one of any other.
	if given.Equal(resolved) || how == localtime.Repeated && localtime.WallOf(given, loc) == w && given.Truncate(time.Second).Equal(given) {
		return FormatTime(given), w.String(), nil
	}
	return "", "", &ValidationError{ID: id, Field: atField,
		Problem: fmt.Sprintf("%s is not %s %s in %s, which is %s", FormatTime(given), localField, w, loc, FormatTime(resolved)),
		Fix:     "give one of them, or make them agree"}
}

// problemOf and fixOf split a localtime.Error for a ValidationError.
func problemOf(err error) string {
	var le *localtime.Error
	if errors.As(err, &le) {
		return fmt.Sprintf("%q %s", text.Clip(le.Value, 43), le.Problem)
	}
	return err.Error()
}

func fixOf(err error) string {
	var le *localtime.Error
	if errors.As(err, &le) {
		return le.Fix
	}
	return ""
}

// localOf is a Local as the ledger stores it, and back.
func localItem(l Local) ledger.Local {
	return ledger.Local{TimeZone: l.TimeZone, DueLocal: l.DueLocal, ExpiresLocal: l.ExpiresLocal}
}

func localOf(l ledger.Local) Local {
	return Local{TimeZone: l.TimeZone, DueLocal: l.DueLocal, ExpiresLocal: l.ExpiresLocal}
}

// LocalView is one of a reminder's times as `reminder show` and the
// console tell it: the instant, and the recipient's wall clock with its
// zone's abbreviation ("2027-03-28 03:30 CEST"), and what became of a
// local time given where clocks skip or repeat it.
func LocalView(at time.Time, zone, given string) string {
	loc, err := localtime.LoadZone(zone)
	if err != nil || at.IsZero() {
		return ""
	}
	s := at.In(loc).Format("2006-01-02 15:04:05 MST")
	if given == "" {
		return s + " " + zone
	}
	w, err := localtime.ParseWall(given)
	if err != nil {
		return s + " " + zone
	}
	switch _, how := localtime.Resolve(w, loc); {
	case how == localtime.Skipped:
		return fmt.Sprintf("%s %s (given %s, which clocks skip that day: moved forward by the gap)", s, zone, given)
	case how == localtime.Repeated:
		return fmt.Sprintf("%s %s (given %s, which clocks show twice that day: the %s)", s, zone, given, ordinalOf(at, w, loc))
	}
	return s + " " + zone
}

// ordinalOf says which of a repeated wall-clock time's two instants at is.
func ordinalOf(at time.Time, w localtime.Wall, loc *time.Location) string {
	if first, _ := localtime.Resolve(w, loc); at.Truncate(time.Second).Equal(first) {
		return "first"
	}
	return "second"
}
