// Package ledger is the delivery ledger: one DynamoDB item per delivery,
// moved between states only by conditional writes, so that each reminder is
// sent once however often its message arrives.
//
// The item lives under its reminder (PK "REM#<reminderId>", SK
// "DLV#<channel>#<provider>") and carries what the consumer needs to send
// (recipient and template references, dueAt, expiresAt), so a claim with
// ReturnValues ALL_NEW returns everything in one request. A write whose
// condition fails returns the item as it was (ReturnValuesOnConditionCheck
// Failure ALL_OLD), and the ledger turns that into a *RefusedError naming why:
// already sent, in flight elsewhere, not yet due, expired. No extra read.
//
// A provider's feedback on a message (RecordFeedback: a bounce, a
// complaint, a delivery) is recorded beside the status, never changing
// it: the feedback that stands (a failing one over an informational one,
// else the later by the provider's time), a history entry, and the ids
// seen, so that a repeat is refused (ErrFeedbackSeen).
//
// Each transition appends an entry to the item's history in the same write,
// bounded to the last Config.HistoryLimit entries. docs/ledger.md has the item
// layout, the state machine and the write units of each transition.
package ledger
