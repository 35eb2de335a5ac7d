package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nudgehq/nudge/pkg/local/demo"
)

// localDemo runs the whole system locally and exits 1 if an invariant broke.
func localDemo(args []string, out, errs io.Writer) int {
	return localRun("demo", demo.Defaults(), args, out, errs)
}

// localChaos runs the system under load and faults, with consumer kills and
// cut enqueue runs, and exits 1 if an invariant broke.
func localChaos(args []string, out, errs io.Writer) int {
	return localRun("chaos", demo.ChaosDefaults(), args, out, errs)
}

func localRun(name string, d demo.Config, args []string, out, errs io.Writer) int {
	cfg, keep, code, ok := runConfig(name, d, args, out, errs)
	if !ok {
		return code
	}
	cfg.Out, cfg.Live = os.Stdout, isTerminal(os.Stdout)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *keep {
		cfg.Keep = func(ctx context.Context, sum *demo.Summary, local demo.Local) {
			sum.Write(os.Stdout)
			printKept(os.Stdout, local)
			<-ctx.Done()
		}
	}
	sum, err := demo.Run(ctx, cfg)
	if err == nil && *keep {
		if !sum.OK() {
			return 1
		}
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nudge local "+name+":", err)
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	sum.Write(os.Stdout)
	if !sum.OK() {
		return 1
	}
	return 0
}

// runConfig reads a run's flags over the preset d: every flag defaults to
// d's value, so that a run without flags is the preset.
func runConfig(name string, d demo.Config, args []string, out, errs io.Writer) (demo.Config, *bool, int, bool) {

	about := "Run the whole system on this machine (DynamoDB Local, fauxqs, the real bootstraps under the\nLambda emulator, a local event source mapping and provider), with faults, then check its invariants\nand print the summary; exits 1 if one broke."
	if name == "chaos" {
		about = "The local demo under load and faults: 10,000 reminders, consumer runtimes killed mid-batch, enqueue\nruns cut by their budget; exits 1 if an invariant broke."
	}
	c := newCommand("nudge local "+name, "", about, out, errs)
	fs := c.fs
	var cfg demo.Config
	cfg.Stage = d.Stage
	fs.IntVar(&cfg.Reminders, "reminders", d.Reminders, "how many reminders (`N`) to schedule")
	fs.Float64Var(&cfg.Rate, "rate", d.Rate, "reminders the intake creates per second (`R`)")
	fs.DurationVar(&cfg.Spread, "spread", d.Spread, "the due-soon reminders fall due within this long (`DURATION`) of their creation")
	fs.IntVar(&cfg.BatchSize, "batch-size", d.BatchSize, "the event source mapping's batch size `N` (1–10000)")
	fs.DurationVar(&cfg.BatchingWindow, "batching-window", d.BatchingWindow, "the event source mapping's batching window `DURATION` (0–5m)")
	fs.IntVar(&cfg.MaxConcurrency, "max-concurrency", d.MaxConcurrency, "consumer instances `N`, each one invocation at a time (2 or more)")
	faults := fs.String("faults", d.Faults.String(), "provider fault shares `SPEC`: 500, 429, 400, hang, drop, down (e.g. \"500=5%,400=1%\"), or \"none\"")
	fs.Float64Var(&cfg.SESRate, "ses-rate", d.SESRate, "SES sends per second for the stage, shared by the consumers (`R`; negative for no limit; default 20)")
	fs.DurationVar(&cfg.Latency, "latency", d.Latency, "the provider's mean answer time `DURATION` (0 for none)")
	fs.IntVar(&cfg.Poison, "poison", 0, "malformed messages (`N`) to put on the queue (default 1% of reminders, at least 3; -1 for none)")
	fs.Float64Var(&cfg.Duplicates, "duplicates", d.Duplicates, "`SHARE` of due-now deliveries sent twice, 0 to 1 (0 for none)")
	fs.DurationVar(&cfg.Tick, "tick", d.Tick, "the enqueue schedule's period `DURATION` (1 min in AWS)")
	fs.DurationVar(&cfg.Deadline, "deadline", 0, "give up, and report what is left as overdue, after this long (`DURATION`; default 3m plus 30ms per reminder plus one visibility timeout; with kills, 150ms per kill and a visibility timeout per retry the attempt budget allows)")
	fs.Int64Var(&cfg.Seed, "seed", d.Seed, "`SEED` of the mix and the faults")
	fs.IntVar(&cfg.Kills, "kills", d.Kills, "consumer runtimes (`N`) to kill in the middle of a batch, spread over the run (below the preset's reminders, one per 10 reminders; above, no more)")
	fs.IntVar(&cfg.EnqueueKills, "enqueue-kills", d.EnqueueKills, "times (`N`) to kill the enqueue's runtime in the middle of a run, spread over the run (below the preset's reminders, one per 1,000 reminders and at least 1; above, no more)")
	fs.DurationVar(&cfg.ConsumerTimeout, "consumer-timeout", d.ConsumerTimeout, "the consumer's function timeout `DURATION`; the queue's visibility timeout is 6× it")
	fs.DurationVar(&cfg.EnqueueBudget, "enqueue-budget", d.EnqueueBudget, "each enqueue run's time budget `DURATION` (0: the stage's 55 s timeout)")
	keep := fs.Bool("keep", false, "after the summary, keep the system running (schedule, consumers, stand-ins) to try the operator commands on it, until Ctrl-C")
	if code, ok := c.parse(args); !ok {
		return cfg, keep, code, false
	}
	// A zero given on the command line means none, not the default.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		switch f.Name {
		case "batching-window":
			if cfg.BatchingWindow == 0 {
				cfg.BatchingWindow = -1
			}
		case "latency":
			if cfg.Latency == 0 {
				cfg.Latency = -1
			}
		case "duplicates":
			if cfg.Duplicates == 0 {
				cfg.Duplicates = -1
			}
		case "ses-rate":
			if cfg.SESRate == 0 {
				cfg.SESRate = -1
			}
		}
	})
	// The preset's kills are for its reminders: a smaller run gets fewer
	// (1,000 kills on 300 reminders would kill each delivery's attempts
	// several times over), a larger one no more.
	if cfg.Reminders < d.Reminders && d.Reminders > 0 {
		if !set["kills"] {
			cfg.Kills = d.Kills * cfg.Reminders / d.Reminders
		}
		if !set["enqueue-kills"] && d.EnqueueKills > 0 {
			cfg.EnqueueKills = max(1, d.EnqueueKills*cfg.Reminders/d.Reminders)
		}
	}
	f, err := demo.ParseFaults(*faults)
	if err != nil {
		fmt.Fprintln(errs, "nudge local "+name+":", err)
		return cfg, keep, 2, false
	}
	cfg.Faults = &f
	return cfg, keep, 0, true
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
		"    \"deliveries\":[{\"channel\":\"sms\",\"provider\":\"webhook\",\"recipientRef\":\"contact-1\",\"templateRef\":\"renewal\"}]}'\n"+
		"  curl --aws-sigv4 aws:amz:us-east-1:lambda --user local:local %s/v1/reminders/rem-try-1\n",
		local.IntakeURL, time.Now().Add(time.Minute).UTC().Format(time.RFC3339), local.IntakeURL)
	fmt.Fprintf(w, "\nThe system keeps running (the schedule ticks, the consumers consume). In another shell:\n\n")
	for _, kv := range local.Env {
		fmt.Fprintf(w, "  export %s\n", kv)
	}
	fmt.Fprint(w, "  build/nudge status\n  build/nudge dlq list\n  build/nudge reminder show rem-try-1\n\nCtrl-C stops everything.\n")
}

// localServe runs the whole system with nothing scheduled, for an operator
// or an application to try, until Ctrl-C.
func localServe(args []string, out, errs io.Writer) int {
	c := newCommand("nudge local serve", "", "Run the whole system on this machine with nothing scheduled, until Ctrl-C: the stand-ins, the\nintake API behind a local function URL, the schedule and the consumers (make serve).", out, errs)
	if code, ok := c.parse(args); !ok {
		return code
	}
	cfg := demo.Defaults()
	cfg.Serve, cfg.Reminders, cfg.Kills = true, 0, 0
	cfg.Out = os.Stdout
	cfg.Keep = func(ctx context.Context, _ *demo.Summary, local demo.Local) {
		printKept(os.Stdout, local)
		<-ctx.Done()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := demo.Run(ctx, cfg); err != nil && ctx.Err() == nil {
		fmt.Fprintln(errs, "nudge local serve:", err)
		return 1
	}
	return 0
}
