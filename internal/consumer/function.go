package consumer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/clock"
)

// FunctionConfig configures the consumer Lambda's handler.
type FunctionConfig struct {
	// Processor runs the Consumer over the event. Required.
	Processor *batch.Processor
	// Metrics is the recorder the Consumer counts into, flushed after each
	// invocation. Required.
	Metrics *metrics.Recorder
	// MetricsOut receives the EMF line. Default os.Stdout.
	MetricsOut io.Writer
	// Logger receives the batch line. Default slog.Default().
	Logger *slog.Logger
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
}

// Function is the consumer Lambda's handler: it runs the batch processor
// over the event, then writes the invocation's metrics (one EMF line) and a
// summary log line.
type Function struct{ cfg FunctionConfig }

// NewFunction validates cfg and applies its defaults.
func NewFunction(cfg FunctionConfig) (*Function, error) {
	if cfg.Processor == nil {
		return nil, errors.New("consumer: FunctionConfig.Processor is nil")
	}
	if cfg.Metrics == nil {
		return nil, errors.New("consumer: FunctionConfig.Metrics is nil; pass the recorder the Consumer counts into")
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

// Handle processes one decoded SQS event; Invoke decodes and checks the
// payload first.
func (f *Function) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	rep := f.cfg.Processor.Run(ctx, ev)
	resp := rep.Response()
	if n := rep.Count(batch.Unstarted); n > 0 {
		f.cfg.Metrics.Add(MetricUnstarted, float64(n))
	}
	f.cfg.Logger.Info("batch", "records", len(ev.Records), "succeeded", rep.Count(batch.Succeeded), "failed", rep.Count(batch.Failed),
		"unstarted", rep.Count(batch.Unstarted), "skipped", rep.Count(batch.Skipped), "batchItemFailures", len(resp.BatchItemFailures))
	if err := f.cfg.Metrics.Flush(f.cfg.MetricsOut, f.cfg.Clock.Now()); err != nil {
		f.cfg.Logger.Warn("could not write metrics", "error", err.Error())
	}
	return resp, nil
}
