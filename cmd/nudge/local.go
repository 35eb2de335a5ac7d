package main

// nudge local exec|invoke|demo|chaos|serve: the system on this machine.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/demo"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/provider/registry"
)

func localCommand(s streams) *cobra.Command {
	return newGroup("local", "the system on this machine: stand-ins, functions, demo", localExec(s), localInvoke(s),
		localRun("demo", "run the whole system locally and check its invariants", demo.Defaults(), s),
		localRun("chaos", "the demo under load and faults", demo.ChaosDefaults(), s), localServe(s))
}

// localExec runs a command with the stand-ins up. Its arguments are the
// command's, flags included, so it parses none itself.
func localExec(s streams) *cobra.Command {
	return &cobra.Command{Use: "exec -- CMD [ARG...]", Short: "run CMD with DynamoDB Local and fauxqs started", DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			if len(args) == 0 {
				fmt.Fprint(s.errs, "nudge local exec: no command given\n\n")
				help(s.errs, cmd)
				return exitCode(exitUsage)
			}
			if isHelp(args[0]) {
				help(s.out, cmd)
				return nil
			}
			return exitWith(execWithStandins(cmd.Context(), s, args))
		}}
}

// execWithStandins starts the stand-ins, runs args with the environment
// that points at them, and stops them; it returns the command's exit code.
func execWithStandins(ctx context.Context, s streams, args []string) int {
	dir, err := standin.DefaultDir()
	if err != nil {
		fmt.Fprintln(s.errs, "nudge:", err)
		return 1
	}
	stack, err := standin.Up(ctx, dir, s.errs)
	if err != nil {
		fmt.Fprintln(s.errs, "nudge:", err)
		return 1
	}
	defer stack.Stop()
	env := stack.Env()
	// The browser tests' Chromium, installed like the stand-ins: when it
	// cannot be, they say why (and fail where the stand-ins are required).
	if chromium, err := standin.InstallChromium(ctx, s.errs); err == nil {
		env = append(env, "NUDGE_CHROMIUM="+chromium)
	} else {
		fmt.Fprintln(s.errs, "nudge: the browser tests cannot run:", err)
	}

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.in, s.out, s.errs
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(s.errs, "nudge:", err)
		return 1
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		// Ctrl-C reaches the child through the terminal; a TERM may not.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err = <-waited
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if exit.ExitCode() < 0 {
			return 130
		}
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(s.errs, "nudge:", err)
		return 1
	}
	return 0
}

func localInvoke(s streams) *cobra.Command {
	c := newCommand("invoke", "run a function's bootstrap under the Lambda emulator",
		`Run the function an event is for (SQS events: the consumer; schedule events: the enqueue) under
the Lambda runtime interface emulator against fresh stand-ins seeded with what the event names, and
print its log lines, its REPORT line, its response and the ledger.`, s)
	fs := c.flags()
	var o invokeOptions
	fs.StringVar(&o.event, "event", "events/sqs-batch.json", "the event `FILE` to invoke the function with (see events/)")
	fs.StringVar(&o.function, "function", "", "the `FUNCTION`, consumer or enqueue; default: the one the event is for")
	fs.StringVar(&o.bootstrap, "bootstrap", "", "the function's binary `PATH`, built for this machine; default build/local/<function>/bootstrap (make build-local)")
	fs.StringVar(&o.fault, "fault", "", "consumer: provider faults per reminder, a `SPEC` such as \"rem-185=500;rem-186=400\"")
	c.run = func(ctx context.Context, _ []string) int {
		if _, err := invoke(ctx, s.out, o); err != nil {
			fmt.Fprintln(s.errs, "nudge local invoke:", err)
			return 1
		}
		return 0
	}
	return c.cmd
}

