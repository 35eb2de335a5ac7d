package main

// nudge schedule, import, cancel and reschedule: the calendar's intake.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// calendarFlags are what the calendar commands share: the ledger table they
// work on, and the limits of a reminder's times.
type calendarFlags struct {
	*resources
	lateness, maxAhead *time.Duration
}

func addCalendarFlags(c *command) calendarFlags {
	r := addResources(c, false)
	r.attempts = 8 // a bulk import meets throttling; Create is idempotent
	return calendarFlags{
		resources: r,
		lateness: c.flags().Duration("lateness", c.envDuration("lateness", "NUDGE_LATENESS", 24*time.Hour),
			"expiresAt − dueAt when a reminder gives none (`DURATION`) [$NUDGE_LATENESS]"),
		maxAhead: c.flags().Duration("max-ahead", c.envDuration("max-ahead", "NUDGE_MAX_AHEAD", schedule.DefaultMaxAhead),
			"how far ahead dueAt and expiresAt may be (`DURATION`) [$NUDGE_MAX_AHEAD]"),
	}
}

// store opens the operator's ledger on the table and returns the calendar
// on it, which refuses a delivery the stage cannot send.
func (f calendarFlags) store(ctx context.Context) (*schedule.Store, error) {
	if err := f.connect(ctx, false); err != nil {
		return nil, err
	}
	cfg, l := f.cfg, f.ledger
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
		// The stage's default send windows, as the intake applies them.
		if sc.Windows, err = schedule.ParseDefaultWindows(getenv(deployment.EnvSendWindows)); err != nil {
			return nil, fmt.Errorf("the stage's send windows, as its enqueue recorded them: %w", err)
		}
		if sc.Doors, err = registry.Doors(facts.Providers, provider.Env{Getenv: getenv, AWS: cfg}); err != nil {
			return nil, err
		}
	}
	sc.HandOff = f.handOff(ctx)
	return schedule.New(sc)
}

// handOff is the short-notice hand-off to the stage's work queue, if it can
// be found (--queue-url, $NUDGE_QUEUE_URL, or the stage's queue by name):
// a reminder due within the lookahead is published at once, as the intake
// does. Without it (no queue, or no right to look it up), the enqueue hands
// it off at its next tick.
func (f *resources) handOff(ctx context.Context) schedule.HandOff {
	if f.routes.Default == "" {
		if f.workURL == "" && f.stage != "" {
			out, err := f.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(deployment.Stage{Name: f.stage}.WorkQueueName())})
			if err != nil {
				return nil
			}
			f.workURL = aws.ToString(out.QueueUrl)
		}
		if f.workURL == "" || f.findRoutes(ctx) != nil {
			return nil
		}
	}
	// An operator's clock may be behind: published that much early, a
	// message is deferred by the consumer rather than sent late.
	h, err := enqueue.NewHandOff(enqueue.HandOffConfig{Queue: f.sqs, QueueURL: f.routes.Default, Routes: f.routes, ClockSkew: ledger.OperatorClockSkew})
	if err != nil {
		return nil
	}
	return h
}

// metaFlag is --meta KEY=VALUE, repeatable.
type metaFlag map[string]string

func (m metaFlag) String() string { return fmt.Sprint(map[string]string(m)) }
func (m metaFlag) Type() string   { return "stringToString" } // as pflag names a map: completion offers it again
func (m metaFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q is not KEY=VALUE", s)
	}
	m[k] = v
	return nil
}

// calendarCommands are nudge schedule, import, cancel and reschedule.
func calendarCommands(s streams) []*cobra.Command {
	return []*cobra.Command{scheduleCommand(s), importCommand(s), cancelCommand(s), rescheduleCommand(s)}
}

