package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/text"
)

// EventError is an invocation payload that is not an SQS event the consumer
// can answer for record by record. The invocation fails with it, which is
// safe: an event source mapping then returns every record to the queue, and
// nothing else sends the consumer events.
type EventError struct{ Reason string }

func (e *EventError) Error() string { return "consumer: " + e.Reason }

// DecodeEvent decodes an invocation payload as an SQS event, refusing what
// the event source mapping never sends, so that a misrouted or hand-made
// event fails loudly instead of passing as an empty batch:
//   - an empty payload, or one that is not a JSON object;
//   - an object without "Records" (an EventBridge or scheduler event, say:
//     named by its source);
//   - a record from another source than aws:sqs;
//   - a record without a messageId, which a batch item failure could not
//     name, so the record could not be kept if it failed.
//
// {"Records":[]} is a valid, empty batch. Invalid UTF-8 in a body (which
// SQS never carries) decodes as U+FFFD, and the record is dead-lettered by
// the message decoder like any malformed body. Records with the same messageId
// are the same message (the event source mapping never repeats one); the
// response names such an id once if any of them failed.
func DecodeEvent(raw []byte) (events.SQSEvent, error) {
	var ev events.SQSEvent
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" || string(trimmed) == "{}" {
		return ev, &EventError{Reason: `empty event; this function takes the SQS event of its event source mapping ({"Records":[…]}); to try it, use events/sqs-batch.json`}
	}
	if trimmed[0] != '{' {
		return ev, &EventError{Reason: fmt.Sprintf("the event is not a JSON object (it starts %q)", text.Clip(string(trimmed), 20))}
	}
	var probe struct {
		Records    json.RawMessage `json:"Records"`
		Source     string          `json:"source"`
		DetailType string          `json:"detail-type"`
	}
	if err := json.Unmarshal(trimmed, &probe); err != nil {
		return ev, &EventError{Reason: "the event is not valid JSON: " + err.Error()}
	}
	if len(probe.Records) == 0 || string(probe.Records) == "null" {
		from := "with no Records"
		if probe.Source != "" {
			from = fmt.Sprintf("from %q (%s)", probe.Source, probe.DetailType)
		}
		return ev, &EventError{Reason: "not an SQS event: an event " + from + `; the consumer takes SQS events ({"Records":[…]}), schedule events go to the enqueue function`}
	}
	if err := json.Unmarshal(trimmed, &ev); err != nil {
		return ev, &EventError{Reason: "the SQS event does not decode: " + err.Error()}
	}
	for i, r := range ev.Records {
		switch {
		case r.EventSource != "aws:sqs":
			return ev, &EventError{Reason: fmt.Sprintf("record %d comes from %q, not aws:sqs", i, r.EventSource)}
		case strings.TrimSpace(r.MessageId) == "":
			return ev, &EventError{Reason: fmt.Sprintf("record %d has no messageId, so a failure could not be reported for it; the whole batch is refused and returns to the queue", i)}
		}
	}
	return ev, nil
}

// Invoke is the function's entry point for lambda.Start: it decodes the
// payload with DecodeEvent and handles the batch. A payload DecodeEvent
// refuses fails the invocation, logged with the reason.
func (f *Function) Invoke(ctx context.Context, raw json.RawMessage) (events.SQSEventResponse, error) {
	ev, err := DecodeEvent(raw)
	if err != nil {
		f.cfg.Logger.Error("refused the event", "error", err.Error())
		return events.SQSEventResponse{}, err
	}
	return f.Handle(ctx, ev)
}
