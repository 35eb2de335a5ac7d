package demo

import (
	"fmt"
	"strings"
	"time"

	"github.com/nudgehq/nudge/pkg/local/esm"
	"github.com/nudgehq/nudge/pkg/status"
)

// stallAfter is how long a run may go without a move (a send accepted, the
// work queue's counts changing) while the queue holds messages that are not
// merely delayed, before the run says where it stands. Longer than the
// demo's longest backoff (backoffCap) and its provider timeout.
const stallAfter = 20 * time.Second

// stallWatch notices a run that has stopped moving with work in its queue,
// and says why: which instance holds which batch since when, or what the
// queue holds in flight that no instance does.
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

// observe takes a snapshot's counts at now and returns a report to print:
// when the run has not moved for stallAfter, and every stallAfter after.
func (w *stallWatch) observe(now time.Time, snap snapshot) string {
	if w.moved.IsZero() || snap.accepted != w.accepted || snap.work != w.work {
		w.accepted, w.work, w.moved = snap.accepted, snap.work, now
		return ""
	}
	if snap.work.Visible+snap.work.InFlight == 0 || now.Sub(w.moved) < stallAfter || now.Sub(w.reported) < stallAfter {
		return ""
	}
	w.reported = now
	last, failed := w.mapping.LastFailure()
	w.last = w.report(now, snap.work, w.mapping.Pollers(), w.mapping.Held(), last, failed)
	return w.last
}

// lastReport is the latest report, if the run stalled.
func (w *stallWatch) lastReport() string {
	if w == nil {
		return ""
	}
	return w.last
}

// report says where a stalled run stands: the queue's counts, each poller's
// phase, the last failed batch, and the likely cause.
func (w *stallWatch) report(now time.Time, work status.Depth, pollers []esm.PollerState, held int, f esm.Failure, failed bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "stall: nothing sent and the work queue unchanged for %v: %d visible, %d in flight, %d delayed; the mapping holds %d.",
		now.Sub(w.moved).Round(time.Second), work.Visible, work.InFlight, work.Delayed, held)
	var stuck []string
	for _, p := range pollers {
		name := fmt.Sprintf("invoker %d", p.Invoker)
		if p.Invoker < len(w.names) {
			name = w.names[p.Invoker]
		}
		fmt.Fprintf(&b, " %s: %s since %s (%v)", name, p.Phase, p.Since.Format("15:04:05.000"), now.Sub(p.Since).Round(time.Second))
		if len(p.Records) > 0 {
			fmt.Fprintf(&b, " with %d records (first %s)", len(p.Records), p.Records[0])
		} else if p.Received > 0 {
			fmt.Fprintf(&b, " with %d records received", p.Received)
		}
		b.WriteString(";")
		if p.Phase == esm.Invoking && now.Sub(p.Since) > w.timeout {
			stuck = append(stuck, name)
		}
	}
	if failed {
		name := fmt.Sprintf("invoker %d", f.Invoker)
		if f.Invoker >= 0 && f.Invoker < len(w.names) {
			name = w.names[f.Invoker]
		}
		fmt.Fprintf(&b, " last failed batch: %s's at %s, %d records (first %s), back at %s: %v.",
			name, f.At.Format("15:04:05.000"), len(f.Records), f.Records[0], f.At.Add(w.visibility).Format("15:04:05"), f.Err)
	}
	if w.warnings != nil {
		if lines := w.warnings(); len(lines) > 0 {
			fmt.Fprintf(&b, " The mapping's warnings so far, by kind: %v.", lines)
		}
	}
	switch {
	case len(stuck) > 0:
		fmt.Fprintf(&b, " Cause: %s has not answered an invocation within the function's timeout (%v).", strings.Join(stuck, ", "), w.timeout)
	case work.InFlight > held && (!failed || now.Sub(f.At) > w.visibility):
		fmt.Fprintf(&b, " Cause: %d messages in flight that no instance holds and no failed batch explains: a receive whose answer was lost; they return within the visibility timeout (%v) of that receive.",
			work.InFlight-held, w.visibility)
	case work.InFlight > held:
		fmt.Fprintf(&b, " Cause: %d messages in flight that no instance holds, waiting out the visibility timeout (%v) of a failed batch or a retry's backoff.", work.InFlight-held, w.visibility)
	case work.Visible > 0:
		receiving := 0
		for _, p := range pollers {
			if p.Phase == esm.Receiving {
				receiving++
			}
		}
		fmt.Fprintf(&b, " Cause: %d messages visible that the %d instances receiving were not given.", work.Visible, receiving)
	}
	return b.String()
}
