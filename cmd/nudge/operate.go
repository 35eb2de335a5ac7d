package main

// nudge status, reminder show|purge, dlq list|redrive: operating Nudge.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/pkg/awsclient"
	"github.com/nudgehq/nudge/pkg/deployment"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/redrive"
	"github.com/nudgehq/nudge/pkg/schedule"
	"github.com/nudgehq/nudge/pkg/status"
	"github.com/nudgehq/nudge/pkg/text"
)

// Exit codes of the operator commands.
const (
	exitOK       = 0
	exitFailed   = 1 // something went wrong; the message says what
	exitUsage    = 2 // bad flags or arguments
	exitNotFound = 3 // no such reminder, table or queue
	exitRefused  = 4 // refused or declined: nothing was changed
	exitAccess   = 5 // AWS refused the credentials or the permission, or could not be reached
)

// ops is what an operator command works on.
type ops struct {
	stage, table, workURL, dlqURL *string
	// env are the NUDGE_* variables naming the same resources, used when
	// none of the flags is given.
	env       struct{ stage, table, workURL, dlqURL string }
	json      *bool
	out, errs io.Writer
	in        io.Reader

	db     *dynamodb.Client
	sqs    *sqs.Client
	ledger *ledger.Ledger
}

func addOpsFlags(c *command, out, errs io.Writer, in io.Reader) *ops {
	fs := c.fs
	o := &ops{
		stage:   fs.String("stage", "", "the deployed stage, naming the resources nudge-`NAME`-ledger, -work and -dlq [$NUDGE_STAGE]"),
		table:   fs.String("table", "", "the ledger `TABLE`, instead of the stage's [$NUDGE_TABLE]"),
		workURL: fs.String("queue-url", "", "the work queue's `URL`, instead of the stage's [$NUDGE_QUEUE_URL]"),
		dlqURL:  fs.String("dlq-url", "", "the DLQ's `URL`, instead of the stage's [$NUDGE_DLQ_URL]"),
		json:    fs.Bool("json", false, "print JSON instead of tables"),
		out:     out, errs: errs, in: in,
	}
	o.env.stage = c.envString(resources, "NUDGE_STAGE", validStage)
	o.env.table = os.Getenv("NUDGE_TABLE")
	o.env.workURL = c.envString(resources, "NUDGE_QUEUE_URL", validURL)
	o.env.dlqURL = c.envString(resources, "NUDGE_DLQ_URL", validURL)
	return o
}

// resolve settles the resources from the flags or, if no flag names one,
// from the NUDGE_* variables: never a mix, which could name two stages
// (--stage dev with a NUDGE_DLQ_URL left from prod).
func (o *ops) resolve() error {
	envStage, envTable := "", ""
	useEnv := *o.stage == "" && *o.table == "" && *o.workURL == "" && *o.dlqURL == ""
	if useEnv {
		envStage, envTable = o.env.stage, o.env.table
		*o.workURL, *o.dlqURL = o.env.workURL, o.env.dlqURL
	}
	table, err := tableOf(*o.stage, *o.table, envStage, envTable)
	switch {
	case err != nil && !useEnv && *o.stage == "" && *o.table == "":
		return usageError("no ledger table: a queue URL flag was given, so the NUDGE_* variables are not used (flags and variables could name two stages): pass --stage NAME or --table NAME too")
	case err != nil && useEnv && envStage == "" && envTable == "":
		return usageError("no ledger table: pass --stage NAME (for the resources nudge-NAME-…) or --table NAME, or set NUDGE_STAGE or NUDGE_TABLE")
	case err != nil:
		return err
	}
	if useEnv {
		*o.stage = envStage
	}
	*o.table = table
	return nil
}

