package feedback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/internal/provider/ses"
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
	// MetricProbe counts events of the consumers' probes (Event.Probe):
	// they move the feedback mark and touch no delivery.
	MetricProbe = "FeedbackProbeReported"
	// MetricIgnored counts events that are not this stage's sending events
	// (ErrNotOurs).
	MetricIgnored = "FeedbackIgnored"
	// MetricUndecodable counts events that could not be read (ErrMalformed).
	MetricUndecodable = "FeedbackUndecodable"
	// MetricRetried counts events left on the queue because the ledger
	// failed (throttling, 5xx), by ErrorClass.
	MetricRetried = "FeedbackRetried"
	// MetricRedundant counts Send events of a delivery recorded sent with
	// that message: nothing to add, no write (ledger.ErrFeedbackRedundant).
	MetricRedundant = "FeedbackRedundant"
	// MetricSettled counts deliveries ended as ambiguous (dead-lettered,
	// or expired or cancelled after an attempt that may have been sent)
	// that an event of SES's showed accepted: recorded sent
	// (ledger.SettleSent).
	MetricSettled = "FeedbackSettled"
	// MetricMarkFailed counts feedback marks the ledger failed to write
	// (RecordFeedbackMark): while it fails, the consumer sees no later
	// e-mail reported and sends nothing again; ambiguous sends wait up to
	// their longest wait and go to review.
	MetricMarkFailed = "FeedbackMarkFailed"
)

// MarkEvery is how often a container writes the feedback mark at most
// while events keep coming: a mark less than this newer than the one it
// wrote last is not written, so a busy stream costs at most one write per
// MarkEvery per container (12 a minute). It is below the shortest record
// window (the local system's 10 s), so that the mark a consumer reads
// lags SES's reports by less than a window.
const MarkEvery = 5 * time.Second

// Recorder is what the handler does with the ledger: record an event's
// feedback on its delivery, settle sent a delivery ended as ambiguous that
// SES reports, and mark how far SES's reports have come
// (*ledger.Ledger, *ledger.Memory).
type Recorder interface {
	RecordFeedback(ctx context.Context, key message.DeliveryKey, f ledger.Feedback) (ledger.Delivery, error)
	SettleSent(ctx context.Context, d ledger.Delivery, receipt, note string) (ledger.Delivery, error)
	RecordFeedbackMark(ctx context.Context, provider string, at time.Time) error
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

	mu      sync.Mutex
	latest  time.Time // the latest e-mail SES accepted of this invocation's events handled
	written time.Time // the mark this container wrote last
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
	f.mu.Lock()
	f.latest = time.Time{}
	f.mu.Unlock()
	rep := f.proc.Run(ctx, ev)
	resp := rep.Response()
	if len(resp.BatchItemFailures) == 0 {
		f.mark(ctx)
	} else {
		// A record left on the queue may be the report of an e-mail
		// accepted before the latest handled: a mark past it would tell
		// the consumer that the path is working while that report waits,
		// and the consumer would send that e-mail again.
		f.cfg.Logger.Debug("feedback mark not written: records of the batch are retried", "retried", len(resp.BatchItemFailures))
	}
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
	if e.Probe {
		// A consumer's probe: its report moves the feedback mark, which
		// is all it is for.
		m.Add(MetricProbe, 1)
		log.Info("probe reported", "probeKey", e.Key.String(), "feedback", string(e.Feedback.Kind), "accepted", ledger.Format(e.Accepted))
		f.handled(e)
		return nil
	}
	d, err := f.cfg.Ledger.RecordFeedback(ctx, e.Key, e.Feedback)
	var re *ledger.RefusedError
	switch {
	case err == nil:
		m.AddBy(MetricRecorded, 1, map[string]string{"Kind": string(e.Feedback.Kind)})
		log.Info("feedback recorded", "deliveryKey", e.Key.String(), "feedback", string(e.Feedback.Kind), "detail", e.Feedback.Detail,
			"at", ledger.Format(e.Feedback.At), "status", string(d.Status), "standing", string(d.Feedback.Kind), "failed", d.Failed())
		return f.settle(ctx, log, e, d)
	case errors.Is(err, ledger.ErrFeedbackRedundant):
		m.Add(MetricRedundant, 1)
		f.handled(e)
		return nil
	case errors.Is(err, ledger.ErrFeedbackSeen) && errors.As(err, &re):
		m.Add(MetricRepeated, 1)
		log.Info("feedback repeated; recorded before", "deliveryKey", e.Key.String(), "feedback", string(e.Feedback.Kind))
		// A settlement that failed before is tried again.
		return f.settle(ctx, log, e, re.Current)
	case errors.Is(err, ledger.ErrNotFound):
		// Purged, deleted by its TTL, or never the ledger's: the message
		// id alone, which is all an operator needs to look it up in SES.
		m.Add(MetricUnmatched, 1)
		log.Warn("feedback for a delivery the ledger does not hold", "feedback", string(e.Feedback.Kind))
		f.handled(e)
		return nil
	}
	return f.retried(log, e, err)
}

