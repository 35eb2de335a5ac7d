package enqueue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Tick is one scheduled invocation of the enqueue.
type Tick struct {
	// Source is "aws.scheduler" (EventBridge Scheduler with Nudge's input
	// template), "aws.events" (a classic scheduled rule) or "manual" (an
	// empty object, as from a console test).
	Source string
	// ID identifies the invocation (execution id or event id), if known.
	ID string
	// ScheduledAt is when the schedule fired, if known.
	ScheduledAt time.Time
}

// tickWire holds every field either shape may carry.
type tickWire struct {
	// EventBridge Scheduler, with the input template the stack sets:
	// {"source":"aws.scheduler","scheduledTime":"<aws.scheduler.scheduled-time>",
	//  "executionId":"<aws.scheduler.execution-id>"}
	ScheduledTime string `json:"scheduledTime"`
	ExecutionID   string `json:"executionId"`
	// Classic scheduled rule.
	DetailType string `json:"detail-type"`
	Time       string `json:"time"`
	ID         string `json:"id"`
	// Both.
	Source string `json:"source"`
	// Another service's event, for a clear refusal.
	Records json.RawMessage `json:"Records"`
}

// DecodeTick reads a schedule event. It refuses anything else (an SQS
// event sent here by mistake, say) with an error saying what it expected.
func DecodeTick(raw []byte) (Tick, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return Tick{Source: "manual"}, nil
	}
	var w tickWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return Tick{}, fmt.Errorf("enqueue: the event is not a JSON object (%v); the enqueue takes EventBridge schedule events", err)
	}
	parse := func(s string) (time.Time, error) {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("enqueue: schedule event time %q is not RFC 3339", s)
		}
		return t.UTC(), nil
	}
	switch {
	case len(w.Records) > 0:
		return Tick{}, fmt.Errorf("enqueue: got an event with Records (SQS, SNS or S3?); the enqueue takes EventBridge schedule events — check the function's triggers")
	case w.Source == "aws.events" && w.DetailType == "Scheduled Event":
		at, err := parse(w.Time)
		return Tick{Source: w.Source, ID: w.ID, ScheduledAt: at}, err
	case w.Source == "aws.scheduler" || w.ScheduledTime != "":
		at, err := parse(w.ScheduledTime)
		return Tick{Source: "aws.scheduler", ID: w.ExecutionID, ScheduledAt: at}, err
	case w.Source == "" && w.DetailType == "" && w.ID == "":
		return Tick{Source: "manual"}, nil
	}
	return Tick{}, fmt.Errorf("enqueue: event from source %q with detail-type %q is not a schedule tick; the enqueue takes EventBridge Scheduler or scheduled-rule events", w.Source, w.DetailType)
}
