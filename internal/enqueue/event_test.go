package enqueue_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/enqueue"
)

// TestSampleEventsDecode decodes every file in events/: the schedule events
// are ticks, and the SQS events are refused with a message that says why.
func TestSampleEventsDecode(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../events/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no events: %v", err)
	}
	want := map[string]enqueue.Tick{
		"scheduled.json": {Source: "aws.events", ID: "5f3c9a1e-2b7d-4c8e-9a61-0d4e8b7f2c13", ScheduledAt: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)},
		"scheduler.json": {Source: "aws.scheduler", ID: "0b2c6f4e-8d1a-4f3b-a7e9-5c2d1e0f9a84", ScheduledAt: time.Date(2026, 11, 30, 9, 1, 0, 0, time.UTC)},
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		tick, err := enqueue.DecodeTick(raw)
		if w, ok := want[name]; ok {
			if err != nil || tick != w {
				t.Errorf("%s: %+v, %v; want %+v", name, tick, err, w)
			}
			continue
		}
		if strings.HasPrefix(name, "outcome-") { // an outcome event Nudge publishes: not a tick
			if err == nil || !strings.Contains(err.Error(), "not a schedule tick") {
				t.Errorf("%s: an outcome event gave %+v, %v; want a refusal", name, tick, err)
			}
			continue
		}
		if !strings.HasPrefix(name, "sqs-") {
			t.Errorf("%s has no expectation in this test; add one", name)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "schedule events") {
			t.Errorf("%s: an SQS event gave %+v, %v; want a refusal naming schedule events", name, tick, err)
		}
	}
}

func TestDecodeTickShapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, source, err string
	}{
		{``, "manual", ""},
		{`{}`, "manual", ""},
		{`null`, "manual", ""},
		{`{"scheduledTime":"2026-11-30T09:00:00Z"}`, "aws.scheduler", ""},
		{`{"source":"aws.scheduler","scheduledTime":"<aws.scheduler.scheduled-time>"}`, "", "not RFC 3339"},
		{`{"source":"aws.s3","detail-type":"Object Created"}`, "", "not a schedule tick"},
		{`[1,2]`, "", "not a JSON object"},
		{`{"source":"aws.events","detail-type":"Scheduled Event","time":"yesterday"}`, "", "not RFC 3339"},
	} {
		tick, err := enqueue.DecodeTick([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %+v, %v; want an error with %q", tc.in, tick, err, tc.err)
			}
			continue
		}
		if err != nil || tick.Source != tc.source {
			t.Errorf("%s: %+v, %v; want source %q", tc.in, tick, err, tc.source)
		}
	}
}

func TestReportIsWrittenInSeconds(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(enqueue.Report{Enqueued: 3, OldestOverdue: 90 * time.Second, Lag: 1500 * time.Millisecond, Caught: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"enqueued":3`, `"oldestOverdueSeconds":90`, `"lagSeconds":1.5`, `"caughtUp":true`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report JSON %s lacks %s", b, want)
		}
	}
}
