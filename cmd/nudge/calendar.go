package main

// nudge schedule, import and cancel: the calendar's intake.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nudgehq/nudge/pkg/awsclient"
	"github.com/nudgehq/nudge/pkg/deployment"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/provider/registry"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// tableFlags are the settings every calendar command shares.
type tableFlags struct {
	c                  *command
	stage, table       *string
	envStage, envTable string
	lateness, maxAhead *time.Duration
}

// resources are the flags that name the stage's resources: given any of
// them, the NUDGE_* variables that name resources are not used.
const resources = "stage|table|queue-url|dlq-url"

func addTableFlags(c *command) tableFlags {
	return tableFlags{
		c:        c,
		stage:    c.fs.String("stage", "", "the deployed stage, whose table is nudge-`NAME`-ledger [$NUDGE_STAGE]"),
		table:    c.fs.String("table", "", "the ledger `TABLE`, instead of the stage's [$NUDGE_TABLE]"),
		envStage: c.envString(resources, "NUDGE_STAGE", validStage),
		envTable: os.Getenv("NUDGE_TABLE"),
		lateness: c.fs.Duration("lateness", c.envDuration("lateness", "NUDGE_LATENESS", 24*time.Hour), "expiresAt − dueAt when a reminder gives none (`DURATION`) [$NUDGE_LATENESS]"),
		maxAhead: c.fs.Duration("max-ahead", c.envDuration("max-ahead", "NUDGE_MAX_AHEAD", schedule.DefaultMaxAhead), "how far ahead dueAt and expiresAt may be (`DURATION`) [$NUDGE_MAX_AHEAD]"),
	}
}

// tableOf resolves the ledger table: the flags if either is given
// (--table, else --stage's), else the variables (NUDGE_TABLE, else
// NUDGE_STAGE's). It refuses a stage and a table that name different
// tables, saying where each came from.
func tableOf(stage, table, envStage, envTable string) (string, error) {
	fromEnv := stage == "" && table == ""
	if fromEnv {
		stage, table = envStage, envTable
	}
	if named := (deployment.Stage{Name: stage}).TableName(); stage != "" && table != "" && table != named {
		if fromEnv {
			return "", usageError(fmt.Sprintf("NUDGE_STAGE=%s names the table %s, and NUDGE_TABLE=%s another: unset one, or give --stage or --table", stage, named, table))
		}
		return "", usageError(fmt.Sprintf("--stage %s names the table %s, and --table %s another: give one", stage, named, table))
	}
	if table == "" && stage != "" {
		table = deployment.Stage{Name: stage}.TableName()
	}
	if table == "" {
		return "", usageError("no ledger table: pass --stage NAME (for the table nudge-NAME-ledger) or --table NAME, or set NUDGE_STAGE or NUDGE_TABLE (the stack's output LedgerTable)")
	}
	return table, nil
}

// storeFailed reports a failure to reach the ledger: exit 2 for a mistake
// in how the command was called, 1 otherwise.
func storeFailed(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	return 1
}

// tableName is the ledger table the flags and variables name.
func (f tableFlags) tableName() (string, error) {
	return tableOf(*f.stage, *f.table, f.envStage, f.envTable)
}

// store connects to the ledger table with the standard AWS configuration
// (region, credentials, AWS_ENDPOINT_URL_* for the local stand-ins).
func (f tableFlags) store(ctx context.Context) (*schedule.Store, error) {
	table, err := f.tableName()
	if err != nil {
		return nil, err
	}
	*f.table = table
	cfg, err := awsclient.Load(ctx)
	if err != nil {
		return nil, err
	}
	cfg.RetryMaxAttempts = 8 // a bulk import meets throttling; Create is idempotent
	db := awsclient.DynamoDB(cfg)
	// An operator's clock may be a minute off: publish times and leases
	// are judged with that margin (ledger.Config.ClockSkew). The shard count
	// is the stack's, as the enqueue recorded it in the table.
	l, err := ledger.New(db, ledger.Config{Table: *f.table, ShardsFromRegistry: true, ClockSkew: ledger.OperatorClockSkew})
	if err != nil {
		return nil, err
	}
	sc := schedule.Config{Ledger: l, Lateness: *f.lateness, MaxAhead: *f.maxAhead}
	// What the stage runs, as its enqueue recorded it: a delivery it cannot
	// send is refused here, not dead-lettered at its due time. A table
	// without the record (the minute after a first deploy) accepts the
	// built-in providers and checks no template.
	facts, ok, err := l.ReadStage(ctx)
	if err != nil {
		return nil, err
	}
	if ok {
		// Each provider's checks as the intake function makes them, from
		// the variables the enqueue recorded (a template prefix, say); a
		// template is asked of the provider once (an import of thousands
		// makes one call per template).
		sc.Providers = facts.Providers
		getenv := func(k string) string { return facts.Env[k] }
		if sc.Doors, err = registry.Doors(facts.Providers, provider.Env{Getenv: getenv, AWS: cfg}); err != nil {
			return nil, err
		}
	}
	return schedule.New(sc)
}

