// Package consumer is Nudge's delivery handler: it turns one SQS record into
// at most one provider send, recorded in the ledger, and decides what
// happens on failure.
//
// For each record: decode the body (a bad body is dead-lettered at once);
// defer it if it is early (re-published with a delay of at most 15 minutes,
// or released back to the calendar) without spending a receive; claim the
// delivery in the ledger (a duplicate, an expired or an in-flight delivery is
// recognised from the refused write); send it through its provider with the
// delivery key as idempotency key, stopping it if the heartbeat middleware
// (heartbeat.Heartbeat.Middleware) loses the message; record the outcome. Failures are classified: transient ones are retried
// with capped, jittered backoff (until the attempt budget is spent, when they
// are dead-lettered with the reason); permanent ones are dead-lettered now.
// Dead-lettering sends the original body to the DLQ with the reason as
// message attributes (internal/deadletter), marks the ledger, and acknowledges
// the record.
//
// Every path ends in an Outcome (a Transition and what its line says), and
// one place, Consumer.report, turns it into the log line and the metrics.
//
// Function wires a Consumer into a batch.Processor and flushes metrics once
// per invocation; functions/consumer is its Lambda entry point.
package consumer
