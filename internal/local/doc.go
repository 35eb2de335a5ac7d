// Package local is the whole system on one machine: what nudge local
// invoke, the demo, the chaos run and the drain benchmark run on, built in
// one place (Start). Nothing in it reaches AWS, and nothing of the
// production path imports it.
//
// A System is the stand-ins (DynamoDB Local and fauxqs, started here or
// given), the stage's table and queues provisioned in them as the stack
// defines them (Provision), AWS clients on them, and the provider sink on a
// loopback port. Env gives a function the environment the stack would give
// it, pointed at these, and StartFunction runs its bootstrap under the
// Lambda runtime interface emulator; StartIntake runs the HTTP intake's
// instances behind a local function URL.
//
// A Harness (StartHarness) is what every runner drives, built once on a
// System: its table and queues emptied, the consumers, the enqueue and the
// intake running with their AWS requests counted by proxies, and an event
// source mapping for the consumers; the outcomes function fed the ledger's
// stream (DrainOutcomes), and, when the stage runs ses, the feedback
// function fed SES's events from the feedback queue (DrainFeedback), as
// the stack wires them: the stand-in for SES's event publishing puts them
// on the local bus, whose rule on the default bus delivers them there.
//
// Its subpackages are the parts:
//
//	standin      install and run the stand-ins and the emulator; counting proxies
//	esm          a local SQS event source mapping
//	urlfront     a local Lambda function URL (payload format 2.0, SigV4 header required)
//	bus          a stand-in for EventBridge's PutEvents: rules on source and detail-type to SQS queues
//	sink         a provider that deduplicates by idempotency key and injects faults
//	demo         the runners: the demo, the chaos run, serve and the drain benchmark
//	check        the runs' checker: the plan and the evidence in, the verdict out
//	batchtest    helpers for tests of SQS handlers
package local
