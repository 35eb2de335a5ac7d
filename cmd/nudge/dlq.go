package main

// nudge dlq list|redrive: reviewing the DLQ, and redriving a reviewed,
// bounded batch of it.

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"

	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/failure"
)

func dlqCommand(s streams) *cobra.Command {
	return newGroup("dlq", "review the DLQ; redrive a bounded batch", dlqList(s), dlqRedrive(s))
}

// redriver is the DLQ's redriver on the connected resources, for by, at
// most rate messages a second (0: the default).
func (r *resources) redriver(by string, rate float64) (*redrive.Redriver, error) {
	return redrive.New(redrive.Config{Queue: r.sqs, DLQURL: r.dlqURL, TargetURL: r.workURL, Routes: r.routes, Ledger: r.ledger, By: by, Rate: rate})
}

func dlqList(s streams) *cobra.Command {
	c := newCommand("list", "review the DLQ; its messages stay",
		`Review the DLQ: per delivery, the error class and reason, attempts, age, ledger state, copies and
where a redrive would send it. Messages stay in the DLQ.`, s)
	o := addOperation(c)
	limit := c.flags().Int("limit", 50, "read at most `N` messages")
	c.run = func(ctx context.Context, _ []string) int {
		out := o.out
		if *limit < 1 {
			fmt.Fprintln(o.errs, "nudge dlq list: --limit must be 1 or more")
			return exitUsage
		}
		if err := o.connect(ctx, true); err != nil {
			return o.fail(err)
		}
		r, err := o.redriver("", 0)
		if err != nil {
			return o.fail(err)
		}
		letters, err := r.List(ctx, *limit)
		if err != nil {
			return o.fail(err)
		}
		if o.json {
			if letters == nil {
				letters = []redrive.Letter{}
			}
			o.printJSON(map[string]any{"dlq": queueName(o.dlqURL), "messages": letters})
			return exitOK
		}
		writeLetters(out, letters)
		messages := 0
		for _, l := range letters {
			messages += l.Copies
		}
		fmt.Fprintf(out, "%d messages read (at most --limit %d), for %d deliveries; they stay in the DLQ. Redrive with `nudge dlq redrive --max N`.\n", messages, *limit, len(letters))
		return exitOK
	}
	return c.cmd
}

func writeLetters(out io.Writer, letters []redrive.Letter) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DELIVERY\tCLASS\tREASON\tATTEMPTS\tAGE\tLEDGER\tCOPIES\tREDRIVE TO")
	for _, l := range letters {
		to := l.Destination
		if !l.Redrivable {
			to = "no: " + l.Why
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%v\t%s\t%d\t%s\n", dash(l.DeliveryKey), l.ErrorClass, text.Clip(l.Reason, 48), l.Attempts, l.Age(), dash(string(l.Ledger)), l.Copies, to)
	}
	tw.Flush()
}