// localRun is local demo, and local chaos: it runs the system with the
// preset d, flags changing it, and exits 1 if an invariant broke.
func localRun(name, short string, d demo.Config, s streams) *cobra.Command {
	about := `Run the whole system on this machine (DynamoDB Local, fauxqs, the real bootstraps under the
Lambda emulator, a local event source mapping and provider), with faults, then check its invariants
and print the summary; exits 1 if one broke.`
	if name == "chaos" {
		about = `The local demo under load and faults: 10,000 reminders, consumer runtimes killed mid-batch, enqueue
runs cut by their budget; exits 1 if an invariant broke.`
	}
	c := newCommand(name, short, about, s)
	f := addRunFlags(c.flags(), d)
	c.run = func(ctx context.Context, _ []string) int {
		cfg, err := f.config()
		if err != nil {
			fmt.Fprintln(s.errs, "nudge local "+name+":", err)
			return 2
		}
		cfg.Out, cfg.Live = s.out, isTerminal(s.out)
		if f.keep {
			cfg.Keep = func(ctx context.Context, sum *demo.Summary, local demo.Local) {
				sum.Write(s.out)
				printKept(s.out, local)
				keepConsole(ctx, local, s)
			}
		}
		sum, err := demo.Run(ctx, cfg)
		if err == nil && f.keep {
			if !sum.OK() {
				return 1
			}
			return 0
		}
		if err != nil {
			fmt.Fprintln(s.errs, "nudge local "+name+":", err)
			if ctx.Err() != nil {
				return 130
			}
			return 1
		}
		sum.Write(s.out)
		if !sum.OK() {
			return 1
		}
		return 0
	}
	return c.cmd
}

// runFlags are a run's flags over a preset: every flag defaults to the
// preset's value, so that a run without flags is the preset.
type runFlags struct {
	fs     *pflag.FlagSet
	preset demo.Config
	cfg    demo.Config
	faults string
	keep   bool
	// rates are the --<provider>-rate flags' values, by provider.
	rates map[string]*float64
}

// addRunFlags defines a run's flags on fs over the preset d.
func addRunFlags(fs *pflag.FlagSet, d demo.Config) *runFlags {
	f := &runFlags{fs: fs, preset: d}
	cfg := &f.cfg
	cfg.Stage = d.Stage
	fs.IntVar(&cfg.Reminders, "reminders", d.Reminders, "how many reminders (`N`) to schedule")
	fs.Float64Var(&cfg.Rate, "rate", d.Rate, "reminders the intake creates per second (`R`)")
	fs.DurationVar(&cfg.Spread, "spread", d.Spread, "the due-soon reminders fall due within this long (`DURATION`) of their creation")
	fs.IntVar(&cfg.BatchSize, "batch-size", d.BatchSize, "the event source mapping's batch size `N` (1–10000)")
	fs.DurationVar(&cfg.BatchingWindow, "batching-window", d.BatchingWindow, "the event source mapping's batching window `DURATION` (0–5m)")
	fs.IntVar(&cfg.MaxConcurrency, "max-concurrency", d.MaxConcurrency, "consumer instances `N`, each one invocation at a time (2 or more)")
	fs.StringVar(&f.faults, "faults", d.Faults.String(), "provider fault shares `SPEC`: 500, 429, 400, hang, drop, down (e.g. \"500=5%,400=1%\"), or \"none\"")
	f.rates = map[string]*float64{}
	for _, drv := range registry.All() {
		if drv.StandIn.Rate > 0 {
			f.rates[drv.Name] = fs.Float64(drv.Name+"-rate", d.Rates[drv.Name],
				fmt.Sprintf("%s sends per second for the stage, shared by the consumers (`R`; negative for no limit; default %g)", drv.Title, drv.StandIn.Rate))
		}
	}
	fs.DurationVar(&cfg.Latency, "latency", d.Latency, "the provider's mean answer time `DURATION` (0 for none)")
	fs.IntVar(&cfg.Poison, "poison", 0, "malformed messages (`N`) to put on the queue (default 1% of reminders, at least 3; -1 for none)")
	fs.Float64Var(&cfg.Duplicates, "duplicates", d.Duplicates, "`SHARE` of due-now deliveries sent twice, 0 to 1 (0 for none)")
	fs.DurationVar(&cfg.Tick, "tick", d.Tick, "the enqueue schedule's period `DURATION` (1 min in AWS)")
	fs.DurationVar(&cfg.Deadline, "deadline", 0, "give up, and report what is left as overdue, after this long (`DURATION`; default 3m plus 30ms per reminder plus one visibility timeout; with kills, 150ms per kill and a visibility timeout per retry the attempt budget allows)")
	fs.Int64Var(&cfg.Seed, "seed", d.Seed, "`SEED` of the mix and the faults")
	fs.IntVar(&cfg.Kills, "kills", d.Kills, "consumer runtimes (`N`) to kill in the middle of a batch, spread over the run (below the preset's reminders, one per 10 reminders; above, no more)")
	fs.IntVar(&cfg.EnqueueKills, "enqueue-kills", d.EnqueueKills, "times (`N`) to kill the enqueue's runtime in the middle of a run, spread over the run (below the preset's reminders, one per 1,000 reminders and at least 1; above, no more)")
	fs.IntVar(&cfg.OutcomeKills, "outcome-kills", d.OutcomeKills, "times (`N`) to kill the outcomes function's runtime in the middle of a batch of the ledger's stream (below the preset's reminders, one per 1,000 reminders and at least 1; above, no more)")
	fs.Float64Var(&cfg.EventFaults, "event-faults", d.EventFaults, "`SHARE` of the outcome events the local bus fails, 0 to 0.5 (half of it fails whole PutEvents requests)")
	fs.DurationVar(&cfg.ConsumerTimeout, "consumer-timeout", d.ConsumerTimeout, "the consumer's function timeout `DURATION`; the queue's visibility timeout is 6× it")
	fs.DurationVar(&cfg.EnqueueBudget, "enqueue-budget", d.EnqueueBudget, "each enqueue run's time budget `DURATION` (0: the stage's 55 s timeout)")
	fs.BoolVar(&f.keep, "keep", false, "after the summary, keep the system running (schedule, consumers, stand-ins) to try the operator commands on it, until Ctrl-C")
	return f
}

