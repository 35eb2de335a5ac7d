package schedule

import (
	"fmt"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/localtime"
)

// DefaultWindow is a stage's send window for a channel: the hours and days
// of a localtime.Window without its zone, which is each reminder's
// (Reminder.TimeZone). A delivery that names no window of its own takes
// its channel's default, if its reminder has a zone.
type DefaultWindow struct {
	From, To localtime.TimeOfDay
	Days     localtime.Weekdays
}

// ParseDefaultWindow reads a stage's default window: "08:00-21:00", or
// with days, "09:00-17:00 mon-fri".
func ParseDefaultWindow(s string) (DefaultWindow, error) {
	hours, days, _ := cutSpace(s)
	w, err := localtime.ParseWindowSpec(hours + " UTC " + days)
	if err != nil {
		return DefaultWindow{}, fmt.Errorf("send window %q: %w", s, err)
	}
	return DefaultWindow{From: w.From, To: w.To, Days: w.Days}, nil
}

func cutSpace(s string) (before, after string, found bool) {
	for i := range len(s) {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// In is w in zone.
func (w DefaultWindow) In(zone string) localtime.Window {
	return localtime.Window{From: w.From, To: w.To, Zone: zone, Days: w.Days}
}

// checkWindow checks a delivery's window at field prefix f: its zone is
// the reminder's unless it names one; none given is the stage's default
// for the channel, in the reminder's zone.
func (v Validator) checkWindow(f, channel string, in *WindowInput, zone string) (localtime.Window, *fieldProblem) {
	if in == nil {
		def, ok := v.Windows[channel]
		if !ok || zone == "" {
			return localtime.Window{}, nil
		}
		return def.In(zone), nil
	}
	if in.TimeZone == "" {
		in = &WindowInput{From: in.From, To: in.To, TimeZone: zone, Days: in.Days}
	}
	if in.TimeZone == "" {
		return localtime.Window{}, &fieldProblem{f + "window.timeZone", "is missing, and the reminder has no timeZone",
			"name the recipient's IANA zone here, or as the reminder's timeZone"}
	}
	w, err := localtime.ParseWindow(in.From, in.To, in.TimeZone, in.Days)
	if err != nil {
		return localtime.Window{}, &fieldProblem{f + "window", problemOf(err), fixOf(err)}
	}
	return w, nil
}

// checkOpens refuses a delivery whose window first opens only after the
// reminder has expired (after its late policy's bound, under send-late):
// it could never be sent.
func (v Validator) checkOpens(f string, w localtime.Window, r Reminder) *fieldProblem {
	if w.IsZero() {
		return nil
	}
	last, _ := lateRule(r.Late).DeliveryTimes(r.ExpiresAt)
	if opens := w.Next(r.DueAt); !opens.Before(last) {
		return &fieldProblem{f + "window", fmt.Sprintf("first opens at %s (%s), when the delivery has expired (%s), so it could never be sent",
			ledger.Format(opens), w, ledger.Format(last)),
			"widen the window, give a later expiresAt, or a late policy (send-late)"}
	}
	return nil
}
