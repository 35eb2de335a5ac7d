// Package schedule is the intake of the calendar: it validates reminders
// and writes them, idempotently by id, to the ledger table before anything
// can be published; it cancels them; and it imports them in bulk from JSON
// Lines or CSV.
//
// A reminder is one item (PK REM#<id>, SK REMINDER) holding what the user
// gave, beside one ledger delivery item per delivery, which the ledger
// places in the due index for the enqueue to find. Creating the same
// reminder twice is harmless; a different reminder under a used id is a
// *ConflictError naming the field that differs.
package schedule
