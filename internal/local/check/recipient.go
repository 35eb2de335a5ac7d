package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/recur"
)

// PlannedWindow is the send window a delivery named, as the run asked for
// it; Due is its reminder's due time, and Opens when the run built the
// window to open for it: the due time the ledger must hold (Due itself if
// the window was open then). A run sets them when it creates the reminder,
// since it draws the window from that time.
type PlannedWindow struct {
	Window     localtime.Window
	Due, Opens time.Time
}

// PlannedSeries is a recurring reminder the run created: its rule, first
// occurrence and zone (what it gave the API), its place in the mix (Kind),
// and the channel and provider of the one delivery each occurrence makes.
type PlannedSeries struct {
	Series            recur.Series
	Kind              string
	Channel, Provider string
}

// occurrenceKind is a series occurrence's Kind, as the checker plans it.
func occurrenceKind(s PlannedSeries, n int) string {
	return fmt.Sprintf("occurrence %d of a %s", n, s.Kind)
}

// occurrences are the occurrences of s that a system keeping its bounds
// has created by end: every one due within ahead of end, and no more than
// count created and not yet due (schedule.Store.Extend's rule, restated
// here, so that a run's ledger is judged by the rule and not by the code
// under test).
func occurrences(s recur.Series, end time.Time, ahead time.Duration, count int) []recur.Occurrence {
	var out []recur.Occurrence
	horizon, waiting := end.Add(ahead), 0
	for it := s.Iter(); ; {
		o, ok := it.Next()
		if !ok || o.At.After(horizon) || waiting >= count {
			return out
		}
		out = append(out, o)
		if o.At.After(end) {
			waiting++
		}
	}
}

// withSeries returns p with every occurrence a run of its series must have
// created by ev.End among its deliveries (sent once if due by then,
// pending if not), and the violations of the series themselves: a series
// missing from the ledger, one still waiting at the end for an extension
// whose time had come, an occurrence the rule does not give or the bounds
// do not allow, one due at another time than its rule's.
func withSeries(p Plan, ev Evidence) (Plan, []string) {
	if len(p.Series) == 0 {
		return p, nil
	}
	var out []string
	violate := func(format string, args ...any) {
		if len(out) < 20 {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	all := make(map[message.DeliveryKey]Planned, len(p.Deliveries))
	for k, d := range p.Deliveries {
		all[k] = d
	}
	p.Deliveries = all
	// The ledger's occurrences by series: an occurrence's id is its
	// series' and a dot (recur.OccurrenceID).
	created := map[string][]message.DeliveryKey{}
	for k := range ev.Ledger {
		if i := strings.LastIndexByte(k.ReminderID, '.'); i > 0 {
			if _, ok := p.Series[k.ReminderID[:i]]; ok {
				created[k.ReminderID[:i]] = append(created[k.ReminderID[:i]], k)
			}
		}
	}
	for _, id := range sortedIDs(p.Series) {
		s := p.Series[id]
		stored, ok := ev.Series[id]
		switch {
		case !ok:
			violate("lost: series %s (%s) is not in the ledger", id, s.Kind)
		case !stored.CancelledAt.IsZero():
			violate("series %s (%s) was cancelled; the run never cancelled it", id, s.Kind)
		case !stored.ExtendAt.IsZero() && !stored.ExtendAt.After(ev.End):
			violate("series %s (%s) was due for its next occurrences at %s and had not been extended by the end (%s)", id, s.Kind,
				stored.ExtendAt.Format(time.RFC3339), ev.End.Format(time.RFC3339))
		}
		want := map[message.DeliveryKey]recur.Occurrence{}
		for _, o := range occurrences(s.Series, ev.End, p.SeriesAhead, p.SeriesCount) {
			k := message.DeliveryKey{ReminderID: recur.OccurrenceID(id, o), Channel: s.Channel, Provider: s.Provider}
			want[k] = o
			d := Planned{Key: k, Kind: occurrenceKind(s, o.N), Expect: ledger.StatusSent}
			if o.At.After(ev.End) {
				d.Expect = ledger.StatusPending
			}
			p.Deliveries[k] = d
			if got, ok := ev.Ledger[k]; ok && !got.DueAt.Equal(o.At) {
				violate("%s (occurrence %d of series %s, %s in %s) is due at %s; its rule gives %s", k, o.N, id, o.Wall, s.Series.Zone,
					got.DueAt.Format(time.RFC3339), o.At.Format(time.RFC3339))
			}
		}
		slices.SortFunc(created[id], func(a, b message.DeliveryKey) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range created[id] {
			if _, ok := want[k]; !ok {
				violate("%s is an occurrence of series %s that its rule (%s, from %s in %s) does not give, or not yet (at most %d ahead, within %v)",
					k, id, s.Series.Rule, s.Series.Start, s.Series.Zone, p.SeriesCount, p.SeriesAhead)
			}
		}
	}
	return p, out
}

// windows checks each delivery that named a send window: the ledger holds
// it due at the window's opening (Opens), and one sent was sent inside its
// window, not before it opened. It counts them in v.
func (v *Verdict) windows(p Plan, ev Evidence) []string {
	var out []string
	violate := func(format string, args ...any) {
		if len(out) < 20 {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	var waited []time.Duration
	for _, k := range sortedKeys(p.Windows) {
		w := p.Windows[k]
		got, ok := ev.Ledger[k]
		if !ok {
			continue // lost: violations says so
		}
		if !got.DueAt.Equal(w.Opens) {
			violate("%s names the send window %s, which opens for it at %s; the ledger holds it due at %s", k, w.Window,
				w.Opens.Format(time.RFC3339), got.DueAt.Format(time.RFC3339))
		}
		if got.Window != w.Window.String() {
			violate("%s named the send window %s; the ledger holds %q", k, w.Window, got.Window)
		}
		switch {
		case got.Status != ledger.StatusSent:
			if got.Status == ledger.StatusPending && w.Opens.After(ev.End) {
				v.WindowsShut++
			}
		case !w.Window.Contains(got.SentAt) || got.SentAt.Before(w.Opens):
			violate("%s was sent at %s, outside its send window %s (it opens for it at %s)", k, got.SentAt.Format(time.RFC3339Nano), w.Window,
				w.Opens.Format(time.RFC3339))
		case w.Opens.After(w.Due):
			v.WindowsWaited++
			waited = append(waited, got.SentAt.Sub(w.Opens))
		default:
			v.WindowsOpen++
		}
	}
	slices.Sort(waited)
	v.WindowWaitP50, v.WindowWaitMax = quantile(waited, 0.5), quantile(waited, 1)
	return out
}

// seriesFigures counts the planned series and their occurrences in the
// ledger.
func (v *Verdict) seriesFigures(p Plan, ev Evidence) {
	v.Series = len(p.Series)
	for k, d := range p.Deliveries {
		if !strings.HasPrefix(d.Kind, "occurrence ") {
			continue
		}
		got, ok := ev.Ledger[k]
		if !ok {
			continue
		}
		v.Occurrences++
		if got.Status == ledger.StatusSent {
			v.OccurrencesSent++
		}
	}
}

func sortedIDs[T any](m map[string]T) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
