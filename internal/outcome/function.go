package outcome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

// MaxEntries is the most entries one PutEvents call takes.
const MaxEntries = 10

// EventsAPI is the part of the EventBridge client the function uses.
type EventsAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// FallbackTaker is what the function does with the ledger: take a
// delivery's fallback when it fails (*ledger.Ledger, *ledger.Memory).
type FallbackTaker interface {
	TakeFallback(ctx context.Context, primary ledger.Delivery, reason string) (ledger.Delivery, error)
}

var (
	_ FallbackTaker = (*ledger.Ledger)(nil)
	_ FallbackTaker = (*ledger.Memory)(nil)
)

// NotifyAPI is the part of the SNS client that tells the operators' topic
// of an escalation.
type NotifyAPI interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// Config configures the outcomes function.
type Config struct {
	// Events puts the events. Required.
	Events EventsAPI
	// Fallbacks takes a failed delivery's fallback. Required.
	Fallbacks FallbackTaker
	// OperatorsTopic is the SNS topic told of each escalation (its ARN);
	// Notify publishes there. Optional: "" for the escalation event alone.
	OperatorsTopic string
	Notify         NotifyAPI
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
	if cfg.Fallbacks == nil {
		return nil, errors.New("outcome: Config.Fallbacks is nil; pass the ledger (NUDGE_TABLE), where fallbacks are taken")
	}
	if cfg.OperatorsTopic != "" && cfg.Notify == nil {
		return nil, errors.New("outcome: an operators' topic without Config.Notify; pass an SNS client")
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

// Handle acts on a batch of stream records and puts their outcome events
// on the bus, in the records' order. For each record, in order: the
// fallback of a delivery that has just failed is taken (ledger.TakeFallback,
// once: a second take finds it taken), the operators' topic is told of an
// escalation, and the record's events (its end or report, and the
// escalation that follows an expiry) are queued. An entry the bus refuses
// is put again (Config.Attempts); one that still fails ends the invocation
// with that record reported failed, so that the mapping retries the batch
// from it (the records before it are done; the events of the records after
// it are put again then, with the same eventIds, and their fallbacks found
// taken). A take or a notification that fails, or a record whose new image
// does not decode as a delivery (logged, counted as Undecodable, alarmed),
// ends the batch the same way at that record, the events before it put:
// skipping it would lose its fallback or its event.
func (f *Function) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var todo []pending
	var resp events.DynamoDBEventResponse
	for _, r := range ev.Records {
		evs, err := f.act(ctx, r)
		if err != nil {
			resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: r.Change.SequenceNumber}}
			break
		}
		for _, e := range evs {
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
		resp.BatchItemFailures = failedAt // everything before the failed record is put
	}
	if err := f.cfg.Metrics.Flush(f.cfg.MetricsOut, f.cfg.Clock.Now()); err != nil {
		f.cfg.Logger.Warn("cannot write metrics", "error", err.Error())
	}
	return resp, nil
}