type metaFlag map[string]string

func (m metaFlag) String() string { return fmt.Sprint(map[string]string(m)) }
func (m metaFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q is not KEY=VALUE", s)
	}
	m[k] = v
	return nil
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// scheduleCmd: nudge schedule [flags] | nudge schedule --json - < reminder.json
func scheduleCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newCommand("nudge schedule", "", "Create one reminder, from flags or from JSON. The same id with the same content is harmless;\nwith different content it is refused as a conflict naming the field.", stdout, stderr)
	fs := c.fs
	tf := addTableFlags(c)
	jsonPath := fs.String("json", "", "read the reminder as JSON from `FILE` ('-' for stdin) instead of flags")
	id := fs.String("id", "", "the reminder `ID`: 1–128 of [A-Za-z0-9._-]")
	account := fs.String("account", "", "the account reference `REF`")
	due := fs.String("due", "", "the due `TIME`, RFC 3339 (2026-12-01T09:00:00Z)")
	expires := fs.String("expires", "", "the expiry `TIME`, RFC 3339 (default: due + lateness)")
	channel := fs.String("channel", "email", "the `CHANNEL`")
	prov := fs.String("provider", "webhook", "the `PROVIDER`")
	recipient := fs.String("recipient", "", "the recipient reference `REF` the provider resolves")
	template := fs.String("template", "", "the template reference `REF` (for ses, a template in templates/email)")
	address := fs.String("address", "", "the recipient's `ADDRESS`, for a provider that sends to it (ses: an e-mail address)")
	meta := metaFlag{}
	fs.Var(meta, "meta", "metadata `KEY=VALUE` (repeatable)")
	if code, ok := c.parse(args); !ok {
		return code
	}
	ctx, stop := signalContext()
	defer stop()
	st, err := tf.store(ctx)
	if err != nil {
		return storeFailed(stderr, "nudge schedule", err)
	}
	var r schedule.Reminder
	if *jsonPath != "" {
		var data []byte
		if *jsonPath == "-" {
			data, err = io.ReadAll(io.LimitReader(stdin, schedule.MaxInputBytes+1))
		} else {
			data, err = os.ReadFile(*jsonPath)
		}
		if err == nil {
			r, err = st.Validator().ParseJSON(data)
		}
	} else {
		in := schedule.Input{ID: *id, AccountRef: *account, DueAt: *due, ExpiresAt: *expires,
			Deliveries: []schedule.DeliveryInput{{Channel: *channel, Provider: *prov, RecipientRef: *recipient, TemplateRef: *template, Address: *address}}}
		if len(meta) > 0 {
			in.Metadata = meta
		}
		r, err = st.Validator().Validate(in)
	}
	if err != nil {
		fmt.Fprintln(stderr, "nudge schedule:", err)
		return 1
	}
	outcome, err := st.Create(ctx, r)
	if err != nil {
		fmt.Fprintln(stderr, "nudge schedule:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s %s: %d deliveries due %s, expiring %s\n", outcome, r.ID, len(r.Deliveries), ledger.Format(r.DueAt), ledger.Format(r.ExpiresAt))
	return 0
}

