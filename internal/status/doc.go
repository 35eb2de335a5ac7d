// Package status answers "is Nudge keeping up?" for an operator (nudge
// status): deliveries by state, the overdue ones and the oldest of them,
// and the depths of the work queue and the DLQ with the age of the DLQ's
// oldest message.
//
// The counts come from a scan of the ledger table: exact, and priced like
// one (about one read unit per 8 KB of table with eventually consistent
// reads). In AWS the same figures arrive each minute, free, as the
// enqueue's OverduePending and OldestOverdueSeconds metrics and the queues'
// CloudWatch metrics on the stack's dashboard; this command is for the
// moment an operator needs the detail.
package status
