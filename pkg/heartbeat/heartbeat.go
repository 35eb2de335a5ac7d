package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/pkg/clock"
)

// ErrLost is the cause of a record's context cancellation when its
// visibility could not be extended.
var ErrLost = errors.New("heartbeat: could not extend the message's visibility; another consumer may receive it")

// VisibilityAPI is the part of the SQS client the heartbeat uses.
type VisibilityAPI interface {
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

var _ VisibilityAPI = (*sqs.Client)(nil)

// Config configures a Heartbeat.
type Config struct {
	// Visibility extends visibility. Required.
	Visibility VisibilityAPI
	// Extension is the visibility set at each beat, counted from the beat.
	// Default 60s.
	Extension time.Duration
	// Threshold is how long a record runs before the first beat. Default
	// Extension/3.
	Threshold time.Duration
	// Interval is the time between beats; it must be below Extension.
	// Default Extension/3.
	Interval time.Duration
	// Clock tells the time and waits. Default clock.Real.
	Clock clock.Clock
	// Logger receives a line per beat that fails. Default slog.Default().
	Logger *slog.Logger
}

// Heartbeat extends the visibility of records in flight.
type Heartbeat struct{ cfg Config }

// New validates cfg and applies its defaults.
func New(cfg Config) (*Heartbeat, error) {
	if cfg.Visibility == nil {
		return nil, errors.New("heartbeat: Visibility is nil; pass an SQS client")
	}
	if cfg.Extension == 0 {
		cfg.Extension = 60 * time.Second
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = cfg.Extension / 3
	}
	if cfg.Interval == 0 {
		cfg.Interval = cfg.Extension / 3
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case cfg.Extension < time.Second || cfg.Extension > 12*time.Hour:
		return nil, fmt.Errorf("heartbeat: extension %v is outside SQS's 1s to 12h", cfg.Extension)
	case cfg.Interval <= 0 || cfg.Interval >= cfg.Extension:
		return nil, fmt.Errorf("heartbeat: interval %v must be positive and below the extension %v, or the message becomes visible between beats", cfg.Interval, cfg.Extension)
	case cfg.Threshold < 0:
		return nil, fmt.Errorf("heartbeat: threshold %v is negative", cfg.Threshold)
	}
	return &Heartbeat{cfg: cfg}, nil
}

// Start begins watching one record. It returns a context derived from ctx
// that is cancelled with cause ErrLost if an extension fails, and a stop
// function to call when the work is done. Stop waits for a beat in progress.
func (h *Heartbeat) Start(ctx context.Context, queueURL, receiptHandle string) (context.Context, func()) {
	rctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		wait := h.cfg.Threshold
		for {
			select {
			case <-done:
				return
			case <-rctx.Done():
				return
			case <-h.cfg.Clock.After(wait):
			}
			_, err := h.cfg.Visibility.ChangeMessageVisibility(rctx, &sqs.ChangeMessageVisibilityInput{
				QueueUrl:          aws.String(queueURL),
				ReceiptHandle:     aws.String(receiptHandle),
				VisibilityTimeout: int32(h.cfg.Extension / time.Second),
			})
			if err != nil {
				select {
				case <-done: // the work finished while the call was in flight
					return
				default:
				}
				h.cfg.Logger.Warn("visibility extension failed; stopping the record", "error", err.Error())
				cancel(fmt.Errorf("%w: %v", ErrLost, err))
				return
			}
			wait = h.cfg.Interval
		}
	}()
	return rctx, func() {
		close(done)
		<-finished
		cancel(nil)
	}
}