// importCmd: nudge import [--format jsonl|csv] FILE
func importCmd(args []string, stdout, stderr io.Writer, terminal bool) int {
	c := newCommand("nudge import", "FILE", "Create reminders in bulk from JSON Lines or CSV. Invalid rows are reported by line and never\nstop valid ones; exits 1 if any row was not created or unchanged.", stdout, stderr)
	fs := c.fs
	tf := addTableFlags(c)
	format := fs.String("format", "", "the file's `FORMAT`, jsonl or csv (default: from its extension)")
	concurrency := fs.Int("concurrency", 16, "write `N` reminders at a time")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "nudge import: give one FILE (JSON Lines or CSV)")
		return 2
	}
	path := fs.Arg(0)
	f := schedule.Format(*format)
	if f == "" {
		var err error
		if f, err = schedule.FormatOf(path); err != nil {
			fmt.Fprintln(stderr, "nudge import:", strings.TrimPrefix(err.Error(), "schedule: "))
			return 2
		}
	}
	ctx, stop := signalContext()
	defer stop()
	st, err := tf.store(ctx)
	if err != nil {
		return storeFailed(stderr, "nudge import", err)
	}
	file, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(stderr, "nudge import:", err)
		return 1
	}
	defer file.Close()
	rows, err := schedule.ReadRows(file, f, st.Validator())
	if err != nil {
		fmt.Fprintln(stderr, "nudge import:", strings.TrimPrefix(err.Error(), "schedule: "))
		return 1
	}
	start := time.Now() // wall clock: the import's duration and rate, as measured
	progress := progressPrinter(stderr, terminal, start)
	sum, err := schedule.Import(ctx, rows, schedule.ImportConfig{Creator: st, Concurrency: *concurrency, Progress: progress})
	if terminal {
		fmt.Fprintln(stderr)
	}
	printSummary(stdout, path, sum, time.Since(start)) // wall clock: as measured
	if err != nil {
		fmt.Fprintln(stderr, "nudge import: stopped:", err, "— run the same import again to finish; written rows report unchanged")
		return 1
	}
	if !sum.OK() {
		return 1
	}
	return 0
}

// progressPrinter draws a bar on a terminal, and otherwise a plain line
// every 5 seconds and at the end, for logs.
func progressPrinter(w io.Writer, terminal bool, start time.Time) func(done, total int) {
	last := time.Time{}
	return func(done, total int) {
		now := time.Now() // wall clock: the progress line's pace and rate, as measured
		if terminal {
			if done != total && now.Sub(last) < 100*time.Millisecond {
				return
			}
			last = now
			const width = 30
			filled := width * done / max(total, 1)
			rate := float64(done) / max(now.Sub(start).Seconds(), 0.001)
			fmt.Fprintf(w, "\r[%s%s] %d/%d  %.0f/s ", strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, rate)
			return
		}
		if done == total || now.Sub(last) >= 5*time.Second {
			last = now
			fmt.Fprintf(w, "import: %d/%d rows done after %s\n", done, total, now.Sub(start).Round(time.Millisecond))
		}
	}
}

func printSummary(w io.Writer, path string, sum schedule.Summary, took time.Duration) {
	fmt.Fprintf(w, "%s: %d rows in %s: %d created, %d unchanged, %d conflicting, %d invalid, %d failed\n",
		path, sum.Rows, took.Round(time.Millisecond), sum.Created, sum.Unchanged, len(sum.Conflicts), len(sum.Invalid), len(sum.Failed))
	for _, group := range []struct {
		name string
		rows []schedule.RowError
	}{{"conflicting", sum.Conflicts}, {"invalid", sum.Invalid}, {"failed", sum.Failed}} {
		for _, e := range group.rows {
			fmt.Fprintf(w, "  line %d: %s: %v\n", e.Line, group.name, e.Err)
		}
	}
}

