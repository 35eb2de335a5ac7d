package schedule

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/text"
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
// with days, "09:00-17:00 mon-fri". It names no zone: it is in each
// reminder's.
func ParseDefaultWindow(s string) (DefaultWindow, error) {
	fields := strings.Fields(s)
	for _, f := range fields[min(1, len(fields)):] {
		if isZoneName(f) {
			return DefaultWindow{}, fmt.Errorf("send window %q: %w", s, &localtime.Error{Value: f,
				Problem: "is a time zone; a stage's window is in each reminder's timeZone", Fix: "leave the zone out: " + defaultLayout})
		}
	}
	w, err := parseHours(fields, defaultLayout)
	if err != nil {
		return DefaultWindow{}, fmt.Errorf("send window %q: %w", s, err)
	}
	return w, nil
}

const (
	defaultLayout = "write the hours like 08:00-21:00, with the days it opens after them if not every day: 08:00-21:00 mon-sat, or mon,wed,fri"
	specLayout    = "write the hours like 08:00-21:00, with the days it opens if not every day (08:00-21:00 mon-sat), " +
		"and a zone of its own if not the reminder's (08:00-21:00 America/New_York mon-fri)"
)

// parseHours reads a window's hours and the days it opens, fields as
// strings.Fields splits "08:00-21:00 mon-sat"; its errors suggest layout.
func parseHours(fields []string, layout string) (DefaultWindow, error) {
	bad := func(value, problem string) (DefaultWindow, error) {
		return DefaultWindow{}, &localtime.Error{Value: text.Clip(value, 40), Problem: problem, Fix: layout}
	}
	switch {
	case len(fields) == 0:
		return bad("", "is not a send window")
	case !strings.Contains(fields[0], "-"):
		return bad(fields[0], "is not a window's hours")
	case len(fields) > 2:
		return bad(strings.Join(fields, " "), "has more than hours and days (no spaces within the days)")
	}
	// Read as localtime reads a window, in a zone that is then dropped:
	// nothing else of the form can fail, so no error names it.
	w, err := localtime.ParseWindowSpec(fields[0] + " UTC " + strings.Join(fields[1:], ""))
	if err != nil {
		return DefaultWindow{}, err
	}
	return DefaultWindow{From: w.From, To: w.To, Days: w.Days}, nil
}

// isZoneName reports whether a field of a window names a zone rather than
// days: a region zone (Area/Location) or UTC, the names LoadZone takes.
func isZoneName(field string) bool {
	return strings.Contains(field, "/") || field == "UTC"
}

// String writes w as ParseDefaultWindow reads it.
func (w DefaultWindow) String() string {
	s := w.From.String() + "-" + w.To.String()
	if days := strings.TrimPrefix(w.In("UTC").String(), s+" UTC"); days != "" {
		s += days
	}
	return s
}

// ParseDefaultWindows reads a stage's default send windows by channel, as
// the intake's NUDGE_SEND_WINDOWS and the stack's sendWindows context give
// them: "sms=08:00-21:00 mon-sat; email=07:00-22:00", each channel once,
// each a known channel (message.Channels). Empty is none.
func ParseDefaultWindows(s string) (map[string]DefaultWindow, error) {
	out := map[string]DefaultWindow{}
	for part := range strings.SplitSeq(s, ";") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		channel, spec, ok := strings.Cut(part, "=")
		channel, spec = strings.TrimSpace(channel), strings.TrimSpace(spec)
		switch {
		case !ok || channel == "" || spec == "":
			return nil, fmt.Errorf("send windows: %q is not channel=window; write each as sms=08:00-21:00 mon-sat, separated by ;", part)
		case strings.Contains(spec, "="):
			return nil, fmt.Errorf("send windows: %q holds more than one channel=window; separate them by ;", part)
		case !slices.Contains(message.Channels, channel):
			return nil, fmt.Errorf("send windows: %q is not a known channel; use one of %s", channel, strings.Join(message.Channels, ", "))
		}
		if _, dup := out[channel]; dup {
			return nil, fmt.Errorf("send windows: channel %s is given twice; give each channel one window", channel)
		}
		w, err := ParseDefaultWindow(spec)
		if err != nil {
			return nil, fmt.Errorf("send windows: %s: %w", channel, err)
		}
		out[channel] = w
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// FormatDefaultWindows writes windows as ParseDefaultWindows reads them,
// channels in order.
func FormatDefaultWindows(windows map[string]DefaultWindow) string {
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(windows)) {
		parts = append(parts, c+"="+windows[c].String())
	}
	return strings.Join(parts, "; ")
}

// ParseWindowSpec reads a delivery's send window as the CLI's --window and
// the import's window column give it: hours, with the days it opens if not
// every day ("08:00-21:00", "08:00-21:00 mon-sat"), in the reminder's zone;
// or with a zone of its own, before or after the days ("08:00-21:00
// America/New_York mon-fri", "08:00-21:00 mon-fri America/New_York"). Empty
// is none (nil): the stage's default for the channel, if any.
// localtime.ParseWindow has the rules of each part.
func ParseWindowSpec(s string) (*WindowInput, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, nil
	}
	zone, rest := "", []string{fields[0]}
	for _, f := range fields[1:] {
		switch {
		case !isZoneName(f):
			rest = append(rest, f)
		case zone != "":
			return nil, fmt.Errorf("send window %q: %w", s, &localtime.Error{Value: f, Problem: "is a second time zone", Fix: "give the window one zone"})
		default:
			zone = f
		}
	}
	d, err := parseHours(rest, specLayout)
	if err != nil {
		return nil, fmt.Errorf("send window %q: %w", s, err)
	}
	if zone != "" {
		if _, err := localtime.LoadZone(zone); err != nil {
			return nil, fmt.Errorf("send window %q: %w", s, err)
		}
	}
	in := windowInput(d.In(cmp.Or(zone, "UTC")))
	in.TimeZone = zone // none: the reminder's
	return in, nil
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