// act does what stream record r asks (a fallback to take, an escalation
// to notify) and returns its events; an error leaves the record to be
// retried (logged and counted here).
func (f *Function) act(ctx context.Context, r events.DynamoDBEventRecord) ([]Event, error) {
	c, err := f.change(r)
	if err != nil {
		// Not skipped: its event would be lost. The mapping retries
		// from it (a newer function, deployed, reads it) until the
		// record's age gives it up to the outcomes DLQ; the alarm on
		// Undecodable says so at once.
		f.cfg.Logger.Error("stream record is not a delivery the outcomes function reads; retried from it", "eventID", r.EventID,
			"sequenceNumber", r.Change.SequenceNumber, "error", err.Error())
		f.cfg.Metrics.Add("Undecodable", 1)
		return nil, err
	}
	if !c.ok {
		return nil, nil
	}
	if err := f.takeFallback(ctx, c); err != nil {
		return nil, err
	}
	e, ok := Of(c.old, c.hadOld, c.d, f.cfg.Stage)
	if !ok {
		return nil, nil
	}
	out := []Event{e}
	if x, ok := Escalation(e, c.d); ok {
		if err := f.notify(ctx, x); err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// takeFallback takes the fallback of c's delivery when the delivery, as
// this change left it, is due for it (ledger.Delivery.FallbackDue: an end
// or a report that failed it) and not marked taken (the take marks its
// primary, fbTaken, in the same transaction: the records after a take
// carry the mark). A fallback already taken, or cancelled, is done
// (ErrNotHeld), and so is one the ledger no longer holds (ErrNotFound:
// purged), and one whose primary is no longer as this record shows it
// (ErrPrimaryChanged: the change that moved it is a later record of the
// stream, which takes the fallback if the primary is still due for it,
// and not if it was revived or redriven).
func (f *Function) takeFallback(ctx context.Context, c change) error {
	reason, due := c.d.FallbackDue()
	if !due || !c.d.FallbackTaken.IsZero() {
		return nil
	}
	fb, err := f.cfg.Fallbacks.TakeFallback(ctx, c.d, reason)
	switch {
	case err == nil:
		f.cfg.Metrics.Add("FallbacksTaken", 1)
		f.cfg.Logger.Info("fallback taken", "deliveryKey", c.d.Key().String(), "fallback", fb.Key().String(), "reason", reason)
		return nil
	case errors.Is(err, ledger.ErrNotHeld), errors.Is(err, ledger.ErrNotFound):
		f.cfg.Metrics.Add("FallbacksFoundTaken", 1)
		return nil
	case errors.Is(err, ledger.ErrPrimaryChanged):
		f.cfg.Metrics.Add("FallbacksPrimaryChanged", 1)
		f.cfg.Logger.Info("fallback not taken: the delivery changed since this record", "deliveryKey", c.d.Key().String(), "reason", reason)
		return nil
	}
	f.cfg.Metrics.Add("FallbackFailed", 1)
	f.cfg.Logger.Error("fallback not taken; the stream mapping retries from its record", "deliveryKey", c.d.Key().String(), "error", err.Error())
	return err
}

// notify tells the operators' topic of escalation e, if the stage names
// one: a short text and e itself (ids and times, never an address). A FIFO
// topic drops a repeat (the event's id is its deduplication id); a
// standard topic may deliver one twice (a retried record): its readers
// drop repeats by eventId.
func (f *Function) notify(ctx context.Context, e Event) error {
	if f.cfg.OperatorsTopic == "" {
		return nil
	}
	detail, _ := json.Marshal(e) // strings, ints: cannot fail
	in := &sns.PublishInput{
		TopicArn: aws.String(f.cfg.OperatorsTopic),
		Subject:  aws.String(text.Clip("Nudge "+f.cfg.Stage+": "+e.DeliveryKey+" "+escalationWhat(e)+" (escalated)", 100)),
		Message:  aws.String(string(detail)),
	}
	if strings.HasSuffix(f.cfg.OperatorsTopic, ".fifo") {
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(e.ReminderID), aws.String(e.EventID)
	}
	if _, err := f.cfg.Notify.Publish(ctx, in); err != nil {
		f.cfg.Metrics.Add("EscalationNotifyFailed", 1)
		f.cfg.Logger.Error("operators' topic not told of an escalation; the stream mapping retries from its record", "deliveryKey", e.DeliveryKey,
			"eventId", e.EventID, "error", err.Error())
		return err
	}
	f.cfg.Metrics.Add("EscalationsNotified", 1)
	return nil
}

// escalationWhat says what the escalated end was: an expiry unsent, or
// one after an attempt whose outcome is unknown (needs review).
func escalationWhat(e Event) string {
	if e.Class == failure.ClassAmbiguous {
		return "expired, its last attempt's outcome unknown"
	}
	return "expired unsent"
}

// change is a stream record's change of a delivery item.
type change struct {
	old    ledger.Delivery
	hadOld bool
	d      ledger.Delivery
	ok     bool // a delivery item, not removed
}

// change reads stream record r.
func (f *Function) change(r events.DynamoDBEventRecord) (change, error) {
	if events.DynamoDBOperationType(r.EventName) == events.DynamoDBOperationTypeRemove {
		return change{}, nil // retention or purge: no outcome
	}
	newAV, err := attributes(r.Change.NewImage)
	if err != nil {
		return change{}, err
	}
	d, ok, err := ledger.DeliveryOfImage(newAV)
	if err != nil || !ok {
		return change{}, err
	}
	// An old image that does not decode (written by a newer version) does
	// not hide the change: it is read as a new item, which still gives an
	// end its event (a report needs the old image, and is retried).
	c := change{d: d, ok: true}
	if oldAV, err := attributes(r.Change.OldImage); err == nil {
		if c.old, c.hadOld, err = ledger.DeliveryOfImage(oldAV); err != nil {
			c.old, c.hadOld = ledger.Delivery{}, false
		}
	}
	return c, nil
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