// connect resolves the resources and creates the clients.
func (o *ops) connect(ctx context.Context, needQueues bool) error {
	if err := o.resolve(); err != nil {
		return err
	}
	cfg, err := awsclient.Load(ctx)
	if err != nil {
		return err
	}
	o.db, o.sqs = awsclient.DynamoDB(cfg), awsclient.SQS(cfg)
	if *o.stage != "" {
		st := deployment.Stage{Name: *o.stage}
		if *o.table == "" {
			*o.table = st.TableName()
		}
		for _, q := range []struct {
			url  *string
			name string
		}{{o.workURL, st.WorkQueueName()}, {o.dlqURL, st.DLQName()}} {
			if *q.url != "" || !needQueues {
				continue
			}
			out, err := o.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q.name)})
			if err != nil {
				return fmt.Errorf("find the queue %s: %w", q.name, err)
			}
			*q.url = aws.ToString(out.QueueUrl)
		}
	}
	if needQueues && (*o.workURL == "" || *o.dlqURL == "") {
		return usageError("no queues: pass --stage NAME, or --queue-url and --dlq-url (the stack's outputs WorkQueueUrl and DeadLetterQueueUrl)")
	}
	// An operator's clock may be a minute off: leases (purge) are judged
	// with that margin. (A redrive puts a delivery back at its dueAt, behind
	// every cursor, so its publish time needs none.) The shard count is the
	// stack's, as the enqueue recorded it in the table.
	o.ledger, err = ledger.New(o.db, ledger.Config{Table: *o.table, ShardsFromRegistry: true, ClockSkew: ledger.OperatorClockSkew})
	return err
}

// usageError is a mistake in how the command was called.
type usageError string

func (e usageError) Error() string { return string(e) }

// fail prints err, explained, and returns the exit code for it.
func (o *ops) fail(cmd string, err error) int {
	msg, code := explain(err, *o.table, *o.workURL, *o.dlqURL)
	fmt.Fprintf(o.errs, "nudge %s: %s\n", cmd, msg)
	return code
}

