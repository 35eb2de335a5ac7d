package demo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/local/esm"
	"github.com/nudgehq/nudge/internal/status"
)

// TestAStalledRunSaysWhere: a run that has not moved for stallAfter with
// messages in its queue says which instance holds which batch since when,
// and names the cause: an invocation past the function's timeout, records
// in flight that no instance holds, or visible ones nobody was given.
func TestAStalledRunSaysWhere(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w := &stallWatch{names: []string{"consumer-1", "consumer-2"}, visibility: 3 * time.Minute, timeout: 30 * time.Second}
	receiving := esm.PollerState{Invoker: 0, Phase: esm.Receiving, Since: t0.Add(-time.Second)}
	invoking := esm.PollerState{Invoker: 1, Phase: esm.Invoking, Since: t0.Add(-45 * time.Second), Records: []string{"m-1", "m-2"}}
	w.moved = t0.Add(-stallAfter)
	inFlight := status.Depth{InFlight: 10}
	var items, batch, old []esm.ReturnedRecord
	for i := range 10 {
		id := fmt.Sprintf("m-%d", 10+i)
		items = append(items, esm.ReturnedRecord{MessageID: id, Invoker: 1, At: t0.Add(-time.Minute), Why: esm.ItemFailure})
		batch = append(batch, esm.ReturnedRecord{MessageID: id, Invoker: 0, At: t0.Add(-2 * time.Minute), Why: esm.BatchFailed})
		old = append(old, esm.ReturnedRecord{MessageID: id, Invoker: 0, At: t0.Add(-4 * time.Minute)})
	}
	for _, c := range []struct {
		name     string
		work     status.Depth
		pollers  []esm.PollerState
		held     int
		returned []esm.ReturnedRecord
		want     []string
	}{
		{"an invocation past the timeout", status.Depth{InFlight: 2}, []esm.PollerState{receiving, invoking}, 2, nil,
			[]string{"consumer-2: invoking since 09:59:15.000 (45s) with 2 records (first m-1)", "Cause: consumer-2 has not answered an invocation within the function's timeout (30s)"}},
		{"a lost receive", inFlight, []esm.PollerState{receiving}, 0, nil,
			[]string{"10 in flight", "the mapping holds 0", "consumer-1: receiving since 09:59:59.000", "10 messages in flight that no instance holds and no invocation returned: a receive whose answer was lost"}},
		{"records left older than the visibility timeout explain nothing", inFlight, []esm.PollerState{receiving}, 0, old,
			[]string{"10 messages in flight that no instance holds and no invocation returned"}},
		{"item failures", inFlight, []esm.PollerState{receiving}, 0, items,
			[]string{"consumer-2 left 10 records to their visibility, reported as a batch item failure", "from 09:59:00.000 (first m-10, back by 10:02:00)", "Cause: the records in flight are the ones invocations left"}},
		{"a failed batch", inFlight, []esm.PollerState{receiving}, 0, batch,
			[]string{"consumer-1 left 10 records to their visibility, of a batch that failed as a whole", "Cause: the records in flight are the ones"}},
		{"visible, not given", status.Depth{Visible: 4}, []esm.PollerState{receiving}, 0, nil,
			[]string{"4 visible", "4 messages visible that the 1 instances receiving were not given"}},
	} {
		got, expected := w.report(t0, c.work, c.pollers, c.held, c.returned, []string{"2× esm: poll failed"})
		// Only records an invocation left, all due back later, are a wait
		// the run expects (it is not printed).
		if wantExpected := c.name == "item failures" || c.name == "a failed batch"; expected != wantExpected {
			t.Errorf("%s: expected %v, want %v", c.name, expected, wantExpected)
		}
		for _, want := range append(c.want, "the mapping's warnings so far, by kind: [2× esm: poll failed]") {
			if !strings.Contains(got, want) {
				t.Errorf("%s: the report %q does not say %q", c.name, got, want)
			}
		}
	}
}

// TestTheStallWatchWaitsForAStall: nothing is reported while the run moves,
// while only delayed messages wait, or before stallAfter; then once per
// stallAfter.
func TestTheStallWatchWaitsForAStall(t *testing.T) {
	t.Parallel()
	m, err := esm.New(esm.Config{Queue: &sqs.Client{}, QueueURL: "u", QueueARN: "arn:aws:sqs:us-east-1:1:q", Invokers: []esm.Invoker{esm.InvokerFunc(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	w := &stallWatch{mapping: m, names: []string{"consumer-1"}, visibility: time.Minute, timeout: 10 * time.Second}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	delayed := snapshot{work: status.Depth{Delayed: 5}, queue: 5}
	if w.observe(t0, delayed, w.capture()) != "" || w.observe(t0.Add(time.Hour), delayed, w.capture()) != "" {
		t.Fatal("reported delayed messages as a stall")
	}
	moving := snapshot{work: status.Depth{Visible: 3}, queue: 3}
	at := t0.Add(time.Hour)
	for i := range 3 {
		moving.accepted = i
		if r := w.observe(at.Add(time.Duration(i)*stallAfter), moving, w.capture()); r != "" {
			t.Fatalf("reported a moving run: %s", r)
		}
	}
	at = at.Add(2 * stallAfter) // the last move
	var reports []string
	for d := time.Duration(0); d <= 3*stallAfter; d += time.Second {
		if r := w.observe(at.Add(d), moving, w.capture()); r != "" {
			reports = append(reports, r)
		}
	}
	if len(reports) != 3 || !strings.Contains(reports[0], "unchanged for 20s") || !strings.Contains(reports[2], "unchanged for 1m0s") ||
		!strings.Contains(reports[0], "consumer-1: idle since") || w.lastReport() != reports[2] {
		t.Fatalf("reports %q", reports)
	}
}