func dlqRedrive(s streams) *cobra.Command {
	c := newCommand("redrive", "redrive a reviewed, bounded batch of the DLQ",
		`Show what would move, ask, then for each delivery: mark the ledger (dead → queued), send the
same body to the work queue, delete it (and any copy) from the DLQ, at most --rate per second.
An interruption may duplicate, never lose. --all --via-move-task: the console's mechanism, an SQS
message move task over the whole DLQ.`, s)
	fs := c.flags()
	o := addOperation(c)
	maxN := fs.Int("max", 0, "move at most `N` deliveries (required: a redrive is a bounded batch)")
	class := fs.String("reason-class", "", "only those dead-lettered with this error `CLASS` (rejected, exhausted, maxReceiveCount, …)")
	olderThan := fs.Duration("older-than", 0, "only those dead-lettered at least `DURATION` ago")
	settled := fs.Bool("include-settled", false, "also move messages whose delivery was already sent, cancelled or expired (the consumer retires them as duplicates)")
	dryRun := fs.Bool("dry-run", false, "show what would move, and move nothing")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	rate := fs.Float64("rate", 10, "move at most `R` messages a second")
	by := fs.String("by", operator(), "`WHO` redrives, recorded in the ledger and on the message [$NUDGE_OPERATOR, else user@host]")
	all := fs.Bool("all", false, "move the whole DLQ (with --via-move-task)")
	viaTask := fs.Bool("via-move-task", false, "use SQS's message move task, the console's mechanism (with --all)")
	c.run = func(ctx context.Context, _ []string) int {
		out, errs := o.out, o.errs
		switch {
		case *all != *viaTask:
			fmt.Fprintln(errs, "nudge dlq redrive: --all and --via-move-task go together (the console's mechanism); a reviewed redrive takes --max N")
			return exitUsage
		case *all && (*maxN != 0 || *class != "" || *olderThan != 0 || *dryRun):
			fmt.Fprintln(errs, "nudge dlq redrive: a move task moves the whole DLQ; --max, --reason-class, --older-than and --dry-run are for the reviewed redrive")
			return exitUsage
		case !*all && *maxN < 1:
			fmt.Fprintln(errs, "nudge dlq redrive: give --max N (a redrive moves a bounded, reviewed batch), or --all --via-move-task")
			return exitUsage
		case o.json && !*yes && !*dryRun:
			fmt.Fprintln(errs, "nudge dlq redrive: --json cannot ask for confirmation; add --yes or --dry-run")
			return exitUsage
		}
		if err := o.connect(ctx, true); err != nil {
			return o.fail(err)
		}
		if *all {
			return o.moveAll(ctx, int32(*rate), *yes)
		}
		r, err := o.redriver(*by, *rate)
		if err != nil {
			return o.fail(err)
		}
		sel, err := r.Select(ctx, redrive.Filter{Max: *maxN, Class: failure.Class(*class), OlderThan: *olderThan, IncludeSettled: *settled})
		if err != nil {
			return o.fail(err)
		}
		if *dryRun || len(sel.Chosen) == 0 {
			_ = r.Release(context.WithoutCancel(ctx), sel.Chosen)
			if o.json {
				o.printJSON(map[string]any{"dryRun": *dryRun, "scanned": sel.Scanned, "wouldMove": nonNil(sel.Chosen), "left": nonNil(sel.Passed)})
				return exitOK
			}
			o.review(sel)
			if len(sel.Chosen) == 0 {
				fmt.Fprintln(out, "Nothing to redrive.")
			} else {
				fmt.Fprintf(out, "Dry run: %d would move to %s; nothing was moved.\n", len(sel.Chosen), queueName(o.workURL))
			}
			return exitOK
		}
		if !*yes {
			o.review(sel)
			if !confirm(o.in, out, fmt.Sprintf("Redrive %s to %s at %v/s, recorded as by %s?", plural(len(sel.Chosen), "message"), queueName(o.workURL), *rate, *by)) {
				_ = r.Release(context.WithoutCancel(ctx), sel.Chosen)
				fmt.Fprintln(out, "Nothing was moved.")
				return exitRefused
			}
		}
		res, err := r.Move(ctx, sel, func(oc redrive.Outcome) {
			if o.json {
				return
			}
			switch {
			case oc.Moved:
				fmt.Fprintf(out, "moved   %s  (ledger marked: %v; new message %s)\n", dash(oc.DeliveryKey), oc.Marked, oc.NewMessageID)
			case oc.Problem != "":
				fmt.Fprintf(out, "FAILED  %s  %s\n", dash(oc.DeliveryKey), oc.Problem)
			default:
				fmt.Fprintf(out, "skipped %s  %s\n", dash(oc.DeliveryKey), oc.Why)
			}
		})
		if res.Outcomes == nil {
			res.Outcomes = []redrive.Outcome{}
		}
		return o.batchDone(res, fmt.Sprintf("%d moved, %d skipped, %d failed.", res.Moved, res.Skipped, res.Failed), err, res.Failed)
	}
	return c.cmd
}

func nonNil(ls []redrive.Letter) []redrive.Letter {
	if ls == nil {
		return []redrive.Letter{}
	}
	return ls
}

// review shows a selection before it moves.
func (o *operation) review(sel *redrive.Selection) {
	fmt.Fprintf(o.out, "Read %d messages from %s. Would move %d to %s:\n", sel.Scanned, queueName(o.dlqURL), len(sel.Chosen), queueName(o.workURL))
	writeLetters(o.out, sel.Chosen)
	if len(sel.Passed) > 0 {
		why := map[string]int{}
		for _, l := range sel.Passed {
			why[l.Why]++
		}
		reasons := make([]string, 0, len(why))
		for w := range why {
			reasons = append(reasons, w)
		}
		sort.Strings(reasons)
		fmt.Fprintf(o.out, "Left in the DLQ: %d\n", len(sel.Passed))
		for _, w := range reasons {
			fmt.Fprintf(o.out, "  %d  %s\n", why[w], w)
		}
	}
}

// moveAll runs the console's move task over the whole DLQ.
func (o *operation) moveAll(ctx context.Context, rate int32, yes bool) int {
	arn := func(url string) (string, error) {
		a, err := o.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return "", err
		}
		return a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
	}
	dlqARN, err := arn(o.dlqURL)
	if err != nil {
		return o.fail(err)
	}
	workARN, err := arn(o.workURL)
	if err != nil {
		return o.fail(err)
	}
	if !yes && !confirm(o.in, o.out, fmt.Sprintf("Move every message of %s to %s with an SQS move task (unreviewed; the ledger is not marked)?", queueName(o.dlqURL), queueName(o.workURL))) {
		fmt.Fprintln(o.out, "Nothing was moved.")
		return exitRefused
	}
	return o.runMoveTask(ctx, o.sqs, dlqARN, workARN, rate)
}

// runMoveTask is separate so that tests can give a fake move task API.
func (o *operation) runMoveTask(ctx context.Context, api redrive.MoveTaskAPI, dlqARN, workARN string, rate int32) int {
	st, err := redrive.MoveAll(ctx, redrive.MoveTask{API: api, DLQARN: dlqARN, TargetARN: workARN, Rate: rate, Poll: moveTaskPoll}, func(s redrive.TaskStatus) {
		if !o.json {
			fmt.Fprintf(o.out, "move task %s: %s, %d of %d moved\n", s.Handle, s.Status, s.Moved, s.ToMove)
		}
	})
	if o.json {
		o.printJSON(st)
	}
	if err != nil {
		return o.fail(err)
	}
	return exitOK
}

// moveTaskPoll is how often a move task's progress is read.
var moveTaskPoll = 5 * time.Second
