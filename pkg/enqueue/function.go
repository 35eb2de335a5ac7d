package enqueue

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/metrics"
)

// Function is the enqueue Lambda's handler: one Run per schedule tick,
// then one EMF line with the run's metrics.
type Function struct {
	Enqueuer *Enqueuer
	Metrics  *metrics.Recorder
	// MetricsOut receives the EMF line. Default os.Stdout, where Lambda
	// sends it to CloudWatch.
	MetricsOut io.Writer
	Logger     *slog.Logger
	Clock      clock.Clock
}

// Handle runs the enqueue for one schedule event and returns its report.
// An error fails the invocation: the Errors alarm sees it, and the failed
// tick goes to the function's on-failure destination (the schedule DLQ).
// Nothing retries it: the next tick, a minute later, is the retry.
func (f *Function) Handle(ctx context.Context, raw json.RawMessage) (Report, error) {
	tick, err := DecodeTick(raw)
	if err != nil {
		f.Logger.Error("not a schedule event", "error", err.Error())
		return Report{}, err
	}
	clk := f.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	log := f.Logger.With("tick", tick.ID, "source", tick.Source)
	if !tick.ScheduledAt.IsZero() {
		log = log.With("scheduledAt", tick.ScheduledAt.Format("2006-01-02T15:04:05Z"), "startDelayMs", clk.Now().Sub(tick.ScheduledAt).Milliseconds())
	}
	rep, err := f.Enqueuer.Run(ctx)
	if err != nil {
		log.Error("enqueue run failed", "error", err.Error())
	}
	out := f.MetricsOut
	if out == nil {
		out = os.Stdout
	}
	if ferr := f.Metrics.Flush(out, clk.Now()); ferr != nil {
		log.Warn("cannot write metrics", "error", ferr.Error())
	}
	return rep, err
}
