package outcome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/pkg/clock"
)

// MaxEntries is the most entries one PutEvents call takes.
const MaxEntries = 10

// EventsAPI is the part of the EventBridge client the function uses.
type EventsAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Config configures the outcomes function.
type Config struct {
	// Events puts the events. Required.
	Events EventsAPI
	// Bus is the event bus's name or ARN ("default" for the account's
	// default bus). Required.
	Bus string
	// Stage is named in every event's detail. Optional.
	Stage string
	// Attempts is how many times, within one invocation, an entry that
	// failed is put again before the record is reported failed (and the
	// stream mapping retries it). Default 3.
	Attempts int
	// Backoff is the pause before the second attempt, doubled before each
	// later one. Default 100ms.
	Backoff time.Duration
	// Metrics receives the counters, flushed after each invocation as one
	// EMF line to MetricsOut (default os.Stdout). Default: a recorder of
	// its own, Function "outcomes".
	Metrics    *metrics.Recorder
	MetricsOut io.Writer
	// Clock tells the time and waits. Default clock.Real.
	Clock clock.Clock
	// Logger receives a line per event put and per failure. Default
	// slog.Default().
	Logger *slog.Logger
}

// Function is the outcomes Lambda's handler: the ledger's stream in,
// outcome events out.
type Function struct{ cfg Config }

// NewFunction validates cfg and applies its defaults.
func NewFunction(cfg Config) (*Function, error) {
	if cfg.Events == nil {
		return nil, errors.New("outcome: Config.Events is nil; pass an EventBridge client")
	}
	if cfg.Bus == "" {
		return nil, errors.New("outcome: no event bus; set NUDGE_EVENT_BUS to the bus's name or ARN, or default")
	}
	if cfg.Attempts < 0 || cfg.Backoff < 0 {
		return nil, fmt.Errorf("outcome: Attempts %d and Backoff %s must not be negative", cfg.Attempts, cfg.Backoff)
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = 3
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(map[string]string{"Function": "outcomes"})
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
	return &Function{cfg: cfg}, nil
}

// pending is an event to put and the stream record it came from.
type pending struct {
	seq   string
	event Event
}

// Handle derives the outcome events of a batch of stream records and puts
// them on the bus, in the records' order. An entry the bus refuses is put
// again (Config.Attempts); one that still fails ends the invocation with
// that record reported failed, so that the mapping retries the batch from
// it (the records before it are done; the events of the records after it
// are put again then, with the same eventIds). A record whose new image
// does not decode as a delivery is logged, counted (Undecodable, alarmed)
// and reported failed the same way, the events before it put: skipping it
// would lose its event, and a newer function (deployed) reads it.
func (f *Function) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var todo []pending
	var resp events.DynamoDBEventResponse
	for _, r := range ev.Records {
		e, ok, err := f.derive(r)
		if err != nil {
			// Not skipped: its event would be lost. The mapping retries
			// from it (a newer function, deployed, reads it) until the
			// record's age gives it up to the outcomes DLQ; the alarm on
			// Undecodable says so at once.
			f.cfg.Logger.Error("stream record is not a delivery the outcomes function reads; retried from it", "eventID", r.EventID,
				"sequenceNumber", r.Change.SequenceNumber, "error", err.Error())
			f.cfg.Metrics.Add("Undecodable", 1)
			resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: r.Change.SequenceNumber}}
			break
		}
		if ok {
			todo = append(todo, pending{seq: r.Change.SequenceNumber, event: e})
		}
	}
	failedAt := resp.BatchItemFailures
	resp.BatchItemFailures = nil
	for len(todo) > 0 {
		n := min(len(todo), MaxEntries)
		if failed := f.put(ctx, todo[:n]); failed != "" {
			resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: failed}}
			break
		}
		todo = todo[n:]
	}
	if len(resp.BatchItemFailures) == 0 {
		resp.BatchItemFailures = failedAt // everything before the undecodable record is put
	}
	if err := f.cfg.Metrics.Flush(f.cfg.MetricsOut, f.cfg.Clock.Now()); err != nil {
		f.cfg.Logger.Warn("cannot write metrics", "error", err.Error())
	}
	return resp, nil
}

