// Package esm runs an SQS event source mapping the way Lambda does, for
// running Nudge on one machine: it polls a queue, gathers a batch (up to the
// batch size, within the batching window), invokes a function with it, and
// deletes exactly the records the function did not report in
// batchItemFailures. Records it does not delete are left alone: they come
// back after their visibility timeout, and the queue's redrive policy moves
// a record to the dead-letter queue after maxReceiveCount receives.
//
// The response is read by Lambda's rules for ReportBatchItemFailures:
//
//   - a function error, an invocation that fails, or a response that is not
//     JSON fails the whole batch (nothing is deleted);
//   - a null or empty response, or an empty batchItemFailures, is a complete
//     success (everything is deleted);
//   - an itemIdentifier that is empty, null, misspelt or not in the batch
//     fails the whole batch;
//   - otherwise every record not listed is deleted.
//
// Maximum concurrency is the number of Invokers: each runs one invocation at
// a time, as one runtime interface emulator can, and several together give
// the concurrency. Against AWS none of this is needed: Lambda's own event
// source mapping does it.
package esm
