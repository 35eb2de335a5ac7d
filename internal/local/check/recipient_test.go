package check

import (
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/provider/webhook"
	"github.com/nudgehq/nudge/pkg/recur"
)

// recipientPlan is testPlan with three windowed deliveries in Kathmandu
// (+05:45): one whose window opened 20 minutes after its reminder fell
// due, one sent in a window open when it fell due, one whose window opens
// after the run; and two series: daily in Kathmandu (15 occurrences) and
// weekly in St John's (−03:30; 8), each first due 10 minutes before the
// run's end.
func recipientPlan(t *testing.T) Plan {
	t.Helper()
	p := testPlan()
	p.Windows = map[message.DeliveryKey]PlannedWindow{}
	p.Series = map[string]PlannedSeries{}
	p.SeriesAhead, p.SeriesCount = 35*24*time.Hour, 10
	window := func(name string, due, opens time.Time, spec string, expect ledger.Status) {
		w, err := localtime.ParseWindowSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		k := message.DeliveryKey{ReminderID: "rem-window-" + name, Channel: "email", Provider: webhook.Name}
		p.Deliveries[k] = Planned{Key: k, Kind: "window " + name, Expect: expect}
		p.Windows[k] = PlannedWindow{Window: w, Due: due, Opens: opens}
	}
	end := perfectEnd // 10:00 UTC, 15:45 in Kathmandu
	window("waited", end.Add(-30*time.Minute), end.Add(-10*time.Minute), "15:35-18:00 Asia/Kathmandu", ledger.StatusSent)
	window("open", end.Add(-30*time.Minute), end.Add(-30*time.Minute), "08:00-21:00 Asia/Kathmandu", ledger.StatusSent)
	window("shut", end.Add(-30*time.Minute), end.Add(16*time.Hour+15*time.Minute), "08:00-21:00 Asia/Kathmandu", ledger.StatusPending)
	series := func(id, kind, rule, zone string) {
		loc, err := localtime.LoadZone(zone)
		if err != nil {
			t.Fatal(err)
		}
		r, err := recur.Parse(rule)
		if err != nil {
			t.Fatal(err)
		}
		p.Series[id] = PlannedSeries{Series: recur.Series{Rule: r, Start: localtime.WallOf(end.Add(-10*time.Minute), loc), Zone: loc},
			Kind: kind, Channel: "email", Provider: webhook.Name}
	}
	series("rem-daily", "daily series", "FREQ=DAILY;COUNT=15", "Asia/Kathmandu")
	series("rem-weekly", "weekly series", "FREQ=WEEKLY;COUNT=8", "America/St_Johns")
	return p
}

// TestAPerfectRunKeepsItsWindowsAndSeries: the checker passes the perfect
// run of windows and series, with their figures: the daily series has its
// first occurrence due and ten ahead (the bound), the weekly one its first
// and the five within 35 days.
func TestAPerfectRunKeepsItsWindowsAndSeries(t *testing.T) {
	p := recipientPlan(t)
	v := Check(p, Perfect(p))
	if !v.OK() {
		t.Fatalf("violations: %v", v.Violations)
	}
	if v.WindowsWaited != 1 || v.WindowsOpen != 1 || v.WindowsShut != 1 {
		t.Errorf("windows waited %d, open %d, shut %d; want 1 each", v.WindowsWaited, v.WindowsOpen, v.WindowsShut)
	}
	if v.Series != 2 || v.Occurrences != 11+6 || v.OccurrencesSent != 2 {
		t.Errorf("series %d, occurrences %d (sent %d); want 2, 17 (2)", v.Series, v.Occurrences, v.OccurrencesSent)
	}
}