// config is the run the parsed flags ask for.
func (f *runFlags) config() (demo.Config, error) {
	cfg, d := f.cfg, f.preset
	// A zero given on the command line means none, not the default.
	if f.fs.Changed("batching-window") && cfg.BatchingWindow == 0 {
		cfg.BatchingWindow = -1
	}
	if f.fs.Changed("latency") && cfg.Latency == 0 {
		cfg.Latency = -1
	}
	if f.fs.Changed("duplicates") && cfg.Duplicates == 0 {
		cfg.Duplicates = -1
	}
	cfg.Rates = map[string]float64{}
	for name, r := range f.rates {
		if cfg.Rates[name] = *r; f.fs.Changed(name+"-rate") && *r == 0 {
			cfg.Rates[name] = -1
		}
	}
	// The preset's kills are for its reminders: a smaller run gets fewer
	// (1,000 kills on 300 reminders would kill each delivery's attempts
	// several times over), a larger one no more.
	if cfg.Reminders < d.Reminders && d.Reminders > 0 {
		if !f.fs.Changed("kills") {
			cfg.Kills = d.Kills * cfg.Reminders / d.Reminders
		}
		if !f.fs.Changed("enqueue-kills") && d.EnqueueKills > 0 {
			cfg.EnqueueKills = max(1, d.EnqueueKills*cfg.Reminders/d.Reminders)
		}
		if !f.fs.Changed("outcome-kills") && d.OutcomeKills > 0 {
			cfg.OutcomeKills = max(1, d.OutcomeKills*cfg.Reminders/d.Reminders)
		}
	}
	faults, err := demo.ParseFaults(f.faults)
	if err != nil {
		return cfg, err
	}
	cfg.Faults = &faults
	return cfg, nil
}

