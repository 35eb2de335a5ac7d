package main

// nudge ledger retain|revive: the retention backfill, and dead deliveries
// back to the calendar from the ledger alone, for those whose DLQ copy aged
// out.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/failure"
)

func ledgerCommand(s streams) *cobra.Command {
	return newGroup("ledger", "the retention backfill; dead deliveries back to the calendar", ledgerRetain(s), ledgerRevive(s))
}

func ledgerRetain(s streams) *cobra.Command {
	c := newCommand("retain", "give items written before 2026-11-30 their reminder's TTL",
		`Once, for a table written before 2026-11-30: give every reminder and delivery item the TTL of its
reminder (expiresAt + 90 days) where it has none or an earlier one. Never shortens a TTL; safe to
run again.`, s)
	o := addOperation(c)
	dryRun := c.flags().Bool("dry-run", false, "count the items to change; change nothing")
	c.run = func(ctx context.Context, _ []string) int {
		if err := o.connect(ctx, false); err != nil {
			return o.fail(err)
		}
		r, err := o.ledger.Retain(ctx, *dryRun)
		if err != nil {
			return o.fail(err)
		}
		if o.json {
			o.printJSON(map[string]any{"table": o.table, "dryRun": *dryRun, "items": r.Items, "extended": r.Extended})
			return exitOK
		}
		verb := "given"
		if *dryRun {
			verb = "would be given"
		}
		fmt.Fprintf(o.out, "%d reminder and delivery items read; %d %s their reminder's TTL (expiresAt + 90 days).\n", r.Items, r.Extended, verb)
		return exitOK
	}
	return c.cmd
}

const reviveAbout = `Find dead deliveries in the ledger (a bounded read: --read items, on from --after), show which
would go back to the calendar and why the others stay dead (expired, filtered, beyond --max),
ask, then revive each: dead → pending, back in the due index ahead of the enqueue, its attempt
budget restarted, who (--by) and why (--reason) in its history. Each write holds only if the
delivery is still dead as read. For deliveries whose DLQ copy aged out (the DLQ keeps 14 days);
with a copy still there it is sent once all the same.`

// reviver is the ledger's reviver on the connected resources, for by, with
// the reason.
func (r *resources) reviver(by, reason string) (*redrive.Reviver, error) {
	return redrive.NewReviver(redrive.ReviveConfig{Ledger: r.ledger, By: by, Reason: reason})
}

func ledgerRevive(s streams) *cobra.Command {
	c := newCommand("revive", "dead deliveries back to the calendar (reviewed, bounded)", reviveAbout, s)
	fs := c.flags()
	o := addOperation(c)
	maxN := fs.Int("max", 0, "revive at most `N` deliveries (required: a revive is a bounded batch)")
	reason := fs.String("reason", "", "why (`TEXT`, required), kept in each delivery's history with who: no names or addresses")
	class := fs.String("reason-class", "", "only those dead-lettered with this error `CLASS` (rejected, exhausted, config, ambiguous, …)")
	olderThan := fs.Duration("older-than", 0, "only those dead-lettered at least `DURATION` ago (336h: the DLQ's 14 days)")
	read := fs.Int("read", redrive.DefaultReviveRead, "read at most `N` ledger items to find them (a strongly consistent scan)")
	after := fs.String("after", "", "read on from where an earlier run's read stopped (the `TOKEN` it printed)")
	dryRun := fs.Bool("dry-run", false, "show what would be revived, and revive nothing")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	by := fs.String("by", operator(), "`WHO` revives, recorded in each delivery's history [$NUDGE_OPERATOR, else user@host]")
	c.run = func(ctx context.Context, args []string) int {
		out := o.out
		usage := func(msg string) int {
			fmt.Fprintf(o.errs, "nudge ledger revive: %s\n", msg)
			return exitUsage
		}
		switch {
		case len(args) > 0:
			return usage(fmt.Sprintf("it takes no arguments (%q): filter with --reason-class and --older-than", args[0]))
		case *maxN < 1:
			return usage("give --max N (a revive is a bounded, reviewed batch)")
		case strings.TrimSpace(*reason) == "":
			return usage("give --reason TEXT: why, kept in each revived delivery's history with who (--by)")
		case *read < 1 || *read > ledger.MaxDeadRead:
			return usage(fmt.Sprintf("--read %d: read 1 to %d items", *read, ledger.MaxDeadRead))
		case o.json && !*yes && !*dryRun:
			return usage("--json cannot ask for confirmation; add --yes or --dry-run")
		}
		if _, err := (ledger.Revival{By: *by, Reason: *reason}).Note(); err != nil {
			return usage(strings.TrimPrefix(err.Error(), "ledger: "))
		}
		if err := o.connect(ctx, false); err != nil {
			return o.fail(err)
		}
		r, err := o.reviver(*by, *reason)
		if err != nil {
			return o.fail(err)
		}
		p, err := r.Plan(ctx, redrive.ReviveFilter{Max: *maxN, Class: failure.Class(*class), OlderThan: *olderThan, Read: *read, After: *after})
		if err != nil {
			return o.fail(err)
		}
		if *dryRun || len(p.Chosen) == 0 {
			if o.json {
				o.printJSON(map[string]any{"dryRun": *dryRun, "scanned": p.Scanned, "wouldRevive": nonNilDead(p.Chosen), "left": nonNilDead(p.Left),
					"full": p.Full, "next": p.Next})
				return exitOK
			}
			o.revivePlan(p, *maxN, *read)
			if len(p.Chosen) == 0 {
				fmt.Fprintln(out, "Nothing to revive.")
			} else {
				fmt.Fprintf(out, "Dry run: %s would be revived; nothing was changed.\n", deliveries(len(p.Chosen)))
			}
			return exitOK
		}
		if !*yes {
			o.revivePlan(p, *maxN, *read)
			if !confirm(o.in, out, fmt.Sprintf("Revive %s, recorded as by %s: %q?", deliveries(len(p.Chosen)), *by, strings.TrimSpace(*reason))) {
				fmt.Fprintln(out, "Nothing was revived.")
				return exitRefused
			}
		}
		res, err := r.Apply(ctx, p, func(oc redrive.ReviveOutcome) {
			if o.json {
				return
			}
			switch {
			case oc.Revived:
				fmt.Fprintf(out, "revived %s  (pending; the enqueue hands it off from %s)\n", oc.DeliveryKey, ledger.Format(oc.PublishAt))
			case oc.Problem != "":
				fmt.Fprintf(out, "FAILED  %s  %s\n", oc.DeliveryKey, oc.Problem)
			default:
				fmt.Fprintf(out, "skipped %s  %s\n", oc.DeliveryKey, oc.Why)
			}
		})
		if res.Outcomes == nil {
			res.Outcomes = []redrive.ReviveOutcome{}
		}
		doc := map[string]any{"scanned": p.Scanned, "outcomes": res.Outcomes, "revived": res.Revived, "skipped": res.Skipped, "failed": res.Failed,
			"left": nonNilDead(p.Left), "full": p.Full, "next": p.Next}
		return o.batchDone(doc, fmt.Sprintf("%d revived, %d skipped, %d failed.", res.Revived, res.Skipped, res.Failed), err, res.Failed)
	}
	return c.cmd
}