// scheduleCommand: nudge schedule [flags] | nudge schedule --json - < reminder.json
func scheduleCommand(s streams) *cobra.Command {
	c := newCommand("schedule", "create one reminder (idempotent by id)",
		`Create one reminder, from flags or from JSON. The same id with the same content is harmless;
with different content it is refused as a conflict naming the field.`, s)
	fs := c.flags()
	cal := addCalendarFlags(c)
	jsonPath := fs.String("json", "", "read the reminder as JSON from `FILE` ('-' for stdin) instead of flags")
	id := fs.String("id", "", "the reminder `ID`: 1–128 of [A-Za-z0-9._-]")
	account := fs.String("account", "", "the account reference `REF`")
	due := fs.String("due", "", "the due `TIME`, RFC 3339 (2026-12-01T09:00:00Z)")
	expires := fs.String("expires", "", "the expiry `TIME`, RFC 3339 (default: due + lateness)")
	dueLocal := fs.String("due-local", "", "the due time on the recipient's wall clock (`LOCAL`, 2027-03-28T09:30), in --tz")
	expiresLocal := fs.String("expires-local", "", "the expiry on the recipient's wall clock (`LOCAL`), in --tz")
	tz := fs.String("tz", "", "the recipient's IANA time `ZONE` (Europe/Berlin), for --due-local and --expires-local")
	rrule := fs.String("rrule", "", "make it a series: an RFC 5545 `RULE` (FREQ=MONTHLY;BYDAY=-1FR), from --due-local in --tz")
	window := fs.String("window", "", "send only within these `HOURS` of the recipient's wall clock, in --tz: 08:00-21:00, with days "+
		"08:00-21:00 mon-sat, or in a zone of its own 08:00-21:00 America/New_York mon-fri (default: the stage's for the channel, if any)")
	channel := fs.String("channel", "email", "the `CHANNEL`")
	prov := fs.String("provider", registry.Default(), "the `PROVIDER`")
	recipient := fs.String("recipient", "", "the recipient reference `REF` the provider resolves")
	template := fs.String("template", "", "the template reference `REF` (for a provider that renders it, a template in templates/email)")
	address := fs.String("address", "", "the recipient's `ADDRESS`, for a provider that sends to it (an e-mail address, for one that sends e-mail)")
	meta := metaFlag{}
	fs.Var(meta, "meta", "metadata `KEY=VALUE` (repeatable)")
	c.run = func(ctx context.Context, _ []string) int {
		stdin, stdout, stderr := c.in, c.out, c.errs
		// Read before the table is opened: a usage error needs none.
		w, err := schedule.ParseWindowSpec(*window)
		switch {
		case err != nil:
			fmt.Fprintln(stderr, "nudge schedule: --window:", err)
			return exitUsage
		case w != nil && *jsonPath != "":
			fmt.Fprintln(stderr, `nudge schedule: --window is for a reminder given by flags; with --json, give each delivery its "window" in the JSON `+
				`({"from": "08:00", "to": "21:00", "days": ["mon", "tue"]})`)
			return exitUsage
		}
		st, err := cal.store(ctx)
		if err != nil {
			return c.fail(cal.resources, err)
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
			in := schedule.Input{ID: *id, AccountRef: *account, DueAt: *due, ExpiresAt: *expires, DueLocal: *dueLocal, ExpiresLocal: *expiresLocal, TimeZone: *tz,
				Recur: *rrule,
				Deliveries: []schedule.DeliveryInput{{Channel: *channel, Provider: *prov, RecipientRef: *recipient, TemplateRef: *template, Address: *address,
					Window: w}}}
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
		if r.TimeZone != "" {
			fmt.Fprintf(stdout, "  local: due %s\n", schedule.LocalView(r.DueAt, r.TimeZone, r.DueLocal))
		}
		for _, d := range r.Deliveries {
			if !d.Window.IsZero() {
				fmt.Fprintf(stdout, "  %s:%s: sent only within %s (its first opening: %s)\n", d.Channel, d.Provider, d.Window,
					ledger.Format(d.Window.Next(r.DueAt)))
			}
		}
		if r.Recur != "" {
			fmt.Fprintf(stdout, "  series: %s; its occurrences are reminders %s.<local date and time>, created ahead (`nudge reminder show %s`)\n",
				r.Recur, r.ID, r.ID)
		}
		return 0
	}
	return c.cmd
}

// importCommand: nudge import [--format jsonl|csv] FILE
func importCommand(s streams) *cobra.Command {
	c := newCommand("import FILE", "create reminders from JSON Lines or CSV",
		`Create reminders in bulk from JSON Lines or CSV. Invalid rows are reported by line and never
stop valid ones; exits 1 if any row was not created or unchanged.`, s)
	fs := c.flags()
	cal := addCalendarFlags(c)
	format := fs.String("format", "", "the file's `FORMAT`, jsonl or csv (default: from its extension)")
	concurrency := fs.Int("concurrency", 16, "write `N` reminders at a time")
	c.run = func(ctx context.Context, args []string) int {
		stdout, stderr, terminal := c.out, c.errs, isTerminal(c.errs)
		if len(args) != 1 {
			fmt.Fprintln(stderr, "nudge import: give one FILE (JSON Lines or CSV)")
			return 2
		}
		path := args[0]
		f := schedule.Format(*format)
		if f == "" {
			var err error
			if f, err = schedule.FormatOf(path); err != nil {
				fmt.Fprintln(stderr, "nudge import:", strings.TrimPrefix(err.Error(), "schedule: "))
				return 2
			}
		}
		st, err := cal.store(ctx)
		if err != nil {
			return c.fail(cal.resources, err)
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
	return c.cmd
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

// cancelCommand: nudge cancel [--note TEXT] ID
func cancelCommand(s streams) *cobra.Command {
	c := newCommand("cancel ID", "cancel a reminder's unsent deliveries",
		`Cancel the reminder's deliveries that have not been sent; says which were, and why the others
were not (already sent, or being sent now).`, s)
	fs := c.flags()
	cal := addCalendarFlags(c)
	note := fs.String("note", "cancelled by operator", "why, for the delivery history (`TEXT`)")
	c.run = func(ctx context.Context, args []string) int {
		stdout, stderr := c.out, c.errs
		if len(args) != 1 {
			fmt.Fprintln(stderr, "nudge cancel: give one reminder ID")
			return 2
		}
		st, err := cal.store(ctx)
		if err != nil {
			return c.fail(cal.resources, err)
		}
		res, err := st.Cancel(ctx, args[0], *note)
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
	return c.cmd
}

// rescheduleCommand: nudge reschedule --due TIME [--expires TIME] [--note TEXT] ID
func rescheduleCommand(s streams) *cobra.Command {
	c := newCommand("reschedule ID --due TIME", "move a reminder's unsent deliveries to a new time",
		`Move the reminder's deliveries that have not started sending to a new due time; says which
were not moved, and why (already sent, ended, or being sent now). Once it answers, none is sent
before the new time. The reminder keeps its window (expiresAt − dueAt) unless --expires is given.`, s)
	fs := c.flags()
	cal := addCalendarFlags(c)
	due := fs.String("due", "", "the new due time, RFC 3339 (`TIME`), like 2026-12-08T09:00:00Z")
	expires := fs.String("expires", "", "the new expiry, RFC 3339 (`TIME`) (default: the new due time plus the reminder's window)")
	dueLocal := fs.String("due-local", "", "the new due time on the recipient's wall clock (`LOCAL`, 2027-03-28T09:30), in the reminder's zone or --tz")
	expiresLocal := fs.String("expires-local", "", "the new expiry on the recipient's wall clock (`LOCAL`)")
	tz := fs.String("tz", "", "the IANA time `ZONE` of --due-local and --expires-local (default: the reminder's)")
	note := fs.String("note", "by operator", "why, for the delivery history (`TEXT`)")
	c.run = func(ctx context.Context, args []string) int {
		stdout, stderr := c.out, c.errs
		if len(args) != 1 || *due == "" && *dueLocal == "" {
			fmt.Fprintln(stderr, "nudge reschedule: give one reminder ID and --due TIME (or --due-local LOCAL)")
			return 2
		}
		st, err := cal.store(ctx)
		if err != nil {
			return c.fail(cal.resources, err)
		}
		res, err := st.Reschedule(ctx, args[0], schedule.Times{DueAt: *due, ExpiresAt: *expires, DueLocal: *dueLocal, ExpiresLocal: *expiresLocal, TimeZone: *tz}, *note)
		if err != nil {
			fmt.Fprintln(stderr, "nudge reschedule:", strings.TrimPrefix(err.Error(), "schedule: "))
			return 1
		}
		code, stands := 0, false
		for _, r := range res.Deliveries {
			stands = stands || r.Moved || r.Unchanged
			switch {
			case r.Moved && r.Key.ReminderID != args[0]:
				// A series' occurrence: one at an old time cancelled, or
				// one from the new start created.
				what := "created, from the series' new start"
				if r.Status == schedule.StatusCancelled {
					what = "cancelled: the series restarts at " + ledger.Format(res.DueAt)
				}
				fmt.Fprintf(stdout, "%s: %s\n", r.Key, what)
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
	return c.cmd
}
