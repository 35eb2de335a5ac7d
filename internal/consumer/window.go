package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/localtime"
)

// windowShut checks claimed delivery d against its send window
// (d.Window, the ledger's copy) at now. Inside it, or with none, it
// answers false and the send goes on. Outside, it gives the claim back
// with the attempt unspent (ledger.AwaitWindow): the delivery is due when
// the window opens (or when it expires, if that is sooner: its claim then
// expires it, under its late policy), the calendar hands it off for then,
// and the record is acknowledged.
func (c *Consumer) windowShut(ctx context.Context, r *record, d ledger.Delivery, now time.Time) (Outcome, bool) {
	if d.Window == "" {
		return Outcome{}, false
	}
	if _, ok := awaitedSince(d); ok {
		// A claim after an attempt that may have gone out (a lapsed lease,
		// a wait for the provider's record): whether it sends at all is
		// that decision's, which a wait for the window would erase. Better
		// a send outside the window than one sent twice.
		return Outcome{}, false
	}
	w, err := localtime.ParseWindowSpec(d.Window)
	if err != nil {
		return c.deadLetter(ctx, r, &d, failure.ClassConfig, "its send window "+d.Window+" is unreadable here: "+err.Error()+
			"; deploy the consumer built with the intake that wrote it"), true
	}
	if w.Contains(now) {
		return Outcome{}, false
	}
	opens := w.Next(now)
	until := opens
	if opens.IsZero() || !until.Before(d.ExpiresAt) { // zero: no opening found within Next's bound
		until = d.ExpiresAt
	}
	_, err = c.cfg.Ledger.AwaitWindow(ctx, d, until)
	switch {
	case err == nil:
		c.cfg.Metrics.Add(MetricWindowDeferred, 1)
		r.log = r.log.With("window", d.Window, "opens", ledger.Format(opens))
		return Outcome{Transition: Deferred, Next: until.Sub(now).Round(time.Second), Via: "window"}, true
	case isSettled(err), errors.Is(err, ledger.ErrLeaseLost):
		return Outcome{Transition: Duplicate, Reason: err.Error()}, true
	}
	// The claim stands, unended: the record comes back after its lease, and
	// that claim knows this attempt may have gone out (it did not).
	return Outcome{Err: failure.Retryable(err, 0)}, true
}

// windowAfter is the first instant at or after t inside d's send window: t
// itself if d has none (or one this build cannot read; the next claim's
// check deals with that).
func windowAfter(d ledger.Delivery, t time.Time) time.Time {
	if d.Window == "" {
		return t
	}
	w, err := localtime.ParseWindowSpec(d.Window)
	if err != nil {
		return t
	}
	if next := w.Next(t); !next.IsZero() {
		return next
	}
	return t
}
