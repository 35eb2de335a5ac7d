// Package enqueue is the calendar's hand-off: on each schedule tick it
// reads the due index, shard by shard, and publishes an id-only message for
// each delivery whose publish time has come, delayed until it is due.
//
// Each shard has a cursor, an item in the ledger table holding the sort
// key of the last entry handed off. A run reads a page of entries after
// the cursor, moves the cursor past them with a conditional write, and
// only then publishes them; of two concurrent runs, only the one whose
// write succeeds publishes a page. Handing off by cursor costs no write
// per delivery, which keeps a delivery inside the budget of 5 write units
// from creation to sent (docs/ledger.md).
//
// What a cursor cannot see is caught by the overdue scan that follows:
// every live delivery more than OverdueAfter past due is counted
// (OverduePending), and one that no consumer has taken for RepairAfter
// after its hand-off (its message was lost, or the run that moved the
// cursor died before publishing) is requeued with a conditional write and
// published again. The cursor's trail of earlier positions tells how long
// ago the cursor handed an entry off, since it writes nothing to the
// deliveries it passes. Each repair since the delivery was last claimed doubles
// the wait for the next, so that a queue slower than RepairAfter gets a few
// copies of a delivery, not one per window. Expired deliveries are ended,
// never published.
//
// Runs are time-budgeted: pages are taken round robin across shards, so a
// backlog drains over several runs without starving any shard.
package enqueue