// settle records sent a delivery ended as ambiguous (ledger
// EndedAmbiguous): an ambiguous send reviewed, or that waited for SES's
// record longer than its longest wait (dead), or one expired or cancelled
// after an attempt that may have been sent. Any event of SES's says SES
// accepted the e-mail. A later redrive of its DLQ copy then finds it sent.
func (f *Function) settle(ctx context.Context, log *slog.Logger, e Event, d ledger.Delivery) error {
	if !d.EndedAmbiguous() {
		f.handled(e)
		return nil
	}
	_, err := f.cfg.Ledger.SettleSent(ctx, d, e.MessageID, "sent, by "+ses.Driver.Contract.Reports.Record)
	switch {
	case err == nil:
		f.cfg.Metrics.Add(MetricSettled, 1)
		log.Info("ended as ambiguous, settled sent by SES's record", "deliveryKey", e.Key.String(), "was", string(d.Status),
			"feedback", string(e.Feedback.Kind))
	case errors.Is(err, ledger.ErrAlreadySent), errors.Is(err, ledger.ErrNotAmbiguous), errors.Is(err, ledger.ErrNotFound):
		// Settled, or redriven, meanwhile.
	default:
		return f.retried(log, e, err)
	}
	f.handled(e)
	return nil
}

// handled notes that e's record is done, for the feedback mark.
func (f *Function) handled(e Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.Accepted.After(f.latest) {
		f.latest = e.Accepted
	}
}

// mark writes the latest time at which SES accepted an e-mail whose event
// this invocation handled, unless this container wrote one less than
// MarkEvery older. Handle calls it only for a batch with no record left on
// the queue. A failure is counted (MetricMarkFailed) and logged: the next
// invocation writes it.
func (f *Function) mark(ctx context.Context) {
	f.mu.Lock()
	at, written := f.latest, f.written
	f.mu.Unlock()
	if at.IsZero() || !written.IsZero() && at.Sub(written) < MarkEvery {
		return
	}
	if err := f.cfg.Ledger.RecordFeedbackMark(ctx, ses.Name, at); err != nil {
		f.cfg.Metrics.Add(MetricMarkFailed, 1)
		f.cfg.Logger.Warn("cannot record the feedback mark", "at", ledger.Format(at), "error", err.Error())
		return
	}
	f.mu.Lock()
	f.written = at
	f.mu.Unlock()
}

// retried counts and logs a record left on the queue for a ledger failure.
func (f *Function) retried(log *slog.Logger, e Event, err error) error {
	m := f.cfg.Metrics
	class := awsfailure.Default.Classify(err).Class
	m.AddBy(MetricRetried, 1, map[string]string{"ErrorClass": string(class)})
	log.Warn("feedback not recorded; the record is retried", "deliveryKey", e.Key.String(), "class", string(class), "error", err.Error())
	return err
}