// derive returns the outcome event of stream record r, if it has one.
func (f *Function) derive(r events.DynamoDBEventRecord) (Event, bool, error) {
	if events.DynamoDBOperationType(r.EventName) == events.DynamoDBOperationTypeRemove {
		return Event{}, false, nil // retention or purge: no outcome
	}
	newAV, err := attributes(r.Change.NewImage)
	if err != nil {
		return Event{}, false, err
	}
	d, ok, err := ledger.DeliveryOfImage(newAV)
	if err != nil || !ok {
		return Event{}, false, err
	}
	// An old image that does not decode (written by a newer version) does
	// not hide the change: it is read as a new item, which still gives an
	// end its event (a report needs the old image, and is retried).
	old, hadOld := ledger.Delivery{}, false
	if oldAV, err := attributes(r.Change.OldImage); err == nil {
		if old, hadOld, err = ledger.DeliveryOfImage(oldAV); err != nil {
			old, hadOld = ledger.Delivery{}, false
		}
	}
	e, ok := Of(old, hadOld, d, f.cfg.Stage)
	return e, ok, nil
}

// put puts batch (at most MaxEntries), each entry up to Config.Attempts
// times, and returns the sequence number of the first record whose event
// could not be put, or "" if every one was.
func (f *Function) put(ctx context.Context, batch []pending) string {
	left := batch
	wait := f.cfg.Backoff
	for attempt := 1; ; attempt++ {
		entries := make([]ebtypes.PutEventsRequestEntry, len(left))
		for i, p := range left {
			entries[i] = f.entry(p.event)
		}
		out, err := f.cfg.Events.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
		var failed []pending
		switch {
		case err != nil:
			failed = left
			f.cfg.Logger.Warn("PutEvents failed", "attempt", attempt, "entries", len(left), "error", err.Error())
		case len(out.Entries) != len(left):
			failed = left // EventBridge answers one result per entry, in order; anything else is not trusted
			f.cfg.Logger.Warn("PutEvents answered the wrong number of results", "attempt", attempt, "entries", len(left), "results", len(out.Entries))
		default:
			for i, res := range out.Entries {
				if res.ErrorCode == nil && res.EventId != nil {
					f.published(left[i].event, aws.ToString(res.EventId))
					continue
				}
				failed = append(failed, left[i])
				f.cfg.Logger.Warn("event not put", "attempt", attempt, "eventId", left[i].event.EventID, "deliveryKey", left[i].event.DeliveryKey,
					"errorCode", aws.ToString(res.ErrorCode), "errorMessage", aws.ToString(res.ErrorMessage))
			}
		}
		if len(failed) == 0 {
			return ""
		}
		f.cfg.Metrics.Add("PutRetried", float64(len(failed)))
		if attempt >= f.cfg.Attempts || ctx.Err() != nil {
			f.cfg.Metrics.Add("PublishFailed", float64(len(failed)))
			f.cfg.Logger.Error("outcome events not put; the stream mapping retries from the first", "events", len(failed),
				"sequenceNumber", failed[0].seq, "deliveryKey", failed[0].event.DeliveryKey)
			return failed[0].seq
		}
		select {
		case <-ctx.Done():
		case <-f.cfg.Clock.After(wait):
		}
		wait *= 2
		left = failed
	}
}

// entry is e as a PutEvents entry: its detail-type, the time of the
// change, the detail.
func (f *Function) entry(e Event) ebtypes.PutEventsRequestEntry {
	detail, _ := json.Marshal(e) // strings, ints: cannot fail
	en := ebtypes.PutEventsRequestEntry{
		Source: aws.String(Source), DetailType: aws.String(e.DetailType()), Detail: aws.String(string(detail)),
		EventBusName: aws.String(f.cfg.Bus),
	}
	if t, err := time.Parse(time.RFC3339Nano, e.At); err == nil {
		en.Time = aws.Time(t)
	}
	return en
}

func (f *Function) published(e Event, busID string) {
	f.cfg.Metrics.AddBy("Published", 1, map[string]string{"Outcome": string(e.Outcome)})
	f.cfg.Logger.Info("outcome", "outcome", string(e.Outcome), "eventId", e.EventID, "busEventId", busID,
		"deliveryKey", e.DeliveryKey, "attempt", e.Attempt, "class", string(e.Class))
}
