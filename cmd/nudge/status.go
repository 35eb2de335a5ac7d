package main

// nudge status: the deliveries by state, the overdue ones, the queues.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/status"
)

func statusCommand(s streams) *cobra.Command {
	c := newCommand("status", "deliveries by state, overdue, queue depths",
		`The live deliveries and the overdue ones with the oldest (from the due index), the work queue's
and the DLQ's depths, the age of the DLQ's oldest message (from a sample that stays visible).
--scan counts every delivery by state and --expired lists the recent expired ones: both read
the whole table, priced like a scan.`, s)
	fs := c.flags()
	o := addOperation(c)
	overdueAfter := fs.Duration("overdue-after", c.envDuration("overdue-after", "NUDGE_OVERDUE_AFTER", 5*time.Minute), "how far past due (`DURATION`) a live delivery counts as overdue, as the enqueue counts it [$NUDGE_OVERDUE_AFTER]")
	scan := fs.Bool("scan", false, "also count every delivery by state (reads the whole table)")
	expired := fs.Duration("expired", 0, "also list the deliveries that expired unsent in the last `DURATION`, such as 24h (reads the whole table)")
	c.run = func(ctx context.Context, _ []string) int {
		out := o.out
		if err := o.connect(ctx, true); err != nil {
			return o.fail(err)
		}
		rep, err := status.Read(ctx, status.Config{Ledger: o.ledger, Table: o.table, Queue: o.sqs, WorkURL: o.workURL, ProviderURLs: o.routes.URLs()[1:],
			DLQURL: o.dlqURL, OverdueAfter: *overdueAfter, Scan: *scan, ExpiredSince: *expired})
		if err != nil {
			return o.fail(err)
		}
		if o.json {
			o.printJSON(rep)
			return exitOK
		}
		fmt.Fprintf(out, "ledger %s: %d live deliveries (exact, from the due index)\n", rep.Table, rep.Live)
		fmt.Fprintf(out, "overdue (live, more than %v past due): %d", *overdueAfter, rep.OverduePending)
		if rep.OverduePending > 0 {
			fmt.Fprintf(out, "; the oldest is %s, %v past due", rep.OldestOverdueKey, time.Duration(rep.OldestOverdueSeconds)*time.Second)
		}
		fmt.Fprintln(out, " (exact)")
		if *scan {
			fmt.Fprintf(out, "all %d deliveries by state (exact, from a scan of the table):\n", rep.Deliveries)
			for _, s := range []ledger.Status{ledger.StatusHeld,
				ledger.StatusPending, ledger.StatusQueued, ledger.StatusSending, ledger.StatusRetrying, ledger.StatusSent, ledger.StatusDead, ledger.StatusExpired, ledger.StatusCancelled} {
				fmt.Fprintf(out, "  %-10s %d\n", s, rep.ByStatus[s])
			}
		}
		if *expired > 0 {
			fmt.Fprintf(out, "expired unsent in the last %v: %d (exact, from a scan of the table)\n", *expired, len(rep.Expired))
			for _, e := range rep.Expired {
				fmt.Fprintf(out, "  %s  due %s, expired %s, marked %s — see `nudge reminder show %s`\n", e.Key, ledger.Format(e.DueAt), ledger.Format(e.ExpiresAt), ledger.Format(e.At), strings.SplitN(e.Key, ":", 2)[0])
			}
		}
		what := "work queue"
		if len(rep.WorkQueues) > 1 {
			what = fmt.Sprintf("work queues (%d)", len(rep.WorkQueues))
		}
		fmt.Fprintf(out, "%s: %d visible, %d in flight, %d delayed (approximate, SQS's counts)\n", what,
			rep.WorkQueue.Visible, rep.WorkQueue.InFlight, rep.WorkQueue.Delayed)
		for _, name := range slices.Sorted(maps.Keys(rep.WorkQueues)) {
			d := rep.WorkQueues[name]
			fmt.Fprintf(out, "  %s: %d visible, %d in flight, %d delayed\n", name, d.Visible, d.InFlight, d.Delayed)
		}
		fmt.Fprintf(out, "DLQ: %d messages (approximate)", rep.DLQ.Visible+rep.DLQ.InFlight)
		switch {
		case rep.DLQSampled > 0:
			fmt.Fprintf(out, "; the oldest dead-lettered %v ago (%s) — review with `nudge dlq list`", time.Duration(rep.DLQOldestAgeSeconds)*time.Second, rep.Sources["dlqOldestAge"])
		case rep.DLQ.Visible+rep.DLQ.InFlight > 0:
			fmt.Fprintf(out, "; the oldest's age is %s", rep.Sources["dlqOldestAge"])
		}
		fmt.Fprintln(out)
		fmt.Fprintf(out, "time zones: IANA database %s, embedded in the binaries\n", rep.TimeZones)
		return exitOK
	}
	return c.cmd
}
