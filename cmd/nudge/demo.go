package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nudgehq/nudge/pkg/demo"
)

// localDemo runs the whole system locally and exits 1 if an invariant broke.
func localDemo(args []string) int {
	fs := flag.NewFlagSet("nudge local demo", flag.ContinueOnError)
	var cfg demo.Config
	fs.IntVar(&cfg.Reminders, "reminders", 300, "how many reminders to schedule")
	fs.Float64Var(&cfg.Rate, "rate", 100, "reminders the intake creates per second")
	fs.DurationVar(&cfg.Spread, "spread", 30e9, "the due-soon reminders fall due within this long of their creation")
	fs.IntVar(&cfg.BatchSize, "batch-size", 10, "the event source mapping's batch size (1–10000)")
	fs.DurationVar(&cfg.BatchingWindow, "batching-window", 1e9, "the event source mapping's batching window (0–5m)")
	fs.IntVar(&cfg.MaxConcurrency, "max-concurrency", 2, "consumer instances, each one invocation at a time (2 or more)")
	faults := fs.String("faults", demo.DefaultFaults.String(), `provider fault shares: 500, 429, 400, hang, drop, down (e.g. "500=5%,400=1%"), or "none"`)
	fs.DurationVar(&cfg.Latency, "latency", 20e6, "the provider's mean answer time")
	fs.IntVar(&cfg.Poison, "poison", 0, "malformed messages to put on the queue (default 1% of reminders, at least 3; -1 for none)")
	fs.Float64Var(&cfg.Duplicates, "duplicates", 0.05, "share of due-now deliveries sent twice (negative for none)")
	fs.DurationVar(&cfg.Tick, "tick", 2e9, "the enqueue schedule's period (1 min in AWS)")
	fs.DurationVar(&cfg.Deadline, "deadline", 180e9, "give up, and report what is left as overdue, after this long")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of the mix and the faults")
	keep := fs.Bool("keep", false, "after the summary, keep the system running (schedule, consumers, stand-ins) to try the operator commands on it, until Ctrl-C")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	f, err := demo.ParseFaults(*faults)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nudge local demo:", err)
		return 2
	}
	cfg.Faults = &f
	cfg.Out, cfg.Live = os.Stdout, isTerminal(os.Stdout)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *keep {
		cfg.Keep = func(ctx context.Context, sum *demo.Summary, local demo.Local) {
			sum.Write(os.Stdout)
			fmt.Printf("\nThe system keeps running (the schedule ticks, the consumers consume). In another shell:\n\n")
			for _, kv := range local.Env {
				fmt.Printf("  export %s\n", kv)
			}
			fmt.Print("  build/nudge status\n  build/nudge dlq list\n  build/nudge dlq redrive --max 10 --reason-class rejected\n  build/nudge reminder show rem-00001\n\nCtrl-C stops everything.\n")
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
		fmt.Fprintln(os.Stderr, "nudge local demo:", err)
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
