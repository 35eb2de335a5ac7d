// Package demo runs the whole of Nudge on one machine, with no AWS account
// and no Docker, and checks that it kept its promise: once, on time,
// nothing lost.
//
// Run starts the local system (internal/local: DynamoDB Local, fauxqs and the
// SES stand-in, or the ones given; the table and queues from the stage the
// CDK stack uses; a provider sink) and, on it, the harness every runner
// shares (local.Harness: the real bootstrap binaries under the Lambda
// runtime interface emulator with the environment the stack gives them,
// their AWS calls counted, and an event source mapping with the stage's
// batch size, batching window and maximum concurrency). It then schedules a
// mix of reminders through the intake (due now, due within the run, far in
// the future, already expired, cancelled), puts poison bodies and duplicate
// messages on the work queue, injects provider faults (latency, 429 with
// Retry-After, 500, permanent 400, hangs, answers lost after acceptance, a
// provider down for one delivery), ticks the enqueue function as
// EventBridge Scheduler would, and runs the mapping.
//
// When every due delivery has reached an end state and the work queue is
// empty, or the deadline passes, Run gathers the evidence (the ledger, the
// DLQ, each provider's own record, the functions' metrics), has the checker
// (internal/local/check) judge it against the plan, and returns a Summary:
// counts by outcome, due→sent latency, AWS requests per delivered
// reminder, and the violations of the invariants, if any (a delivery sent
// twice, a delivery lost, overdue work left, an outcome other than the one
// its faults call for).
//
// The runners, one a file: the demo (demo.go), the chaos run (chaos.go: the
// demo with runtimes killed), serve (serve.go: the system with no plan, for
// an operator) and the drain benchmark (drain.go: the consumer path alone).
// What is particular to a provider on this side (its faults, its record) is
// in channels.go; the mix and which provider a reminder uses in plan.go.
//
// To finish in about a minute, the demo compresses time: the schedule ticks
// every couple of seconds instead of every minute, and the settle time,
// provider timeout and retry backoff are shortened. Every other setting is
// the stage's.
package demo
