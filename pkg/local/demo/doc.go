// Package demo runs the whole of Nudge on one machine, with no AWS account
// and no Docker, and checks that it kept its promise: once, on time,
// nothing lost.
//
// Run starts DynamoDB Local and fauxqs (or uses the ones given), provisions
// the table and queues from the stage the CDK stack uses (pkg/deployment),
// starts a provider sink, and runs the real bootstrap binaries under the
// Lambda runtime interface emulator with the environment the stack gives
// them. It then schedules a mix of reminders through the intake (due now,
// due within the run, far in the future, already expired, cancelled), puts
// poison bodies and duplicate messages on the work queue, injects provider
// faults (latency, 429 with Retry-After, 500, permanent 400, hangs, answers
// lost after acceptance, a provider down for one delivery), ticks the
// enqueue function as EventBridge Scheduler would, and feeds the consumer
// through an event source mapping (pkg/esm) with the stage's batch size,
// batching window and maximum concurrency.
//
// When every due delivery has reached an end state and the work queue is
// empty, or the deadline passes, Run reads the ledger, the DLQ, the sink's
// own records and the functions' metrics, and returns a Summary: counts by
// outcome, due→sent latency, AWS requests per delivered reminder, and the
// violations of the invariants, if any (a delivery sent twice, a delivery
// lost, overdue work left, an outcome other than the one its faults call
// for).
//
// To finish in about a minute, the demo compresses time: the schedule ticks
// every couple of seconds instead of every minute, and the settle time,
// provider timeout and retry backoff are shortened. Every other setting is
// the stage's.
package demo