// TestTheCheckerCatchesWhatWindowsAndSeriesMustNotDo breaks the perfect
// run one way at a time.
func TestTheCheckerCatchesWhatWindowsAndSeriesMustNotDo(t *testing.T) {
	waited := message.DeliveryKey{ReminderID: "rem-window-waited", Channel: "email", Provider: webhook.Name}
	shut := message.DeliveryKey{ReminderID: "rem-window-shut", Channel: "email", Provider: webhook.Name}
	occ := func(p Plan, id string, n int) message.DeliveryKey {
		s := p.Series[id]
		for it := s.Series.Iter(); ; {
			o, ok := it.Next()
			if !ok {
				t.Fatalf("%s has no occurrence %d", id, n)
			}
			if o.N == n {
				return message.DeliveryKey{ReminderID: recur.OccurrenceID(id, o), Channel: s.Channel, Provider: s.Provider}
			}
		}
	}
	for _, c := range []struct {
		name   string
		break_ func(Plan, *Evidence)
		want   string
	}{
		{"sent before its window opened", func(_ Plan, ev *Evidence) {
			set(ev, waited, func(d *ledger.Delivery) { d.SentAt = d.DueAt.Add(-time.Minute) })
		}, "outside its send window"},
		{"sent after its window shut", func(_ Plan, ev *Evidence) {
			set(ev, waited, func(d *ledger.Delivery) { d.SentAt = d.DueAt.Add(3 * time.Hour) })
		}, "outside its send window"},
		{"due at the reminder's time, not the opening", func(p Plan, ev *Evidence) {
			set(ev, waited, func(d *ledger.Delivery) { d.DueAt = p.Windows[waited].Due })
		}, "which opens for it at"},
		{"the window lost", func(_ Plan, ev *Evidence) {
			set(ev, shut, func(d *ledger.Delivery) { d.Window = "" })
		}, "named the send window"},
		{"sent while its window stayed shut", func(_ Plan, ev *Evidence) {
			set(ev, shut, func(d *ledger.Delivery) { d.Status, d.SentAt = ledger.StatusSent, perfectEnd.Add(-time.Minute) })
			ev.Recorded[shut] = 1
		}, "ended sent"},
		{"an occurrence lost", func(p Plan, ev *Evidence) { delete(ev.Ledger, occ(p, "rem-daily", 11)) }, "lost: rem-daily."},
		{"an occurrence beyond the bound", func(p Plan, ev *Evidence) {
			k := occ(p, "rem-daily", 12)
			ev.Ledger[k] = ledger.Delivery{ReminderID: k.ReminderID, Channel: k.Channel, Provider: k.Provider, Status: ledger.StatusPending}
		}, "does not give, or not yet"},
		{"an occurrence the rule does not give", func(p Plan, ev *Evidence) {
			k := message.DeliveryKey{ReminderID: "rem-weekly.20261202T0630", Channel: "email", Provider: webhook.Name}
			ev.Ledger[k] = ledger.Delivery{ReminderID: k.ReminderID, Channel: k.Channel, Provider: k.Provider, Status: ledger.StatusPending}
		}, "does not give"},
		{"an occurrence at another time", func(p Plan, ev *Evidence) {
			set(ev, occ(p, "rem-weekly", 3), func(d *ledger.Delivery) { d.DueAt = d.DueAt.Add(time.Hour) })
		}, "its rule gives"},
		{"the first occurrence sent twice", func(p Plan, ev *Evidence) {
			k := occ(p, "rem-weekly", 1)
			ev.Resends = append(ev.Resends, Resend{Key: k.String(), Times: 1})
		}, "sent twice: rem-weekly."},
		{"the first occurrence never sent", func(p Plan, ev *Evidence) {
			set(ev, occ(p, "rem-daily", 1), func(d *ledger.Delivery) { d.Status = ledger.StatusPending })
			delete(ev.Recorded, occ(p, "rem-daily", 1))
		}, "ended pending"},
		{"a series not extended in time", func(_ Plan, ev *Evidence) {
			s := ev.Series["rem-daily"]
			s.ExtendAt = perfectEnd.Add(-time.Second)
			ev.Series["rem-daily"] = s
		}, "had not been extended"},
		{"a series lost", func(_ Plan, ev *Evidence) { delete(ev.Series, "rem-weekly") }, "lost: series rem-weekly"},
		{"a series cancelled", func(_ Plan, ev *Evidence) {
			s := ev.Series["rem-weekly"]
			s.CancelledAt = perfectEnd.Add(-time.Minute)
			ev.Series["rem-weekly"] = s
		}, "was cancelled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := recipientPlan(t)
			ev := Perfect(p)
			c.break_(p, &ev)
			v := Check(p, ev)
			for _, line := range v.Violations {
				if strings.Contains(line, c.want) {
					return
				}
			}
			t.Fatalf("want a violation with %q; got %v", c.want, v.Violations)
		})
	}
}
