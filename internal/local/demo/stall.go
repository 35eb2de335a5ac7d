package demo

import (
	"fmt"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/local/esm"
	"github.com/nudgehq/nudge/internal/status"
)

// stallAfter is how long a run may go without a move (a send accepted, the
// work queue's counts changing) while the queue holds messages that are not
// merely delayed, before the run says where it stands. Longer than the
// demo's longest backoff (backoffCap) and its provider timeout.
const stallAfter = 20 * time.Second

// stallWatch notices a run that has stopped moving with work in its queue,
// and says why: which instance holds which batch since when, which records
// an invocation left to their visibility timeout, or what the queue holds
// in flight that nothing explains.
type stallWatch struct {
	mapping    *esm.Mapping
	names      []string        // the mapping's invokers' names, by index
	visibility time.Duration   // the work queue's visibility timeout
	timeout    time.Duration   // the consumer's timeout
	warnings   func() []string // the mapping's log lines so far, by kind

	accepted int
	work     status.Depth
	moved    time.Time
	reported time.Time
	last     string // the latest report, for the summary
}

// mappingState is what the mapping holds and has left, read before the
// queue's counts so that a batch deleted in between is not taken for lost.
type mappingState struct {
	pollers  []esm.PollerState
	held     int
	returned []esm.ReturnedRecord
}

// capture reads the mapping's state.
func (w *stallWatch) capture() mappingState {
	return mappingState{pollers: w.mapping.Pollers(), held: w.mapping.Held(), returned: w.mapping.Returned()}
}

// observe takes a snapshot's counts at now, and the mapping's state read
// before them, and returns a report to print: when the run has not moved
// for stallAfter, and every stallAfter after, unless every record in
// flight is one an invocation left to its visibility and due back later
// (a killed batch in a chaos run): that wait is kept for the summary, not
// printed.
func (w *stallWatch) observe(now time.Time, snap snapshot, ms mappingState) string {
	if w.moved.IsZero() || snap.accepted != w.accepted || snap.work != w.work {
		w.accepted, w.work, w.moved = snap.accepted, snap.work, now
		return ""
	}
	if snap.work.Visible+snap.work.InFlight == 0 || now.Sub(w.moved) < stallAfter || now.Sub(w.reported) < stallAfter {
		return ""
	}
	w.reported = now
	var lines []string
	if w.warnings != nil {
		lines = w.warnings()
	}
	var expected bool
	w.last, expected = w.report(now, snap.work, ms.pollers, ms.held, ms.returned, lines)
	if expected {
		return ""
	}
	return w.last
}

// lastReport is the latest report, if the run stalled.
func (w *stallWatch) lastReport() string {
	if w == nil {
		return ""
	}
	return w.last
}

func (w *stallWatch) name(invoker int) string {
	if invoker >= 0 && invoker < len(w.names) {
		return w.names[invoker]
	}
	return fmt.Sprintf("invoker %d", invoker)
}

// report says where a stalled run stands: the queue's counts, each poller's
// phase, the records invocations left to their visibility timeout within
// the last one, the mapping's warnings, and the likely cause; expected is
// whether the run is only waiting for records an invocation left, all due
// back later.
func (w *stallWatch) report(now time.Time, work status.Depth, pollers []esm.PollerState, held int, returned []esm.ReturnedRecord,
	warnings []string) (text string, expected bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "stall: nothing sent and the work queue unchanged for %v: %d visible, %d in flight, %d delayed; the mapping holds %d.",
		now.Sub(w.moved).Round(time.Second), work.Visible, work.InFlight, work.Delayed, held)
	var stuck []string
	receiving := 0
	for _, p := range pollers {
		fmt.Fprintf(&b, " %s: %s since %s (%v)", w.name(p.Invoker), p.Phase, p.Since.Format("15:04:05.000"), now.Sub(p.Since).Round(time.Second))
		if len(p.Records) > 0 {
			fmt.Fprintf(&b, " with %d records (first %s)", len(p.Records), p.Records[0])
		} else if p.Received > 0 {
			fmt.Fprintf(&b, " with %d records received", p.Received)
		}
		b.WriteString(";")
		switch {
		case p.Phase == esm.Invoking && now.Sub(p.Since) > w.timeout:
			stuck = append(stuck, w.name(p.Invoker))
		case p.Phase == esm.Receiving:
			receiving++
		}
	}
	// The records invocations left to their visibility within the last
	// visibility timeout: in flight, held by no poller, explained.
	type group struct {
		invoker int
		why     esm.ReturnReason
	}
	var order []group
	byGroup := map[group][]esm.ReturnedRecord{}
	for _, r := range returned {
		if now.Sub(r.At) > w.visibility {
			continue // moved to the DLQ by maxReceiveCount, or lost
		}
		g := group{r.Invoker, r.Why}
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], r)
	}
	explained, dueLater := 0, true
	for _, g := range order {
		rs := byGroup[g]
		explained += len(rs)
		dueLater = dueLater && rs[0].At.Add(w.visibility).After(now)
		fmt.Fprintf(&b, " %s left %d records to their visibility, %s, from %s (first %s, back by %s);",
			w.name(g.invoker), len(rs), g.why, rs[0].At.Format("15:04:05.000"), rs[0].MessageID, rs[0].At.Add(w.visibility).Format("15:04:05"))
	}
	if len(warnings) > 0 {
		fmt.Fprintf(&b, " the mapping's warnings so far, by kind: %v.", warnings)
	}
	unexplained := work.InFlight - held - explained
	expected = len(stuck) == 0 && unexplained <= 0 && work.Visible == 0 && explained > 0 && dueLater
	switch {
	case len(stuck) > 0:
		fmt.Fprintf(&b, " Cause: %s has not answered an invocation within the function's timeout (%v).", strings.Join(stuck, ", "), w.timeout)
	case unexplained > 0:
		fmt.Fprintf(&b, " Cause: %d messages in flight that no instance holds and no invocation returned: a receive whose answer was lost; they return within the visibility timeout (%v) of that receive.",
			unexplained, w.visibility)
	case work.InFlight > held:
		fmt.Fprintf(&b, " Cause: the records in flight are the ones invocations left to their visibility, above.")
	case work.Visible > 0:
		fmt.Fprintf(&b, " Cause: %d messages visible that the %d instances receiving were not given.", work.Visible, receiving)
	}
	return b.String(), expected
}
