// Package batch processes an SQS event from Lambda record by record and
// builds the partial batch response, for any Go Lambda function that
// consumes SQS. Write a Handler for one record, wrap it in Middleware if
// need be, and pass a Processor's Process to lambda.Start; the package
// knows nothing of reminders. This package is part of Nudge's public Go
// API; see the README's “Go packages”.
//
// A Processor runs a Handler on each record with bounded concurrency (in FIFO
// mode: each message group in order, other groups in parallel), and then:
//
//   - a record whose handler returned nil is acknowledged (left out of
//     batchItemFailures, so the event source mapping deletes it);
//   - a record whose handler returned an error is reported in
//     batchItemFailures; if the error carries a delay (failure.Retryable(err,
//     d)), the record's visibility is first set to d, so the retry comes back
//     after its backoff rather than after the queue's visibility timeout;
//   - when the Lambda deadline is near, records not yet started are not
//     started: they are made visible again at once and reported as failures;
//   - in FIFO mode the first failure in a group fails the group's later records
//     without running them, so order is kept; other groups go on;
//   - a panic in a handler fails that record only.
//
// The response never names an empty or unknown item identifier, and a bad
// record never fails the whole batch. Visibility changes are sent with
// ChangeMessageVisibilityBatch, ten at a time.
//
// The function must be configured with ReportBatchItemFailures.
package batch
