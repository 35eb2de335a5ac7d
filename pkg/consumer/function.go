package consumer

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/metrics"
)

// Function is the consumer Lambda's handler: it runs the batch processor
// over the event, then writes the invocation's metrics (one EMF line) and a
// summary log line.
type Function struct {
	Processor *batch.Processor
	Metrics   *metrics.Recorder
	// MetricsOut receives the EMF line. Default os.Stdout.
	MetricsOut io.Writer
	Clock      clock.Clock
	Logger     *slog.Logger
}

// Handle processes one decoded SQS event; Invoke decodes and checks the
// payload first.
func (f *Function) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	rep := f.Processor.Run(ctx, ev)
	resp := rep.Response()
	if n := rep.Count(batch.Unstarted); n > 0 {
		f.Metrics.Add(MetricUnstarted, float64(n))
	}
	out := f.MetricsOut
	if out == nil {
		out = os.Stdout
	}
	clk := f.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	log := f.logger()
	log.Info("batch", "records", len(ev.Records), "succeeded", rep.Count(batch.Succeeded), "failed", rep.Count(batch.Failed),
		"unstarted", rep.Count(batch.Unstarted), "skipped", rep.Count(batch.Skipped), "batchItemFailures", len(resp.BatchItemFailures))
	if err := f.Metrics.Flush(out, clk.Now()); err != nil {
		log.Warn("could not write metrics", "error", err.Error())
	}
	return resp, nil
}

func (f *Function) logger() *slog.Logger {
	if f.Logger == nil {
		return slog.Default()
	}
	return f.Logger
}
