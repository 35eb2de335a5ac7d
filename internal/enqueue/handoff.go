package enqueue

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/clock"
)

// HandOffConfig configures a HandOff.
type HandOffConfig struct {
	// Queue publishes to the work queue. Required.
	Queue Publisher
	// QueueURL is the work queue. Required.
	QueueURL string
	// Routes are the providers' own work queues (envelope.Routes,
	// NUDGE_PROVIDER_QUEUES): a delivery goes to its provider's. Default:
	// every delivery to QueueURL.
	Routes envelope.Routes
	// PublishAttempts is how often an entry SQS refuses is sent before it
	// is given back to the caller. Default 3: the caller is answering a
	// request, and a delivery it gives back goes to the calendar.
	PublishAttempts int
	// Clock tells the time, for the messages' delays. Default clock.Real.
	Clock clock.Clock
	// ClockSkew is how far behind the true time Clock may be (an
	// operator's machine: ledger.OperatorClockSkew): each message is
	// published that much before its due time, so that a clock behind
	// never makes it late; the consumer defers one that arrives early.
	// Default 0 (Lambda's clock).
	ClockSkew time.Duration
	// Logger receives what SQS refused. Default slog.Default().
	Logger *slog.Logger
}

// HandOff publishes deliveries a writer marked as handed off when it wrote
// them (ledger.Delivery.HandOff): the intake's short-notice hand-off, for a
// delivery due within the lookahead, which the enqueue's cursor would hand
// off only at its next tick. The messages are the enqueue's own, delayed
// until due; the cursor passes the marked entries without publishing them.
type HandOff struct{ pub *publisher }

// NewHandOff validates cfg and returns a HandOff.
func NewHandOff(cfg HandOffConfig) (*HandOff, error) {
	switch {
	case cfg.Queue == nil:
		return nil, errors.New("enqueue: hand-off: Queue (SQS client) is nil")
	case cfg.QueueURL == "":
		return nil, errors.New("enqueue: hand-off: work queue URL is empty; set NUDGE_QUEUE_URL")
	case cfg.PublishAttempts < 0 || cfg.ClockSkew < 0:
		return nil, errors.New("enqueue: hand-off: PublishAttempts and ClockSkew must not be negative")
	}
	if cfg.PublishAttempts == 0 {
		cfg.PublishAttempts = 3
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Routes.Default == "" {
		cfg.Routes.Default = cfg.QueueURL
	}
	return &HandOff{pub: &publisher{queue: cfg.Queue, routes: cfg.Routes,
		attempts: cfg.PublishAttempts, early: cfg.ClockSkew, clock: cfg.Clock, logger: cfg.Logger}}, nil
}

// Publish sends one message per entry, delayed until its due time, and
// returns the entries SQS did not take (or whose publish ctx ended): the
// caller gives those back to the calendar (ledger Release), for the
// enqueue's cursor to publish.
func (h *HandOff) Publish(ctx context.Context, entries []ledger.IndexEntry) (failed []ledger.IndexEntry) {
	failed, _ = h.pub.publish(ctx, entries)
	return failed
}
