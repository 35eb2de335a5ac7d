// Package schedule is the reminder as Nudge's API takes and answers it,
// and the intake's one logic behind every door (the API, the CLI, the
// import) that validates reminders and writes them. An application in Go
// uses its types with intake.Client (Input to create, Document to read
// back, Status, Times to reschedule), its Validator to check a reminder
// before sending it (the intake's rules but for the stage's settings:
// which providers it runs, which templates are deployed, the lateness, how
// far ahead a reminder may be and the default send windows by channel),
// and its ValidationError and refusals to read what was wrong. This
// package is part of Nudge's public Go API; see the README's “Go
// packages”.
//
// Inside Nudge, a Store validates reminders and writes them, idempotently
// by id, to the ledger table before anything can be published; it cancels
// and reschedules them; and it imports them in bulk from JSON Lines or
// CSV.
//
// The ledger stores a reminder (ledger.CreateReminder: what the user gave)
// and one delivery per delivery (ledger.Create), which it places in the due
// index for the enqueue to find; this package never touches the table. Creating the same
// reminder twice is harmless; a different reminder under a used id is a
// *ConflictError naming the field that differs.
//
// Its types are the API's (Reminder, Delivery, Status, Document, Event):
// JSON, the shape docs/openapi.yaml describes. The ledger's are the
// table's (ledger.ReminderItem, ledger.Delivery); storage.go converts
// between them, in both directions, and nothing else does. What the
// intake needs from the ledger (the refusals, such as ErrAlreadySent, the
// time format, the page size, the masking of addresses) it takes from
// here.
package schedule