// printKept tells the operator where a kept local system runs, and how to
// reach it.
func printKept(w io.Writer, local demo.Local) {
	fmt.Fprintf(w, "\nThe e-mails SES sent are in the local inbox: %s\n", local.Inbox)
	fmt.Fprintf(w, "\nThe intake API is at %s (a local function URL: it needs a SigV4 signature and does not verify it):\n\n", local.IntakeURL)
	// The example is due a minute from now on the wall clock: the local
	// system's functions run on it.
	fmt.Fprintf(w, "  curl --aws-sigv4 aws:amz:us-east-1:lambda --user local:local -H 'content-type: application/json' \\\n"+
		"    -X PUT %s/v1/reminders/rem-try-1 -d '{\"accountRef\":\"acct-1\",\"dueAt\":\"%s\",\n"+
		"    \"deliveries\":[{\"channel\":\"sms\",\"provider\":\"%s\",\"recipientRef\":\"contact-1\",\"templateRef\":\"renewal\"}]}'\n"+
		"  curl --aws-sigv4 aws:amz:us-east-1:lambda --user local:local %s/v1/reminders/rem-try-1\n",
		local.IntakeURL, time.Now().Add(time.Minute).UTC().Format(time.RFC3339), registry.Default(), local.IntakeURL)
	fmt.Fprintf(w, "\nThe system keeps running (the schedule ticks, the consumers consume). In another shell:\n\n")
	for _, kv := range local.Env {
		fmt.Fprintf(w, "  export %s\n", kv)
	}
	fmt.Fprint(w, "  build/nudge status\n  build/nudge dlq list\n  build/nudge reminder show rem-try-1\n\nCtrl-C stops everything.\n")
}

// keepConsole serves the console beside a kept local system, on a free
// loopback port, with actions allowed (the stage is the developer's own),
// until ctx ends. It prints the address to open, with the token; a console
// that cannot start is said, and the system keeps running without it.
func keepConsole(ctx context.Context, l demo.Local, s streams) {
	err := func() error {
		db, q, err := local.Clients(ctx, l.DynamoDBEndpoint, l.SQSEndpoint, nil)
		if err != nil {
			return err
		}
		led, err := ledger.New(db, ledger.Config{Table: l.Table, ShardsFromRegistry: true, ClockSkew: ledger.OperatorClockSkew})
		if err != nil {
			return err
		}
		r := &resources{stage: l.Stage, table: l.Table, workURL: l.WorkURL, dlqURL: l.DLQURL, routes: l.Routes, db: db, sqs: q, ledger: led}
		who := defaultOperator()
		if who == "" {
			who = "local"
		}
		cfg, err := r.consoleConfig(ctx, who)
		if err != nil {
			return err
		}
		cfg.AllowActions = true
		cfg.Logger = slog.New(slog.NewTextHandler(s.errs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		fmt.Fprintln(s.out)
		return serveConsole(ctx, ln, "127.0.0.1", cfg, s.out)
	}()
	if err != nil {
		fmt.Fprintln(s.errs, "nudge: the console did not start:", err)
		<-ctx.Done()
	}
}

// localServe runs the whole system with nothing scheduled, for an operator
// or an application to try, until Ctrl-C.
func localServe(s streams) *cobra.Command {
	c := newCommand("serve", "run the whole system locally, with the intake API, until Ctrl-C",
		`Run the whole system on this machine with nothing scheduled, until Ctrl-C: the stand-ins, the
intake API behind a local function URL, the schedule and the consumers (make serve).`, s)
	c.run = func(ctx context.Context, _ []string) int {
		cfg := demo.Defaults()
		cfg.Serve, cfg.Reminders, cfg.Kills = true, 0, 0
		cfg.Out = s.out
		cfg.Keep = func(ctx context.Context, _ *demo.Summary, local demo.Local) {
			printKept(s.out, local)
			keepConsole(ctx, local, s)
		}
		if _, err := demo.Run(ctx, cfg); err != nil && ctx.Err() == nil {
			fmt.Fprintln(s.errs, "nudge local serve:", err)
			return 1
		}
		return 0
	}
	return c.cmd
}
