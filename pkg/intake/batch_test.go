package intake_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// TestEveryIDTheBatchTakesIsReachable: an id the batch (or a PUT) accepts
// is one every route reaches: "." and ".." are path segments, which the
// router refuses, so they are refused as ids, with the fix.
func TestEveryIDTheBatchTakesIsReachable(t *testing.T) {
	f := setup(t)
	for _, id := range []string{".", "..", "...", ".a", "a.", "-", "_", "a..b"} {
		r := reminder(id)
		r["id"] = id
		a := f.json("POST", "/v1/reminders", map[string]any{"reminders": []any{r}})
		var res intake.BatchResult
		if err := json.Unmarshal(a.body, &res); a.status != 200 || err != nil || len(res.Results) != 1 {
			t.Fatalf("batch of %q: %d %s", id, a.status, a.body)
		}
		got := res.Results[0]
		if id == "." || id == ".." {
			if got.Status != 400 || got.Problem == nil || got.Problem.Field != "id" || !strings.Contains(got.Problem.Detail, "path segment") {
				t.Errorf("batch of id %q: %+v; want 400 naming the id", id, got)
			}
			continue
		}
		if got.Status != 201 {
			t.Errorf("batch of id %q: %+v", id, got)
			continue
		}
		if a := f.do("GET", "/v1/reminders/"+id, "", nil); a.status != 200 {
			t.Errorf("GET of %q, which the batch created: %d %s", id, a.status, a.body)
		}
		if a := f.do("DELETE", "/v1/reminders/"+id, "", nil); a.status != 200 {
			t.Errorf("DELETE of %q, which the batch created: %d %s", id, a.status, a.body)
		}
	}
}

func TestBatchAnswersEachReminder(t *testing.T) {
	f := setup(t)
	f.json("PUT", "/v1/reminders/rem-old", reminder(""))
	mk := func(id string) map[string]any {
		r := reminder("")
		r["id"] = id
		return r
	}
	bad := mk("rem-bad")
	bad["deliveries"] = []map[string]string{{"channel": "pigeon", "provider": "webhook", "recipientRef": "r", "templateRef": "t"}}
	a := f.json("POST", "/v1/reminders", map[string]any{"reminders": []any{mk("rem-new"), mk("rem-old"), bad, mk("rem-new"), mk("rem-x y")}})
	var res intake.BatchResult
	if err := json.Unmarshal(a.body, &res); a.status != 200 || err != nil || len(res.Results) != 5 {
		t.Fatalf("batch: %d %s", a.status, a.body)
	}
	want := []struct {
		id     string
		status int
		field  string
	}{{"rem-new", 201, ""}, {"rem-old", 200, ""}, {"rem-bad", 400, "deliveries[0].channel"}, {"rem-new", 400, "id"}, {"rem-x y", 400, "id"}}
	for i, w := range want {
		got := res.Results[i]
		if got.ID != w.id || got.Status != w.status || (got.Problem != nil) != (w.status >= 400) || got.Problem != nil && got.Problem.Field != w.field {
			t.Errorf("result %d: %+v (problem %+v); want %+v", i, got, got.Problem, w)
		}
	}
}

// slowStore writes each reminder after a pause, or not at all if the
// request's context ends first.
type slowStore struct {
	intake.Store
	pause time.Duration
}

func (s slowStore) CreateAs(ctx context.Context, c schedule.Caller, r schedule.Reminder) (schedule.Outcome, error) {
	select {
	case <-time.After(s.pause):
		return s.Store.CreateAs(ctx, c, r)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// TestABatchAnswersBeforeTheFunctionsDeadline: what the deadline leaves
// unwritten is answered 503 (send it again), and the answer is written
// before the invocation would end.
func TestABatchAnswersBeforeTheFunctionsDeadline(t *testing.T) {
	clk := clock.NewFake(now)
	led, _ := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
	store, _ := schedule.New(schedule.Config{Ledger: led, Clock: clk})
	h, err := intake.New(intake.Config{Store: slowStore{Store: store, pause: 100 * time.Millisecond}, BatchConcurrency: 1, Margin: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var rs []map[string]any
	for i := range 8 {
		r := reminder("")
		r["id"] = fmt.Sprintf("rem-%d", i)
		rs = append(rs, r)
	}
	body, _ := json.Marshal(map[string]any{"reminders": rs})
	deadline := time.Now().Add(500 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	res, err := intake.FunctionURL(h, nil)(ctx, events.LambdaFunctionURLRequest{RawPath: "/v1/reminders", Body: string(body),
		Headers: map[string]string{"content-type": "application/json"}, RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST"}}})
	if err != nil || time.Now().After(deadline) {
		t.Fatalf("answered at %v (deadline %v): %v", time.Now(), deadline, err)
	}
	var out intake.BatchResult
	if err := json.Unmarshal([]byte(res.Body), &out); err != nil || len(out.Results) != 8 {
		t.Fatalf("%d %s", res.StatusCode, res.Body)
	}
	created, later := 0, 0
	for i, r := range out.Results {
		switch {
		case r.Status == 201:
			created++
		case r.Status == 503 && r.Problem != nil && r.Problem.Type == intake.ProblemUnavailable && r.ID == fmt.Sprintf("rem-%d", i):
			later++
		default:
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if created == 0 || later == 0 || created+later != 8 {
		t.Errorf("%d created, %d to send again; want some of each", created, later)
	}
	for i, r := range out.Results {
		stored, _ := led.ReadReminder(context.Background(), fmt.Sprintf("rem-%d", i))
		if (r.Status == 201) != !stored.Empty() {
			t.Errorf("rem-%d answered %d but stored: %v", i, r.Status, !stored.Empty())
		}
	}
}