// cancelCmd: nudge cancel [--note TEXT] ID
func cancelCmd(args []string, stdout, stderr io.Writer) int {
	c := newCommand("nudge cancel", "ID", "Cancel the reminder's deliveries that have not been sent; says which were, and why the others\nwere not (already sent, or being sent now).", stdout, stderr)
	fs := c.fs
	tf := addTableFlags(c)
	note := fs.String("note", "cancelled by operator", "why, for the delivery history (`TEXT`)")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "nudge cancel: give one reminder ID")
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	st, err := tf.store(ctx)
	if err != nil {
		return storeFailed(stderr, "nudge cancel", err)
	}
	res, err := st.Cancel(ctx, fs.Arg(0), *note)
	if err != nil {
		fmt.Fprintln(stderr, "nudge cancel:", strings.TrimPrefix(err.Error(), "schedule: "))
		return 1
	}
	code := 0
	for _, r := range res {
		switch {
		case r.Unended > 0:
			fmt.Fprintf(stdout, "%s: cancelled, but attempt %d may have been sent: it never recorded its end; check the provider's record (nudge reminder show %s)\n", r.Key, r.Unended, r.Key.ReminderID)
			code = 1
		case r.Cancelled:
			fmt.Fprintf(stdout, "%s: cancelled\n", r.Key)
		case errors.Is(r.Refused, ledger.ErrAlreadySent):
			fmt.Fprintf(stdout, "%s: not cancelled: it was already sent at %s\n", r.Key, ledger.Format(r.At))
			code = 1
		case errors.Is(r.Refused, ledger.ErrLeased):
			// The lease counts as lapsed only the operator's clock skew after it ends.
			fmt.Fprintf(stdout, "%s: not cancelled: a consumer is sending it now (lease until %s); run the cancel again after %s\n", r.Key, ledger.Format(r.At), ledger.Format(r.At.Add(ledger.OperatorClockSkew)))
			code = 1
		default:
			fmt.Fprintf(stdout, "%s: already ended (%s); nothing to cancel\n", r.Key, r.Status)
		}
	}
	return code
}

func rescheduleCmd(args []string, stdout, stderr io.Writer) int {
	c := newCommand("nudge reschedule", "ID --due TIME", "Move the reminder's deliveries that have not started sending to a new due time; says which\nwere not moved, and why (already sent, ended, or being sent now). Once it answers, none is sent\nbefore the new time. The reminder keeps its window (expiresAt − dueAt) unless --expires is given.", stdout, stderr)
	fs := c.fs
	tf := addTableFlags(c)
	due := fs.String("due", "", "the new due time, RFC 3339 (`TIME`), like 2026-12-08T09:00:00Z")
	expires := fs.String("expires", "", "the new expiry, RFC 3339 (`TIME`) (default: the new due time plus the reminder's window)")
	note := fs.String("note", "by operator", "why, for the delivery history (`TEXT`)")
	if code, ok := c.parse(args); !ok {
		return code
	}
	if fs.NArg() != 1 || *due == "" {
		fmt.Fprintln(stderr, "nudge reschedule: give one reminder ID and --due TIME")
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	st, err := tf.store(ctx)
	if err != nil {
		return storeFailed(stderr, "nudge reschedule", err)
	}
	res, err := st.Reschedule(ctx, fs.Arg(0), schedule.Times{DueAt: *due, ExpiresAt: *expires}, *note)
	if err != nil {
		fmt.Fprintln(stderr, "nudge reschedule:", strings.TrimPrefix(err.Error(), "schedule: "))
		return 1
	}
	code, stands := 0, false
	for _, r := range res.Deliveries {
		stands = stands || r.Moved || r.Unchanged
		switch {
		case r.Moved:
			fmt.Fprintf(stdout, "%s: moved to %s (expires %s)\n", r.Key, ledger.Format(res.DueAt), ledger.Format(res.ExpiresAt))
		case r.Unchanged:
			fmt.Fprintf(stdout, "%s: already at %s\n", r.Key, ledger.Format(res.DueAt))
		case errors.Is(r.Refused, ledger.ErrAlreadySent):
			fmt.Fprintf(stdout, "%s: not moved: it was already sent at %s\n", r.Key, ledger.Format(r.At))
			code = 1
		case errors.Is(r.Refused, ledger.ErrLeased):
			fmt.Fprintf(stdout, "%s: not moved: a consumer is sending it now (lease until %s); run the reschedule again after %s\n", r.Key, ledger.Format(r.At), ledger.Format(r.At.Add(ledger.OperatorClockSkew)))
			code = 1
		case errors.Is(r.Refused, schedule.ErrDeadLettered):
			fmt.Fprintf(stdout, "%s: not moved: it is dead-lettered; review it (nudge dlq list): a redrive sends it at its old time, or cancel it\n", r.Key)
			code = 1
		default:
			fmt.Fprintf(stdout, "%s: not moved: it already ended (%s)\n", r.Key, r.Status)
		}
	}
	if !stands {
		return 1 // nothing moved
	}
	return code
}
