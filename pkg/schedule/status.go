package schedule

import (
	"github.com/nudgehq/nudge/internal/ledger"
)

// Status is a delivery's state as the API tells it (docs/openapi.yaml's
// status): the ledger's states, by the same names. statusOf converts.
type Status string

// A delivery's states as the API names them: the ledger's values (a test
// holds the two lists equal, so that a state renamed in the table is a
// decision here, not a silent change of the API). Sent, Dead, Expired and
// Cancelled are final, but that a redrive can take a Dead delivery up
// again. Held is a fallback waiting: it goes only if its delivery fails.
const (
	StatusHeld      Status = "held"      // a fallback, taken (then pending) only if its delivery fails
	StatusPending   Status = "pending"   // scheduled; the enqueue has not handed it to the queue
	StatusQueued    Status = "queued"    // on the queue, waiting for a consumer
	StatusSending   Status = "sending"   // a consumer is sending it now
	StatusRetrying  Status = "retrying"  // an attempt failed for now; another follows
	StatusSent      Status = "sent"      // sent: the provider accepted it
	StatusDead      Status = "dead"      // not sent, dead-lettered with a reason for an operator
	StatusExpired   Status = "expired"   // not sent: its expiresAt passed first
	StatusCancelled Status = "cancelled" // not sent: cancelled by its owner or an operator
)

// Why a delivery was refused a change (CancelResult.Refused,
// MoveResult.Refused), and the errors a store's operations wrap, from the
// ledger below: the same values, so that errors.Is matches either name.
var (
	// ErrAlreadySent: the delivery was sent; nothing can unsend it.
	ErrAlreadySent = ledger.ErrAlreadySent
	// ErrFinished: the delivery ended otherwise (expired, cancelled).
	ErrFinished = ledger.ErrFinished
	// ErrLeased: a consumer is sending the delivery now; try again once
	// its lease ends.
	ErrLeased = ledger.ErrLeased
	// ErrChanged: the reminder kept changing while a reschedule or a
	// cancel wrote it (a send, a cancel or another reschedule came
	// between); send the same call again.
	ErrChanged = ledger.ErrChanged
	// ErrNoShardCount: the table has no shard count yet, which the enqueue
	// records on its first run, a minute after the stack's first deploy;
	// a create is refused until then.
	ErrNoShardCount = ledger.ErrNoShardCount
)
