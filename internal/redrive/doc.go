// Package redrive reviews the dead-letter queue and hands a bounded,
// reviewed batch of it back to the work queue (nudge dlq list, nudge dlq
// redrive).
//
// Reading is gentle: messages are received with a short visibility timeout
// and made visible again as soon as they have been read, so a review never
// consumes a message and hides it only for moments.
//
// A redrive is a reviewed operation (DESIGN rule 9). Select reads the DLQ,
// joins each message to its delivery in the ledger and decides, for each,
// whether a redrive can help: a dead or still live delivery can; a body
// that is not a delivery, a delivery the ledger does not have, or one
// already sent, cancelled or expired cannot, and is left where it is (the
// settled ones, with IncludeSettled, are moved anyway so that the consumer
// retires them as duplicates). It holds the
// chosen messages while the operator looks, and releases the rest. Move
// then, for each chosen message, at a bounded rate:
//
//  1. marks the delivery in the ledger (dead → queued, with who and when),
//     which also puts it back in the due index so that the calendar repairs
//     it if the redriven message is lost;
//  2. sends the same body to the work queue, with the same attributes and a
//     count of redrives;
//  3. deletes it from the DLQ.
//
// An interruption between 2 and 3 leaves a copy in the DLQ: a later redrive
// sends it again and the consumer recognises it as a duplicate. Nothing is
// lost, nothing is sent twice, and a redrive never creates a new reminder
// identity: the body, and so the delivery key, is the same.
//
// MoveAll is the console's mechanism (StartMessageMoveTask) for moving the
// whole DLQ at once; it does not mark the ledger, and the consumer claims a
// dead delivery directly (dead → sending), which the ledger allows.
//
// A Reviver is the way back for a dead delivery whose DLQ copy has aged out
// (the DLQ keeps a message 14 days): nudge ledger revive. Plan reads the
// ledger's dead deliveries (a bounded, paged scan), chooses up to Max that
// match the filters and have not expired, and says why it left the others;
// Apply revives each with one conditional write (still dead as read),
// recorded with who and why: the delivery is pending again, in the due
// index ahead of the enqueue, its attempt budget restarted. A DLQ copy
// still there, redriven afterwards, is claimed as any copy of a live
// delivery is, so the delivery is sent once (ledger.Ledger.Revive).
package redrive
