package intake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// failingStore fails a create by the reminder's id: "boom" with an error
// nothing expects (a 500), "crash" with a panic (a 500), "busy" with
// DynamoDB's throttling (a 503).
type failingStore struct{ *schedule.Store }

func (s failingStore) CreateAs(ctx context.Context, c schedule.Caller, r schedule.Reminder) (schedule.Outcome, error) {
	switch r.ID {
	case "boom":
		return "", errors.New("AccessDeniedException: not authorized to perform dynamodb:PutItem")
	case "crash":
		panic("nil map")
	case "busy":
		return "", &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException"}
	}
	return s.Store.CreateAs(ctx, c, r)
}

// emf is what one EMF line says: its metric, value, route and the
// dimension sets it declares.
type emf struct {
	metric, route string
	value         float64
	sets          [][]string
}

// lockedBuffer is the metrics' output, shared by the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T) []emf {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []emf
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		cw := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		e := emf{route: doc["Route"].(string)}
		for _, m := range cw["Metrics"].([]any) {
			e.metric = m.(map[string]any)["Name"].(string)
			e.value = doc[e.metric].(float64)
		}
		for _, set := range cw["Dimensions"].([]any) {
			var names []string
			for _, n := range set.([]any) {
				names = append(names, n.(string))
			}
			e.sets = append(e.sets, names)
		}
		if doc["Function"] != "intake" || cw["Namespace"] != metrics.Namespace {
			t.Errorf("EMF line %s: want namespace Nudge, Function intake", line)
		}
		out = append(out, e)
	}
	return out
}

// TestEveryAnswerIsCountedByStatusClassAndRoute: the intake's own 5xx
// answers (an unexpected error, a panic, throttling) complete the
// invocation, so Lambda's Errors metric never sees them; each answer is
// counted in an EMF line instead, by status class and by the route's
// pattern, never by the path or an id.
func TestEveryAnswerIsCountedByStatusClassAndRoute(t *testing.T) {
	clk := clock.NewFake(now)
	led := memoryLedger(t, clk)
	store := newStore(t, schedule.Config{Ledger: led, Clock: clk})
	out := &lockedBuffer{}
	f := serve(t, clk, led, newHandler(t, intake.Config{Store: failingStore{store}, Metrics: metrics.New(map[string]string{"Function": "intake"}), MetricsOut: out}), nil)

	for id, want := range map[string]int{"rem-1": 201, "boom": 500, "crash": 500, "busy": 503} {
		if a := f.json("PUT", "/v1/reminders/"+id, reminder(id)); a.status != want {
			t.Fatalf("PUT %s: %d %s; want %d", id, a.status, a.body, want)
		}
	}
	if a := f.json("GET", "/v1/reminders/rem-404", nil); a.status != 404 {
		t.Fatalf("GET of an unknown reminder: %d", a.status)
	}
	if a := f.json("GET", "/v1/nowhere/rem-1", nil); a.status != 404 {
		t.Fatalf("GET of a path the API does not have: %d", a.status)
	}

	got := map[string]float64{}
	for _, e := range out.lines(t) {
		got[e.metric+" "+e.route] += e.value
		if len(e.sets) != 2 || strings.Join(e.sets[0], ",") != "Function" || strings.Join(e.sets[1], ",") != "Function,Route" {
			t.Errorf("%s declares %v; want [Function] and [Function Route]", e.metric, e.sets)
		}
		if strings.Contains(e.route, "rem-") || strings.Contains(e.route, "boom") {
			t.Errorf("a route carries the request's path or id: %q", e.route)
		}
	}
	want := map[string]float64{
		"Answered2xx PUT /v1/reminders/{id}": 1,
		"Answered5xx PUT /v1/reminders/{id}": 3,
		"Answered4xx GET /v1/reminders/{id}": 1,
		"Answered4xx unrouted":               1,
	}
	if len(got) != len(want) {
		t.Errorf("counted %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v; want %v (all: %v)", k, got[k], v, got)
		}
	}
	if intake.MetricAnswered5xx != "Answered5xx" {
		t.Errorf("the stack's alarm watches %s", intake.MetricAnswered5xx)
	}
}

// TestAFreshStageAnswers503UntilTheEnqueueRecordsTheShardCount: the intake
// takes its shard count from the registry, which only the enqueue writes.
// Before the enqueue's first run (a fresh stage) a create is answered 503
// with Retry-After and what is going on, not a bare 500; once the count is
// recorded, the same PUT completes the reminder.
func TestAFreshStageAnswers503UntilTheEnqueueRecordsTheShardCount(t *testing.T) {
	clk := clock.NewFake(now)
	enqueueLedger, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk, Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	intakeLedger, err := enqueueLedger.With(ledger.MemoryConfig{Clock: clk, ShardsFromRegistry: true})
	if err != nil {
		t.Fatal(err)
	}
	f := serve(t, clk, intakeLedger, newHandler(t, intake.Config{Store: newStore(t, schedule.Config{Ledger: intakeLedger, Clock: clk})}), nil)

	a := f.json("PUT", "/v1/reminders/rem-1", reminder("rem-1"))
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "60" {
		t.Fatalf("PUT on a fresh stage: %d %s (Retry-After %q); want 503 with Retry-After 60", a.status, a.body, a.header.Get("Retry-After"))
	}
	p := a.problem(t)
	if !strings.Contains(p.Detail, "shard count") || !strings.Contains(p.Detail, "enqueue") || !strings.Contains(p.Fix, "again") {
		t.Errorf("the problem does not say what is going on and what to do: %+v", p)
	}
	if _, err := enqueueLedger.StoredShards(context.Background()); err != nil { // the enqueue's first run
		t.Fatal(err)
	}
	if a := f.json("PUT", "/v1/reminders/rem-1", reminder("rem-1")); a.status/100 != 2 {
		t.Fatalf("the same PUT once the enqueue ran: %d %s", a.status, a.body)
	}
	if v, err := intakeLedger.ReadReminder(context.Background(), "rem-1"); err != nil || len(v.Deliveries) != 1 || v.Deliveries[0].Index == nil || v.Deliveries[0].Index.Shard >= 4 {
		t.Fatalf("the reminder after the repeat: %+v, %v; want its delivery in the calendar, on one of the registry's 4 shards", v, err)
	}
}