// deliveries says "1 delivery" or "3 deliveries".
func deliveries(n int) string {
	if n == 1 {
		return "1 delivery"
	}
	return fmt.Sprintf("%d deliveries", n)
}

// days says a whole number of days: "14 days".
func days(d time.Duration) string { return fmt.Sprintf("%d days", int(d.Hours()/24)) }

func nonNilDead(ds []redrive.Dead) []redrive.Dead {
	if ds == nil {
		return []redrive.Dead{}
	}
	return ds
}

// revivePlan shows a revive before it is applied.
func (o *operation) revivePlan(p *redrive.RevivePlan, maxN, read int) {
	out := o.out
	fmt.Fprintf(out, "Read %d items of %s: %d dead. Would revive %d (dead → pending, back in the calendar):\n",
		p.Scanned, o.table, len(p.Chosen)+len(p.Left), len(p.Chosen))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DELIVERY\tCLASS\tREASON\tATTEMPTS\tDEAD FOR\tDUE\tEXPIRES\tDLQ COPY")
	ambiguous, copies := 0, 0
	for _, d := range p.Chosen {
		dlq := "aged out"
		if d.DLQCopyMayRemain {
			dlq, copies = "may remain", copies+1
		}
		if d.ErrorClass == failure.ClassAmbiguous {
			ambiguous++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%v\t%s\t%s\t%s\n", d.DeliveryKey, dash(string(d.ErrorClass)), dash(text.Clip(d.Reason, 48)), d.Attempts, d.Age(),
			ledger.Format(d.DueAt), ledger.Format(d.ExpiresAt), dlq)
	}
	tw.Flush()
	if len(p.Left) > 0 {
		why := map[string]int{}
		for _, d := range p.Left {
			w := d.Why
			if strings.HasPrefix(w, "expired ") {
				w = "expired: past its expiresAt a delivery is never revived (schedule a new reminder if it still matters)"
			}
			why[w]++
		}
		reasons := make([]string, 0, len(why))
		for w := range why {
			reasons = append(reasons, w)
		}
		sort.Strings(reasons)
		fmt.Fprintf(out, "Left dead: %d\n", len(p.Left))
		for _, w := range reasons {
			fmt.Fprintf(out, "  %d  %s\n", why[w], w)
		}
	}
	if ambiguous > 0 {
		fmt.Fprintf(out, "%s of class ambiguous may have been sent already: check the provider's record first "+
			"(docs/operations.md, Reading the DLQ).\n", deliveries(ambiguous))
	}
	if copies > 0 {
		fmt.Fprintf(out, "%s dead-lettered less than %v ago may still have a copy in the DLQ (`nudge dlq redrive` is the usual way "+
			"for those); revived, it is sent once: a copy redriven later is a duplicate.\n",
			deliveries(copies), days(deployment.DLQRetention))
	}
	switch {
	case p.Full:
		fmt.Fprintf(out, "Reached --max %d: run it again for more.\n", maxN)
	case p.Next != "":
		fmt.Fprintf(out, "The read stopped at --read %d items before the table's end; read on with --after %s\n", read, p.Next)
	}
}
