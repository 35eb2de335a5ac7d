package feedback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure/awsfailure"
)

// The metrics (namespace Nudge, dimension Function=feedback).
const (
	// MetricRecorded counts feedback recorded on a delivery, by Kind.
	MetricRecorded = "FeedbackRecorded"
	// MetricRepeated counts events recorded before (ErrFeedbackSeen).
	MetricRepeated = "FeedbackRepeated"
	// MetricUnmatched counts events of a delivery the ledger does not hold
	// (purged, deleted by its TTL).
	MetricUnmatched = "FeedbackUnmatched"
	// MetricIgnored counts events that are not this stage's sending events
	// (ErrNotOurs).
	MetricIgnored = "FeedbackIgnored"
	// MetricUndecodable counts events that could not be read (ErrMalformed).
	MetricUndecodable = "FeedbackUndecodable"
	// MetricRetried counts events left on the queue because the ledger
	// failed (throttling, 5xx), by ErrorClass.
	MetricRetried = "FeedbackRetried"
)

// Recorder is what the handler does with the ledger: record an event's
// feedback on its delivery (*ledger.Ledger, *ledger.Memory).
type Recorder interface {
	RecordFeedback(ctx context.Context, key message.DeliveryKey, f ledger.Feedback) (ledger.Delivery, error)
}

var (
	_ Recorder = (*ledger.Ledger)(nil)
	_ Recorder = (*ledger.Memory)(nil)
)

// Config configures the feedback function.
type Config struct {
	// Ledger records the feedback. Required.
	Ledger Recorder
	// Stage is the stage whose configuration set's events are recorded
	// (ses.ConfigurationSet); any other's are ignored. Required.
	Stage string
	// Concurrency is how many records of a batch run at once. Default 10.
	Concurrency int
	// Metrics receives the counters, flushed after each invocation as one
	// EMF line to MetricsOut (default os.Stdout). Default: a recorder of
	// its own, Function "feedback".
	Metrics    *metrics.Recorder
	MetricsOut io.Writer
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
	// Logger receives a line per record and per batch; never an address.
	// Default slog.Default().
	Logger *slog.Logger
}

// Function is the feedback Lambda's handler: the queue of SES's sending
// events in, each recorded on its delivery, a partial batch response out.
type Function struct {
	cfg  Config
	proc *batch.Processor
}

// NewFunction validates cfg and applies its defaults.
func NewFunction(cfg Config) (*Function, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("feedback: Config.Ledger is nil; pass the ledger (NUDGE_TABLE)")
	}
	if cfg.Stage == "" {
		return nil, errors.New("feedback: no stage; set NUDGE_STAGE_NAME to the stage whose configuration set's events are recorded")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(map[string]string{"Function": "feedback"})
	}
	if cfg.MetricsOut == nil {
		cfg.MetricsOut = os.Stdout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &Function{cfg: cfg}
	proc, err := batch.New(batch.HandlerFunc(f.HandleRecord), batch.Config{Concurrency: cfg.Concurrency, Clock: cfg.Clock, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("feedback: %w", err)
	}
	f.proc = proc
	return f, nil
}

// Handle records each record's event and returns the partial batch
// response: only the records the ledger failed on are retried.
func (f *Function) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	rep := f.proc.Run(ctx, ev)
	resp := rep.Response()
	f.cfg.Logger.Info("batch", "records", len(ev.Records), "succeeded", rep.Count(batch.Succeeded), "failed", rep.Count(batch.Failed),
		"unstarted", rep.Count(batch.Unstarted), "batchItemFailures", len(resp.BatchItemFailures))
	if err := f.cfg.Metrics.Flush(f.cfg.MetricsOut, f.cfg.Clock.Now()); err != nil {
		f.cfg.Logger.Warn("cannot write metrics", "error", err.Error())
	}
	return resp, nil
}

// HandleRecord records one record's event. It returns an error (the record
// is retried) only when the ledger failed; an event that is not this
// stage's, cannot be read, was recorded before or names a delivery the
// ledger does not hold is acknowledged, counted and logged.
func (f *Function) HandleRecord(ctx context.Context, rec events.SQSMessage) error {
	log, m := f.cfg.Logger.With("messageId", rec.MessageId), f.cfg.Metrics
	e, err := Parse([]byte(rec.Body))
	if err == nil {
		err = e.OfStage(f.cfg.Stage)
	}
	switch {
	case errors.Is(err, ErrNotOurs):
		m.Add(MetricIgnored, 1)
		log.Debug("feedback ignored", "reason", err.Error())
		return nil
	case err != nil:
		m.Add(MetricUndecodable, 1)
		log.Error("feedback undecodable; acknowledged, since no retry can read it", "error", err.Error())
		return nil
	}
	log = log.With("providerMessageId", e.MessageID)
	d, err := f.cfg.Ledger.RecordFeedback(ctx, e.Key, e.Feedback)
	switch {
	case err == nil:
		m.AddBy(MetricRecorded, 1, map[string]string{"Kind": string(e.Feedback.Kind)})
		log.Info("feedback recorded", "deliveryKey", e.Key.String(), "feedback", string(e.Feedback.Kind), "detail", e.Feedback.Detail,
			"at", ledger.Format(e.Feedback.At), "status", string(d.Status), "standing", string(d.Feedback.Kind), "failed", d.Failed())
		return nil
	case errors.Is(err, ledger.ErrFeedbackSeen):
		m.Add(MetricRepeated, 1)
		log.Info("feedback repeated; recorded before", "deliveryKey", e.Key.String(), "feedback", string(e.Feedback.Kind))
		return nil
	case errors.Is(err, ledger.ErrNotFound):
		// Purged, deleted by its TTL, or never the ledger's: the message
		// id alone, which is all an operator needs to look it up in SES.
		m.Add(MetricUnmatched, 1)
		log.Warn("feedback for a delivery the ledger does not hold", "feedback", string(e.Feedback.Kind))
		return nil
	}
	class := awsfailure.Default.Classify(err).Class
	m.AddBy(MetricRetried, 1, map[string]string{"ErrorClass": string(class)})
	log.Warn("feedback not recorded; the record is retried", "deliveryKey", e.Key.String(), "class", string(class), "error", err.Error())
	return err
}