// printJSON writes v as indented JSON.
func (o *ops) printJSON(v any) {
	enc := json.NewEncoder(o.out)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func opsContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// ---- nudge reminder show|purge ----

func reminderCmd(args []string, in io.Reader, out, errs io.Writer) int {
	if len(args) == 0 {
		group(errs, "nudge reminder")
		return exitUsage
	}
	if isHelp(args[0]) {
		group(out, "nudge reminder")
		return exitOK
	}
	switch args[0] {
	case "show":
		return reminderShow(args[1:], out, errs)
	case "purge":
		return reminderPurge(args[1:], in, out, errs)
	}
	fmt.Fprintf(errs, "nudge reminder: unknown command %q; want show or purge\n\n", args[0])
	group(errs, "nudge reminder")
	return exitUsage
}

func reminderShow(args []string, out, errs io.Writer) int {
	c := newCommand("nudge reminder show", "ID", "The reminder, each delivery's state, attempts, last error and receipt, whether it was handed\noff, and the transition history in time order.", out, errs)
	fs := c.fs
	o := addOpsFlags(c, out, errs, nil)
	reveal := fs.Bool("reveal", false, "show recipients' addresses whole (personal data: they are masked otherwise)")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(errs, "nudge reminder show: give one reminder id")
		return exitUsage
	}
	ctx, stop := opsContext()
	defer stop()
	if err := o.connect(ctx, false); err != nil {
		return o.fail("reminder show", err)
	}
	store, err := schedule.New(schedule.Config{Ledger: o.ledger})
	if err != nil {
		return o.fail("reminder show", err)
	}
	v, err := store.Show(ctx, fs.Arg(0))
	if err != nil {
		return o.fail("reminder show", err)
	}
	doc, err := store.Document(ctx, v, *reveal)
	if err != nil {
		return o.fail("reminder show", err)
	}
	if *o.json {
		o.printJSON(doc)
		return exitOK
	}
	if r := v.Reminder; r != nil {
		fmt.Fprintf(out, "reminder %s  account %s  due %s  expires %s", r.ID, r.AccountRef, ledger.Format(r.DueAt), ledger.Format(r.ExpiresAt))
		keys := make([]string, 0, len(r.Metadata))
		for k := range r.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(out, "  %s=%s", k, r.Metadata[k])
		}
		fmt.Fprintln(out)
	} else {
		fmt.Fprintf(out, "reminder %s  (no reminder item: its deliveries were written directly)\n", fs.Arg(0))
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nDELIVERY\tSTATUS\tHANDED OFF\tATTEMPTS\tDUE\tLAST ERROR\tRECEIPT\tNEXT ATTEMPT")
	for _, d := range doc.Deliveries {
		lastErr := string(d.LastErrorClass)
		if d.LastError != "" {
			lastErr += ": " + d.LastError
		}
		handed := "-"
		switch {
		case d.HandedOff == nil:
		case *d.HandedOff:
			handed = "yes"
		default:
			handed = "no, from " + d.PublishAt
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.Key, d.Status, handed, d.Attempts, d.DueAt, dash(lastErr), dash(d.Receipt), dash(d.NextAttemptAt))
	}
	tw.Flush()
	addresses := false
	for _, d := range doc.Deliveries {
		if d.Address != "" {
			if !addresses {
				note := "masked; --reveal shows them"
				if *reveal {
					note = "revealed: personal data"
				}
				fmt.Fprintf(out, "\nADDRESSES (%s)\n", note)
				addresses = true
			}
			fmt.Fprintf(out, "  %s  %s\n", d.Key, d.Address)
		}
	}
	fmt.Fprintln(out, "\nHISTORY (the last entries of each delivery; the logs hold every transition)")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, e := range doc.History {
		detail := e.Note
		if e.Class != "" {
			detail = string(e.Class) + ": " + detail
		}
		attempt := ""
		if e.Attempt > 0 {
			attempt = fmt.Sprintf("attempt %d", e.Attempt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.At, e.Delivery, e.Status, attempt, detail)
	}
	tw.Flush()
	return exitOK
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func reminderPurge(args []string, in io.Reader, out, errs io.Writer) int {
	c := newCommand("nudge reminder purge", "ID", "Delete the reminder, its deliveries and their history (a deletion request). Refused, removing\nnothing, while a delivery is being sent.", out, errs)
	fs := c.fs
	o := addOpsFlags(c, out, errs, in)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(errs, "nudge reminder purge: give one reminder id")
		return exitUsage
	}
	id := fs.Arg(0)
	ctx, stop := opsContext()
	defer stop()
	if err := o.connect(ctx, false); err != nil {
		return o.fail("reminder purge", err)
	}
	if !*yes {
		if *o.json {
			fmt.Fprintln(errs, "nudge reminder purge: --json cannot ask for confirmation; add --yes")
			return exitUsage
		}
		stored, err := o.ledger.ReadReminder(ctx, id)
		if err != nil {
			return o.fail("reminder purge", err)
		}
		if stored.Empty() {
			return o.fail("reminder purge", fmt.Errorf("%q: %w", id, schedule.ErrNoReminder))
		}
		fmt.Fprintf(out, "This deletes reminder %s for good: %d item(s) and %d deliveries with their history:\n", id, stored.OtherItems(), len(stored.Deliveries))
		for _, d := range stored.Deliveries {
			fmt.Fprintf(out, "  %s  %s\n", d.Key(), d.Status)
		}
		if !confirm(in, out, "Purge it?") {
			fmt.Fprintln(out, "Nothing was deleted.")
			return exitRefused
		}
	}
	p, err := o.ledger.Purge(ctx, id)
	if err != nil {
		return o.fail("reminder purge", err)
	}
	if *o.json {
		keys := []string{}
		for _, d := range p.Deliveries {
			keys = append(keys, d.Key().String())
		}
		o.printJSON(map[string]any{"reminderId": id, "removedDeliveries": keys, "removedOtherItems": len(p.OtherItems)})
		return exitOK
	}
	fmt.Fprintf(out, "purged %s: removed %d deliveries with their history", id, len(p.Deliveries))
	if len(p.OtherItems) > 0 {
		fmt.Fprintf(out, " and the reminder item")
	}
	fmt.Fprintln(out, ".")
	for _, d := range p.Deliveries {
		fmt.Fprintf(out, "  %s (was %s)\n", d.Key(), d.Status)
	}
	fmt.Fprintln(out, "The functions' logs keep ids and outcomes (never names or addresses) until their retention ends; a message still on the queue is dead-lettered as not-found.")
	return exitOK
}

// confirm asks a yes/no question on out and reads the answer from in.
func confirm(in io.Reader, out io.Writer, question string) bool {
	fmt.Fprintf(out, "%s [y/N] ", question)
	line, _ := bufio.NewReader(in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// ---- nudge status ----

func statusCmd(args []string, out, errs io.Writer) int {
	c := newCommand("nudge status", "", "The live deliveries and the overdue ones with the oldest (from the due index), the work queue's\nand the DLQ's depths, the age of the DLQ's oldest message (from a sample that stays visible).\n--scan counts every delivery by state and --expired lists the recent expired ones: both read\nthe whole table, priced like a scan.", out, errs)
	fs := c.fs
	o := addOpsFlags(c, out, errs, nil)
	overdueAfter := fs.Duration("overdue-after", c.envDuration("overdue-after", "NUDGE_OVERDUE_AFTER", 5*time.Minute), "how far past due (`DURATION`) a live delivery counts as overdue, as the enqueue counts it [$NUDGE_OVERDUE_AFTER]")
	scan := fs.Bool("scan", false, "also count every delivery by state (reads the whole table)")
	expired := fs.Duration("expired", 0, "also list the deliveries that expired unsent in the last `DURATION`, such as 24h (reads the whole table)")
	if code, ok := c.parse(args); !ok {
		return code
	}
	ctx, stop := opsContext()
	defer stop()
	if err := o.connect(ctx, true); err != nil {
		return o.fail("status", err)
	}
	rep, err := status.Read(ctx, status.Config{Ledger: o.ledger, Table: *o.table, Queue: o.sqs, WorkURL: *o.workURL, DLQURL: *o.dlqURL,
		OverdueAfter: *overdueAfter, Scan: *scan, ExpiredSince: *expired})
	if err != nil {
		return o.fail("status", err)
	}
	if *o.json {
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
		for _, s := range []ledger.Status{ledger.StatusPending, ledger.StatusQueued, ledger.StatusSending, ledger.StatusRetrying, ledger.StatusSent, ledger.StatusDead, ledger.StatusExpired, ledger.StatusCancelled} {
			fmt.Fprintf(out, "  %-10s %d\n", s, rep.ByStatus[s])
		}
	}
	if *expired > 0 {
		fmt.Fprintf(out, "expired unsent in the last %v: %d (exact, from a scan of the table)\n", *expired, len(rep.Expired))
		for _, e := range rep.Expired {
			fmt.Fprintf(out, "  %s  due %s, expired %s, marked %s — see `nudge reminder show %s`\n", e.Key, ledger.Format(e.DueAt), ledger.Format(e.ExpiresAt), ledger.Format(e.At), strings.SplitN(e.Key, ":", 2)[0])
		}
	}
	fmt.Fprintf(out, "work queue: %d visible, %d in flight, %d delayed (approximate, SQS's counts)\n", rep.WorkQueue.Visible, rep.WorkQueue.InFlight, rep.WorkQueue.Delayed)
	fmt.Fprintf(out, "DLQ: %d messages (approximate)", rep.DLQ.Visible+rep.DLQ.InFlight)
	switch {
	case rep.DLQSampled > 0:
		fmt.Fprintf(out, "; the oldest dead-lettered %v ago (%s) — review with `nudge dlq list`", time.Duration(rep.DLQOldestAgeSeconds)*time.Second, rep.Sources["dlqOldestAge"])
	case rep.DLQ.Visible+rep.DLQ.InFlight > 0:
		fmt.Fprintf(out, "; the oldest's age is %s", rep.Sources["dlqOldestAge"])
	}
	fmt.Fprintln(out)
	return exitOK
}

// ---- nudge dlq list|redrive ----

func dlqCmd(args []string, in io.Reader, out, errs io.Writer) int {
	if len(args) == 0 {
		group(errs, "nudge dlq")
		return exitUsage
	}
	if isHelp(args[0]) {
		group(out, "nudge dlq")
		return exitOK
	}
	switch args[0] {
	case "list":
		return dlqList(args[1:], out, errs)
	case "redrive":
		return dlqRedrive(args[1:], in, out, errs)
	}
	fmt.Fprintf(errs, "nudge dlq: unknown command %q; want list or redrive\n\n", args[0])
	group(errs, "nudge dlq")
	return exitUsage
}

func (o *ops) redriver(by string, rate float64) (*redrive.Redriver, error) {
	return redrive.New(redrive.Config{Queue: o.sqs, DLQURL: *o.dlqURL, TargetURL: *o.workURL, Ledger: o.ledger, By: by, Rate: rate})
}

func dlqList(args []string, out, errs io.Writer) int {
	c := newCommand("nudge dlq list", "", "Review the DLQ: per delivery, the error class and reason, attempts, age, ledger state, copies and\nwhere a redrive would send it. Messages stay in the DLQ.", out, errs)
	fs := c.fs
	o := addOpsFlags(c, out, errs, nil)
	limit := fs.Int("limit", 50, "read at most `N` messages")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if *limit < 1 {
		fmt.Fprintln(errs, "nudge dlq list: --limit must be 1 or more")
		return exitUsage
	}
	ctx, stop := opsContext()
	defer stop()
	if err := o.connect(ctx, true); err != nil {
		return o.fail("dlq list", err)
	}
	r, err := o.redriver("", 0)
	if err != nil {
		return o.fail("dlq list", err)
	}
	letters, err := r.List(ctx, *limit)
	if err != nil {
		return o.fail("dlq list", err)
	}
	if *o.json {
		if letters == nil {
			letters = []redrive.Letter{}
		}
		o.printJSON(map[string]any{"dlq": queueName(*o.dlqURL), "messages": letters})
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

func queueName(url string) string {
	return url[strings.LastIndexByte(url, '/')+1:]
}

// operator names who runs the command, for the ledger and the message.
func operator() string {
	if v := os.Getenv("NUDGE_OPERATOR"); v != "" {
		return v
	}
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		name += "@" + h
	}
	return name
}

func dlqRedrive(args []string, in io.Reader, out, errs io.Writer) int {
	c := newCommand("nudge dlq redrive", "", "Show what would move, ask, then for each delivery: mark the ledger (dead → queued), send the\nsame body to the work queue, delete it (and any copy) from the DLQ, at most --rate per second.\nAn interruption may duplicate, never lose. --all --via-move-task: the console's mechanism, an SQS\nmessage move task over the whole DLQ.", out, errs)
	fs := c.fs
	o := addOpsFlags(c, out, errs, in)
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
	if code, ok := c.parse(args); !ok {
		return code
	}
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
	case *o.json && !*yes && !*dryRun:
		fmt.Fprintln(errs, "nudge dlq redrive: --json cannot ask for confirmation; add --yes or --dry-run")
		return exitUsage
	}
	ctx, stop := opsContext()
	defer stop()
	if err := o.connect(ctx, true); err != nil {
		return o.fail("dlq redrive", err)
	}
	if *all {
		return o.moveAll(ctx, int32(*rate), *yes)
	}
	r, err := o.redriver(*by, *rate)
	if err != nil {
		return o.fail("dlq redrive", err)
	}
	sel, err := r.Select(ctx, redrive.Filter{Max: *maxN, Class: failure.Class(*class), OlderThan: *olderThan, IncludeSettled: *settled})
	if err != nil {
		return o.fail("dlq redrive", err)
	}
	if *dryRun || len(sel.Chosen) == 0 {
		_ = r.Release(context.WithoutCancel(ctx), sel.Chosen)
		if *o.json {
			o.printJSON(map[string]any{"dryRun": *dryRun, "scanned": sel.Scanned, "wouldMove": nonNil(sel.Chosen), "left": nonNil(sel.Passed)})
			return exitOK
		}
		o.review(sel)
		if len(sel.Chosen) == 0 {
			fmt.Fprintln(out, "Nothing to redrive.")
		} else {
			fmt.Fprintf(out, "Dry run: %d would move to %s; nothing was moved.\n", len(sel.Chosen), queueName(*o.workURL))
		}
		return exitOK
	}
	if !*yes {
		o.review(sel)
		if !confirm(in, out, fmt.Sprintf("Redrive %s to %s at %v/s, recorded as by %s?", plural(len(sel.Chosen), "message"), queueName(*o.workURL), *rate, *by)) {
			_ = r.Release(context.WithoutCancel(ctx), sel.Chosen)
			fmt.Fprintln(out, "Nothing was moved.")
			return exitRefused
		}
	}
	res, err := r.Move(ctx, sel, func(oc redrive.Outcome) {
		if *o.json {
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
	if *o.json {
		if res.Outcomes == nil {
			res.Outcomes = []redrive.Outcome{}
		}
		o.printJSON(res)
	} else {
		fmt.Fprintf(out, "%d moved, %d skipped, %d failed.\n", res.Moved, res.Skipped, res.Failed)
	}
	if err != nil {
		return o.fail("dlq redrive", err)
	}
	if res.Failed > 0 {
		return exitFailed
	}
	return exitOK
}

func nonNil(ls []redrive.Letter) []redrive.Letter {
	if ls == nil {
		return []redrive.Letter{}
	}
	return ls
}

// plural says "1 message" or "3 messages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// review shows a selection before it moves.
func (o *ops) review(sel *redrive.Selection) {
	fmt.Fprintf(o.out, "Read %d messages from %s. Would move %d to %s:\n", sel.Scanned, queueName(*o.dlqURL), len(sel.Chosen), queueName(*o.workURL))
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
func (o *ops) moveAll(ctx context.Context, rate int32, yes bool) int {
	arn := func(url string) (string, error) {
		a, err := o.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return "", err
		}
		return a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
	}
	dlqARN, err := arn(*o.dlqURL)
	if err != nil {
		return o.fail("dlq redrive", err)
	}
	workARN, err := arn(*o.workURL)
	if err != nil {
		return o.fail("dlq redrive", err)
	}
	if !yes && !confirm(o.in, o.out, fmt.Sprintf("Move every message of %s to %s with an SQS move task (unreviewed; the ledger is not marked)?", queueName(*o.dlqURL), queueName(*o.workURL))) {
		fmt.Fprintln(o.out, "Nothing was moved.")
		return exitRefused
	}
	return o.runMoveTask(ctx, o.sqs, dlqARN, workARN, rate)
}

// runMoveTask is separate so that tests can give a fake move task API.
func (o *ops) runMoveTask(ctx context.Context, api redrive.MoveTaskAPI, dlqARN, workARN string, rate int32) int {
	st, err := redrive.MoveAll(ctx, redrive.MoveTask{API: api, DLQARN: dlqARN, TargetARN: workARN, Rate: rate, Poll: moveTaskPoll}, func(s redrive.TaskStatus) {
		if !*o.json {
			fmt.Fprintf(o.out, "move task %s: %s, %d of %d moved\n", s.Handle, s.Status, s.Moved, s.ToMove)
		}
	})
	if *o.json {
		o.printJSON(st)
	}
	if err != nil {
		return o.fail("dlq redrive", err)
	}
	return exitOK
}

// moveTaskPoll is how often a move task's progress is read.
var moveTaskPoll = 5 * time.Second

// errAPI is satisfied by AWS API errors (smithy.APIError).
type errAPI interface {
	ErrorCode() string
	ErrorMessage() string
}

// explain turns an error into a message that says what to do, and an exit
// code.
func explain(err error, table, workURL, dlqURL string) (string, int) {
	var usage usageError
	if errors.As(err, &usage) {
		return string(usage), exitUsage
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "the configured region"
	}
	var api errAPI
	if errors.As(err, &api) {
		switch code := api.ErrorCode(); {
		case code == "ResourceNotFoundException":
			return fmt.Sprintf("the table %q does not exist in %s: check --stage/--table and AWS_REGION (the stack's output LedgerTable names it) [%s]", table, region, api.ErrorMessage()), exitNotFound
		case code == "AWS.SimpleQueueService.NonExistentQueue" || code == "QueueDoesNotExist":
			which := fmt.Sprintf("work %q, DLQ %q", workURL, dlqURL)
			if lead, _, ok := strings.Cut(err.Error(), ": operation error"); ok {
				which = lead // "find the queue nudge-prod-dlq"
			}
			return fmt.Sprintf("a queue does not exist in %s (%s): check --stage/--queue-url/--dlq-url and AWS_REGION (the stack's outputs WorkQueueUrl and DeadLetterQueueUrl)", region, which), exitNotFound
		case strings.Contains(code, "AccessDenied") || code == "UnauthorizedOperation":
			return fmt.Sprintf("AWS refused the permission: %s. Attach the stack's managed policy nudge-<stage>-operator (output OperatorPolicyArn) to your role (docs/operations.md#operator-permissions)", api.ErrorMessage()), exitAccess
		case code == "UnrecognizedClientException" || code == "InvalidClientTokenId" || code == "ExpiredToken" || code == "ExpiredTokenException" || code == "InvalidSignatureException":
			return fmt.Sprintf("AWS did not accept the credentials (%s: %s): refresh them (aws sso login, or AWS_PROFILE) and check AWS_REGION", code, api.ErrorMessage()), exitAccess
		}
	}
	switch {
	case errors.Is(err, schedule.ErrNoReminder), errors.Is(err, ledger.ErrNotFound):
		return err.Error(), exitNotFound
	case errors.Is(err, ledger.ErrInFlight):
		return err.Error(), exitRefused
	case errors.Is(err, context.Canceled):
		return "interrupted: " + err.Error(), exitFailed
	}
	msg := err.Error()
	if strings.Contains(msg, "no such host") || strings.Contains(msg, "connection refused") || strings.Contains(msg, "i/o timeout") {
		return fmt.Sprintf("cannot reach AWS: %s. Check the network, AWS_REGION and any AWS_ENDPOINT_URL_* settings", msg), exitAccess
	}
	if strings.Contains(msg, "no AWS region") || strings.Contains(msg, "failed to retrieve credentials") || strings.Contains(msg, "no EC2 IMDS role") {
		return msg + ". Set AWS_REGION and credentials (AWS_PROFILE, or aws sso login)", exitAccess
	}
	return msg, exitFailed
}

// ---- nudge ledger retain ----

func ledgerCmd(args []string, in io.Reader, out, errs io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		group(out, "nudge ledger")
		return exitOK
	}
	if len(args) > 0 && args[0] == "revive" {
		return ledgerRevive(args[1:], in, out, errs)
	}
	if len(args) == 0 || args[0] != "retain" {
		group(errs, "nudge ledger")
		return exitUsage
	}
	c := newCommand("nudge ledger retain", "", "Once, for a table written before 2026-11-30: give every reminder and delivery item the TTL of its\nreminder (expiresAt + 90 days) where it has none or an earlier one. Never shortens a TTL; safe to\nrun again.", out, errs)
	fs := c.fs
	o := addOpsFlags(c, out, errs, nil)
	dryRun := fs.Bool("dry-run", false, "count the items to change; change nothing")
	if code, ok := c.parse(args[1:]); !ok {
		return code
	}
	ctx, stop := opsContext()
	defer stop()
	if err := o.connect(ctx, false); err != nil {
		return o.fail("ledger retain", err)
	}
	r, err := o.ledger.Retain(ctx, *dryRun)
	if err != nil {
		return o.fail("ledger retain", err)
	}
	if *o.json {
		o.printJSON(map[string]any{"table": *o.table, "dryRun": *dryRun, "items": r.Items, "extended": r.Extended})
		return exitOK
	}
	verb := "given"
	if *dryRun {
		verb = "would be given"
	}
	fmt.Fprintf(out, "%d reminder and delivery items read; %d %s their reminder's TTL (expiresAt + 90 days).\n", r.Items, r.Extended, verb)
	return exitOK
}
