package enqueue

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/pkg/clock"
)

// FunctionConfig configures the enqueue Lambda's handler.
type FunctionConfig struct {
	// Enqueuer runs the hand-off. Required.
	Enqueuer *Enqueuer
	// Metrics is the recorder the Enqueuer counts into, flushed after each
	// run. Required.
	Metrics *metrics.Recorder
	// MetricsOut receives the EMF line. Default os.Stdout, where Lambda
	// sends it to CloudWatch.
	MetricsOut io.Writer
	// Logger receives the run's lines. Default slog.Default().
	Logger *slog.Logger
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
}

// Function is the enqueue Lambda's handler: one Run per schedule tick,
// then one EMF line with the run's metrics.
type Function struct{ cfg FunctionConfig }

// NewFunction validates cfg and applies its defaults.
func NewFunction(cfg FunctionConfig) (*Function, error) {
	if cfg.Enqueuer == nil {
		return nil, errors.New("enqueue: FunctionConfig.Enqueuer is nil")
	}
	if cfg.Metrics == nil {
		return nil, errors.New("enqueue: FunctionConfig.Metrics is nil; pass the recorder the Enqueuer counts into")
	}
	if cfg.MetricsOut == nil {
		cfg.MetricsOut = os.Stdout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Function{cfg: cfg}, nil
}

// Handle runs the enqueue for one schedule event and returns its report.
// An error fails the invocation: the Errors alarm sees it, and the failed
// tick goes to the function's on-failure destination (the schedule DLQ).
// Nothing retries it: the next tick, a minute later, is the retry.
func (f *Function) Handle(ctx context.Context, raw json.RawMessage) (Report, error) {
	tick, err := DecodeTick(raw)
	if err != nil {
		f.cfg.Logger.Error("not a schedule event", "error", err.Error())
		return Report{}, err
	}
	log := f.cfg.Logger.With("tick", tick.ID, "source", tick.Source)
	if !tick.ScheduledAt.IsZero() {
		log = log.With("scheduledAt", tick.ScheduledAt.Format("2006-01-02T15:04:05Z"), "startDelayMs", f.cfg.Clock.Now().Sub(tick.ScheduledAt).Milliseconds())
	}
	rep, err := f.cfg.Enqueuer.Run(ctx)
	if err != nil {
		log.Error("enqueue run failed", "error", err.Error())
	}
	if ferr := f.cfg.Metrics.Flush(f.cfg.MetricsOut, f.cfg.Clock.Now()); ferr != nil {
		log.Warn("cannot write metrics", "error", ferr.Error())
	}
	return rep, err
}
