package demo

import (
	"fmt"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/local/check"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/recur"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// The recipient's time in the mix: deliveries with send windows, and
// series, in zones whose offsets are not whole hours. Windows are drawn
// in zones without daylight saving, so that a window drawn to open six
// hours after its reminder opens then, whatever the day of the run; the
// series' zones change their clocks, and the checker places each
// occurrence by its rule across the changes.
var (
	windowZones = []string{"Asia/Kathmandu", "Australia/Eucla", "Asia/Kolkata", "Australia/Darwin"}
	seriesZones = []string{"Australia/Adelaide", "America/St_Johns", "Pacific/Chatham", "Asia/Kathmandu"}
)

// rules are the series' rules, by kind: a daily series makes more
// occurrences within the horizon than a series keeps ahead (the count
// binds), a weekly one fewer (the horizon binds); each is extended by the
// enqueue once its first occurrence falls due.
var rules = map[kind]string{daily: "FREQ=DAILY;COUNT=15", weekly: "FREQ=WEEKLY;COUNT=8"}

// windowLead is the least time between a reminder that waits for its
// window and the window's opening: a window opens on the minute.
const windowLead = 5 * time.Second

// recipients says whether reminders of kind k are in a recipient's zone.
func (k kind) recipients() bool { return k.windowed() || k.series() }

func (k kind) windowed() bool { return k == windowWaits || k == windowOpen || k == windowShut }
func (k kind) series() bool   { return k == daily || k == weekly }

// zoneOf is the i-th reminder's zone, if its kind has one.
func zoneOf(k kind, i int) string {
	switch {
	case k.windowed():
		return windowZones[i%len(windowZones)]
	case k.series():
		return seriesZones[i%len(seriesZones)]
	}
	return ""
}

// drawWindow draws r's send window, at its first creation attempt (now):
// for one that waits, a window that opens on the first minute at least
// windowLead and half the spread away and stays open three hours, on that
// day alone; for one in its window, four hours around now (r.opens zero:
// it opens for the delivery at its due time); for one shut
// all run, an hour from six hours on (the zones keep one offset all year,
// so it opens six hours on).
func (r *plannedReminder) drawWindow(now time.Time, spread time.Duration) (schedule.WindowInput, error) {
	if r.windowIn != nil {
		return *r.windowIn, nil // a retry: the window drawn at the first attempt
	}
	loc, err := localtime.LoadZone(r.zone)
	if err != nil {
		return schedule.WindowInput{}, err
	}
	hm := func(t time.Time) string { return t.In(loc).Format("15:04") }
	var in schedule.WindowInput
	switch r.kind {
	case windowWaits:
		r.opens = now.Add(max(windowLead, spread/2)).Truncate(time.Minute).Add(time.Minute)
		day := strings.ToLower(r.opens.In(loc).Weekday().String()[:3])
		in = schedule.WindowInput{From: hm(r.opens), To: hm(r.opens.Add(3 * time.Hour)), Days: []string{day}}
	case windowOpen:
		r.opens = time.Time{} // open when it falls due: at its due time
		in = schedule.WindowInput{From: hm(now.Add(-2 * time.Hour)), To: hm(now.Add(2 * time.Hour))}
	case windowShut:
		r.opens = now.Add(6 * time.Hour).Truncate(time.Minute).Add(time.Minute)
		in = schedule.WindowInput{From: hm(r.opens), To: hm(r.opens.Add(time.Hour))}
	}
	in.TimeZone = r.zone
	if r.window, err = localtime.ParseWindow(in.From, in.To, in.TimeZone, in.Days); err != nil {
		return in, fmt.Errorf("demo: %s's window: %w", r.id, err)
	}
	r.windowIn = &in
	return in, nil
}

// seriesInput is series r's intake record: its first occurrence soon after
// now (drawn at the first attempt, the same at every retry), in its zone.
func (p *plan) seriesInput(r *plannedReminder, now time.Time) schedule.Input {
	if r.start == (localtime.Wall{}) {
		loc, _ := localtime.LoadZone(r.zone) // one of seriesZones
		r.start = localtime.WallOf(now.Add(r.soon), loc)
	}
	return schedule.Input{ID: r.id, AccountRef: "acct-demo", DueLocal: r.start.String(), TimeZone: r.zone, Recur: rules[r.kind],
		Metadata: map[string]string{"demo": string(r.kind), "reference": r.id},
		Deliveries: []schedule.DeliveryInput{{Channel: "email", Provider: stoodIn(provider.SinkStandIn),
			RecipientRef: "contact/" + r.id + "/0", TemplateRef: "renewal-notice-v3"}}}
}

// recipientPlan adds to the checker's plan the windows and series the run
// created (before the check, once no one else reads the plan).
func (r *run) recipientPlan() (check.Plan, error) {
	p := r.plan.Plan
	p.Windows, p.Series = map[message.DeliveryKey]check.PlannedWindow{}, map[string]check.PlannedSeries{}
	p.SeriesAhead, p.SeriesCount = schedule.DefaultSeriesAhead, schedule.DefaultSeriesCount
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rem := range r.plan.reminders {
		due, created := r.created[rem.id]
		switch {
		case !created:
			continue // its creation failed: a problem the run reports
		case rem.kind.windowed():
			opens := rem.opens
			if due.After(opens) {
				opens = due // open when it fell due
			}
			for _, d := range rem.deliveries {
				p.Windows[d.Key] = check.PlannedWindow{Window: rem.window, Due: due, Opens: opens}
			}
		case rem.kind.series():
			rule, err := recur.Parse(rules[rem.kind])
			if err != nil {
				return p, err
			}
			loc, err := localtime.LoadZone(rem.zone)
			if err != nil {
				return p, err
			}
			p.Series[rem.id] = check.PlannedSeries{Series: recur.Series{Rule: rule, Start: rem.start, Zone: loc}, Kind: string(rem.kind),
				Channel: "email", Provider: stoodIn(provider.SinkStandIn)}
		}
	}
	return p, nil
}
