package intake_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/message"
	"github.com/nudgehq/nudge/pkg/schedule"
)

var now = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// fixture is the handler over an in-memory ledger on a fake clock, behind
// a real HTTP server.
type fixture struct {
	t   *testing.T
	clk *clock.Fake
	led *ledger.Memory
	h   *intake.Handler
	srv *httptest.Server
}

func setup(t *testing.T) *fixture {
	t.Helper()
	clk := clock.NewFake(now)
	led := memoryLedger(t, clk)
	return serve(t, clk, led, newHandler(t, intake.Config{Store: newStore(t, schedule.Config{Ledger: led, Clock: clk})}), nil)
}

// memoryLedger is an empty in-memory ledger of two shards on clk.
func memoryLedger(t *testing.T, clk *clock.Fake) *ledger.Memory {
	t.Helper()
	led, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	return led
}

func newStore(t *testing.T, cfg schedule.Config) *schedule.Store {
	t.Helper()
	store, err := schedule.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func newHandler(t *testing.T, cfg intake.Config) *intake.Handler {
	t.Helper()
	h, err := intake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// serve is the fixture of h over led behind a real HTTP server, through
// wrap if it is set (one that sets the caller).
func serve(t *testing.T, clk *clock.Fake, led *ledger.Memory, h *intake.Handler, wrap func(http.Handler) http.Handler) *fixture {
	t.Helper()
	var front http.Handler = h
	if wrap != nil {
		front = wrap(h)
	}
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	return &fixture{t: t, clk: clk, led: led, h: h, srv: srv}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) problem(t *testing.T) intake.Problem {
	t.Helper()
	var p intake.Problem
	if err := json.Unmarshal(a.body, &p); err != nil || p.Status != a.status || p.Type == "" {
		t.Fatalf("answer %d %s is not a problem: %v", a.status, a.body, err)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("a problem's content type is %q", ct)
	}
	return p
}

func (f *fixture) do(method, path, contentType string, body []byte) answer {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, header: res.Header, body: b}
}

func (f *fixture) json(method, path string, v any) answer {
	f.t.Helper()
	var body []byte
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			f.t.Fatal(err)
		}
		body = b
	}
	return f.do(method, path, "application/json", body)
}

func reminder(id string) map[string]any {
	return map[string]any{
		"accountRef": "acct-1", "dueAt": now.Add(time.Hour).Format(time.RFC3339),
		"deliveries": []map[string]string{{"channel": "sms", "provider": "webhook", "recipientRef": "contact-2", "templateRef": "renewal"}},
		"metadata":   map[string]string{"plan": "gold"},
	}
}

func TestPutCreatesOnceAndNamesTheFieldOfAConflict(t *testing.T) {
	f := setup(t)
	a := f.json("PUT", "/v1/reminders/rem-1", reminder("rem-1"))
	if a.status != 201 || a.header.Get("Location") != "/v1/reminders/rem-1" {
		t.Fatalf("first PUT: %d %s (Location %q)", a.status, a.body, a.header.Get("Location"))
	}
	var c intake.Created
	if err := json.Unmarshal(a.body, &c); err != nil || c.Outcome != schedule.Created || c.Reminder == nil || c.Reminder.ID != "rem-1" {
		t.Fatalf("created answer %s", a.body)
	}
	if a := f.json("PUT", "/v1/reminders/rem-1", reminder("rem-1")); a.status != 200 || !strings.Contains(string(a.body), `"unchanged"`) {
		t.Fatalf("the same PUT again: %d %s", a.status, a.body)
	}
	changed := reminder("rem-1")
	changed["dueAt"] = now.Add(2 * time.Hour).Format(time.RFC3339)
	a = f.json("PUT", "/v1/reminders/rem-1", changed)
	if a.status != 409 {
		t.Fatalf("a different reminder under the id: %d %s", a.status, a.body)
	}
	if p := a.problem(t); p.Type != intake.ProblemConflict || p.Field != "dueAt" || !strings.Contains(p.Fix, "reschedule") {
		t.Errorf("conflict problem %+v", p)
	}
	// The id may be repeated in the body, never changed.
	withID := reminder("x")
	withID["id"] = "rem-2"
	if a := f.json("PUT", "/v1/reminders/rem-2", withID); a.status != 201 {
		t.Errorf("PUT with the path's id in the body: %d %s", a.status, a.body)
	}
	if a := f.json("PUT", "/v1/reminders/rem-3", withID); a.status != 400 || a.problem(t).Field != "id" {
		t.Errorf("PUT with another id in the body: %d %s", a.status, a.body)
	}
}

// TestBadInputIsAProblemNamingTheFieldAndTheFix: every kind of bad request
// is a 4xx problem, never a 500 or a crash.
func TestBadInputIsAProblemNamingTheFieldAndTheFix(t *testing.T) {
	f := setup(t)
	huge := reminder("x")
	huge["metadata"] = map[string]string{"note": strings.Repeat("a", schedule.MaxInputBytes)}
	hugeBody, _ := json.Marshal(huge)
	for _, tc := range []struct {
		name, method, path, contentType, body string
		status                                int
		field                                 string
	}{
		{"bad JSON", "PUT", "/v1/reminders/rem-1", "application/json", `{"accountRef": `, 400, ""},
		{"unknown field", "PUT", "/v1/reminders/rem-1", "application/json", `{"accountRef":"a","dueAt":"2026-12-01T10:00:00Z","expiresIn":"1h"}`, 400, "expiresIn"},
		{"wrong type", "PUT", "/v1/reminders/rem-1", "application/json", `{"accountRef":7}`, 400, "accountRef"},
		{"wrong type in a list", "PUT", "/v1/reminders/rem-1", "application/json", `{"accountRef":"a","deliveries":"sms"}`, 400, "deliveries"},
		{"two values", "PUT", "/v1/reminders/rem-1", "", `{} {}`, 400, ""},
		{"empty body", "PUT", "/v1/reminders/rem-1", "application/json", ``, 400, ""},
		{"not JSON", "PUT", "/v1/reminders/rem-1", "text/plain", `hello`, 415, ""},
		{"form data (curl -d without a content type)", "PUT", "/v1/reminders/rem-1", "application/x-www-form-urlencoded", `{}`, 415, ""},
		{"oversized", "PUT", "/v1/reminders/rem-1", "application/json", string(hugeBody), 413, ""},
		{"odd id: a space", "PUT", "/v1/reminders/rem%201", "application/json", `{}`, 400, "id"},
		{"odd id: a slash", "PUT", "/v1/reminders/rem%2F1", "application/json", `{}`, 400, "id"},
		{"odd id: unicode", "GET", "/v1/reminders/r%C3%A9m", "", ``, 400, "id"},
		{"odd id: too long", "DELETE", "/v1/reminders/" + strings.Repeat("a", 129), "", ``, 400, "id"},
		{"odd id: far too long to read", "GET", "/v1/reminders/" + strings.Repeat("a", 3000), "", ``, 400, "id"},
		{"odd id: control", "POST", "/v1/reminders/rem%00/reschedule", "application/json", `{"dueAt":"2026-12-02T09:00:00Z"}`, 400, "id"},
		{"a past dueAt", "PUT", "/v1/reminders/rem-1", "application/json", `{"accountRef":"a","dueAt":"2020-01-01T00:00:00Z","deliveries":[{"channel":"sms","provider":"webhook","recipientRef":"r","templateRef":"t"}]}`, 400, "expiresAt"},
		{"a GET with a body", "GET", "/v1/reminders/rem-1", "application/json", `{}`, 400, ""},
		{"reschedule: unknown field", "POST", "/v1/reminders/rem-1/reschedule", "application/json", `{"due":"2026-12-02T09:00:00Z"}`, 400, "due"},
		{"reschedule: not a time", "POST", "/v1/reminders/rem-1/reschedule", "application/json", `{"dueAt":"tomorrow"}`, 404, ""},
		{"list: no account", "GET", "/v1/reminders", "", ``, 400, "account"},
		{"list: limit 0", "GET", "/v1/reminders?account=a&limit=0", "", ``, 400, "limit"},
		{"list: limit 101", "GET", "/v1/reminders?account=a&limit=101", "", ``, 400, "limit"},
		{"list: limit not a number", "GET", "/v1/reminders?account=a&limit=ten", "", ``, 400, "limit"},
		{"list: a token not given", "GET", "/v1/reminders?account=a&next=abc", "", ``, 400, "next"},
		{"list: unknown parameter", "GET", "/v1/reminders?acount=a", "", ``, 400, "acount"},
		{"list: a parameter twice", "GET", "/v1/reminders?account=a&account=b", "", ``, 400, "account"},
		{"batch: not a list", "POST", "/v1/reminders", "application/json", `{"reminders":{}}`, 400, ""},
		{"batch: empty", "POST", "/v1/reminders", "application/json", `{"reminders":[]}`, 400, "reminders"},
		{"batch: unknown field", "POST", "/v1/reminders", "application/json", `{"items":[]}`, 400, "items"},
		{"no such path", "GET", "/v2/reminders", "", ``, 404, ""},
		{"a path not clean (no redirect)", "GET", "/v1//reminders/rem-1", "", ``, 404, ""},
		{"a path with dot segments (no redirect)", "PUT", "/v1/reminders/x/../rem-1", "application/json", `{}`, 404, ""},
		{"no such method", "PATCH", "/v1/reminders/rem-1", "application/json", `{}`, 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.do(tc.method, tc.path, tc.contentType, []byte(tc.body))
			if a.status != tc.status {
				t.Fatalf("%s %s: %d %s; want %d", tc.method, tc.path, a.status, a.body, tc.status)
			}
			p := a.problem(t)
			if p.Field != tc.field {
				t.Errorf("field %q; want %q (%+v)", p.Field, tc.field, p)
			}
			if p.Detail == "" || (p.Fix == "" && tc.status != 404) {
				t.Errorf("the problem says too little: %+v", p)
			}
		})
	}
	if a := f.do("PATCH", "/v1/reminders/rem-1", "", nil); !strings.Contains(a.header.Get("Allow"), "PUT") {
		t.Errorf("405 without Allow: %v", a.header)
	}
	var batch []map[string]any
	for i := range intake.MaxBatch + 1 {
		r := reminder("")
		r["id"] = fmt.Sprintf("rem-%d", i)
		batch = append(batch, r)
	}
	if a := f.json("POST", "/v1/reminders", map[string]any{"reminders": batch}); a.status != 400 || a.problem(t).Field != "reminders" {
		t.Errorf("a batch of %d: %d %s", len(batch), a.status, a.body)
	}
	if a := f.do("POST", "/v1/reminders", "application/json", bytes.Repeat([]byte(" "), intake.MaxBatchBytes+1)); a.status != 413 {
		t.Errorf("an oversized batch: %d %s", a.status, a.body)
	}
}

func TestGetShowsEachDeliveryWithAddressesMasked(t *testing.T) {
	f := setup(t)
	r := reminder("rem-1")
	r["deliveries"] = []map[string]string{{"channel": "email", "provider": "ses", "recipientRef": "c-2", "templateRef": "renewal", "address": "ana.silva@example.com"}}
	if a := f.json("PUT", "/v1/reminders/rem-1", r); a.status != 201 {
		t.Fatalf("PUT: %d %s", a.status, a.body)
	}
	a := f.do("GET", "/v1/reminders/rem-1", "", nil)
	if a.status != 200 || bytes.Contains(a.body, []byte("ana.silva@example.com")) {
		t.Fatalf("GET: %d %s", a.status, a.body)
	}
	var doc schedule.Document
	if err := json.Unmarshal(a.body, &doc); err != nil || doc.Reminder == nil || len(doc.Deliveries) != 1 || len(doc.History) != 1 {
		t.Fatalf("GET document %s: %v", a.body, err)
	}
	if d := doc.Deliveries[0]; d.Status != ledger.StatusPending || d.Address != ledger.MaskAddress("ana.silva@example.com") || d.HandedOff == nil {
		t.Errorf("delivery %+v", d)
	}
	if a := f.do("GET", "/v1/reminders/rem-none", "", nil); a.status != 404 || a.problem(t).Type != intake.ProblemNotFound {
		t.Errorf("GET of no reminder: %d %s", a.status, a.body)
	}
}

// sendOne claims (and, if complete, sends) a reminder's one delivery as a
// consumer would.
func (f *fixture) sendOne(id string, complete bool) ledger.Delivery {
	f.t.Helper()
	key := message.DeliveryKey{ReminderID: id, Channel: "sms", Provider: "webhook"}
	d, err := f.led.Claim(context.Background(), ledger.Claim{Key: key, Token: "consumer", LeaseUntil: f.clk.Now().Add(time.Minute), DueBy: f.clk.Now().Add(time.Second)})
	if err != nil {
		f.t.Fatal(err)
	}
	if complete {
		if d, err = f.led.Complete(context.Background(), d, "r-1"); err != nil {
			f.t.Fatal(err)
		}
	}
	return d
}

func TestCancelIsIdempotentAndNamesWhatWasSentOrInFlight(t *testing.T) {
	f := setup(t)
	for _, id := range []string{"rem-1", "rem-sent", "rem-flying"} {
		if a := f.json("PUT", "/v1/reminders/"+id, reminder(id)); a.status != 201 {
			t.Fatal(a.status, string(a.body))
		}
	}
	for range 2 { // again: still cancelled, 200
		a := f.do("DELETE", "/v1/reminders/rem-1", "", nil)
		var c intake.Changed
		if err := json.Unmarshal(a.body, &c); a.status != 200 || err != nil || len(c.Deliveries) != 1 || c.Deliveries[0].Outcome != "cancelled" {
			t.Fatalf("DELETE: %d %s", a.status, a.body)
		}
	}
	f.clk.Advance(time.Hour)
	f.sendOne("rem-sent", true)
	f.sendOne("rem-flying", false)
	a := f.do("DELETE", "/v1/reminders/rem-sent", "", nil)
	if p := a.problem(t); a.status != 409 || p.Type != intake.ProblemRefused || len(p.Deliveries) != 1 || p.Deliveries[0].Outcome != "sent" || p.Deliveries[0].At == "" {
		t.Errorf("DELETE of a sent reminder: %d %s", a.status, a.body)
	}
	a = f.do("DELETE", "/v1/reminders/rem-flying", "", nil)
	// The lease ends a minute after the claim, on the store's clock (not
	// the machine's): Retry-After counts the seconds to it, and one more.
	if p := a.problem(t); a.status != 409 || p.Deliveries[0].Outcome != "in-flight" || a.header.Get("Retry-After") != "61" {
		t.Errorf("DELETE of a reminder in flight: %d %s (Retry-After %q, want 61)", a.status, a.body, a.header.Get("Retry-After"))
	}
	if a := f.do("DELETE", "/v1/reminders/rem-none", "", nil); a.status != 404 {
		t.Errorf("DELETE of no reminder: %d %s", a.status, a.body)
	}
}

// TestACancelAfterAnUnendedAttemptSaysItMayHaveBeenSent: a consumer
// claimed the delivery and died before recording an end (maybe after the
// provider accepted); once its lease lapsed the DELETE cancels it, and
// says, then and on every repeat, that the attempt may have gone out, as
// does the history.
func TestACancelAfterAnUnendedAttemptSaysItMayHaveBeenSent(t *testing.T) {
	f := setup(t)
	if a := f.json("PUT", "/v1/reminders/rem-unended", reminder("rem-unended")); a.status != 201 {
		t.Fatal(a.status, string(a.body))
	}
	f.clk.Advance(time.Hour)
	f.sendOne("rem-unended", false) // claimed; the consumer dies
	f.clk.Advance(2 * time.Minute)  // its lease lapsed
	for i := range 2 {
		a := f.do("DELETE", "/v1/reminders/rem-unended", "", nil)
		p := a.problem(t)
		if a.status != 409 || len(p.Deliveries) != 1 || p.Deliveries[0].Outcome != "unended" || p.Deliveries[0].Status != ledger.StatusCancelled ||
			!strings.Contains(p.Detail, "may have been sent") {
			t.Fatalf("DELETE %d after an unended attempt: %d %s", i+1, a.status, a.body)
		}
	}
	d, err := f.led.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-unended", Channel: "sms", Provider: "webhook"})
	if err != nil || d.EndedUnended() != 1 || d.LastErrorClass != "ambiguous" {
		t.Fatalf("the delivery after the cancel: %+v, %v", d, err)
	}
}

// TestARefusedRescheduleChangesNothing: a reschedule of a reminder whose
// every delivery was sent is refused, and leaves the reminder as it was:
// GET shows the old dueAt, and its creator's PUT retry is unchanged, not a
// conflict on dueAt.
func TestARefusedRescheduleChangesNothing(t *testing.T) {
	f := setup(t)
	if a := f.json("PUT", "/v1/reminders/rem-done", reminder("rem-done")); a.status != 201 {
		t.Fatal(a.status, string(a.body))
	}
	f.clk.Advance(time.Hour)
	f.sendOne("rem-done", true)
	a := f.json("POST", "/v1/reminders/rem-done/reschedule", map[string]string{"dueAt": now.Add(48 * time.Hour).Format(time.RFC3339)})
	if p := a.problem(t); a.status != 409 || p.Deliveries[0].Outcome != "sent" {
		t.Fatalf("reschedule of a sent reminder: %d %s", a.status, a.body)
	}
	var doc struct {
		Reminder struct {
			DueAt time.Time `json:"dueAt"`
		} `json:"reminder"`
	}
	if a := f.do("GET", "/v1/reminders/rem-done", "", nil); a.status != 200 || json.Unmarshal(a.body, &doc) != nil || !doc.Reminder.DueAt.Equal(now.Add(time.Hour)) {
		t.Errorf("GET after the refused reschedule: %d %s; want the old dueAt", a.status, a.body)
	}
	if a := f.json("PUT", "/v1/reminders/rem-done", reminder("rem-done")); a.status != 200 {
		t.Errorf("the creator's PUT retry after the refused reschedule: %d %s; want 200 unchanged", a.status, a.body)
	}
}

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

func TestRescheduleMovesUnsentDeliveriesAndTheReminder(t *testing.T) {
	f := setup(t)
	if a := f.json("PUT", "/v1/reminders/rem-1", reminder("rem-1")); a.status != 201 {
		t.Fatal(a.status, string(a.body))
	}
	to := now.Add(48 * time.Hour)
	a := f.json("POST", "/v1/reminders/rem-1/reschedule", map[string]string{"dueAt": to.Format(time.RFC3339)})
	var c intake.Changed
	if err := json.Unmarshal(a.body, &c); a.status != 200 || err != nil || c.Deliveries[0].Outcome != "moved" {
		t.Fatalf("reschedule: %d %s", a.status, a.body)
	}
	// The reminder keeps its 24 h window; the reminder item has the new
	// times, so the old reminder PUT again is now a conflict, the new one
	// unchanged.
	if c.ExpiresAt != ledger.Format(to.Add(24*time.Hour)) {
		t.Errorf("new expiresAt %s; want dueAt + the reminder's 24 h window", c.ExpiresAt)
	}
	if a := f.json("PUT", "/v1/reminders/rem-1", reminder("rem-1")); a.status != 409 || a.problem(t).Field != "dueAt" {
		t.Errorf("PUT of the old times after a reschedule: %d %s", a.status, a.body)
	}
	moved := reminder("rem-1")
	moved["dueAt"] = to.Format(time.RFC3339)
	if a := f.json("PUT", "/v1/reminders/rem-1", moved); a.status != 200 {
		t.Errorf("PUT of the new times after a reschedule: %d %s", a.status, a.body)
	}
	// Again: unchanged.
	a = f.json("POST", "/v1/reminders/rem-1/reschedule", map[string]string{"dueAt": to.Format(time.RFC3339)})
	if a.status != 200 || !strings.Contains(string(a.body), `"unchanged"`) {
		t.Errorf("the same reschedule again: %d %s", a.status, a.body)
	}
	// Not claimable at the old time.
	f.clk.Advance(time.Hour)
	key := message.DeliveryKey{ReminderID: "rem-1", Channel: "sms", Provider: "webhook"}
	if _, err := f.led.Claim(context.Background(), ledger.Claim{Key: key, Token: "c", LeaseUntil: f.clk.Now().Add(time.Minute), DueBy: f.clk.Now()}); err == nil {
		t.Error("the delivery was claimed at its old time after the reschedule answered")
	}
	// A sent one is refused.
	if a := f.json("PUT", "/v1/reminders/rem-sent", reminder("rem-sent")); a.status != 201 {
		t.Fatal(a.status)
	}
	f.sendOne("rem-sent", true)
	a = f.json("POST", "/v1/reminders/rem-sent/reschedule", map[string]string{"dueAt": to.Format(time.RFC3339)})
	if p := a.problem(t); a.status != 409 || p.Deliveries[0].Outcome != "sent" {
		t.Errorf("reschedule of a sent reminder: %d %s", a.status, a.body)
	}
	if a := f.json("POST", "/v1/reminders/rem-none/reschedule", map[string]string{"dueAt": to.Format(time.RFC3339)}); a.status != 404 {
		t.Errorf("reschedule of no reminder: %d %s", a.status, a.body)
	}
	if a := f.json("POST", "/v1/reminders/rem-1/reschedule", map[string]string{"dueAt": "soon"}); a.status != 400 || a.problem(t).Field != "dueAt" {
		t.Errorf("reschedule to no time: %d %s", a.status, a.body)
	}
}

func TestListPagesAnAccountsRemindersWithTheirStates(t *testing.T) {
	f := setup(t)
	for i := range 5 {
		r := reminder("")
		r["dueAt"] = now.Add(time.Duration(i+1) * time.Hour).Format(time.RFC3339)
		if a := f.json("PUT", fmt.Sprintf("/v1/reminders/rem-%d", i), r); a.status != 201 {
			t.Fatal(a.status, string(a.body))
		}
	}
	other := reminder("")
	other["accountRef"] = "acct-2"
	f.json("PUT", "/v1/reminders/rem-other", other)
	f.clk.Advance(time.Hour)
	f.sendOne("rem-0", true)
	var ids []string
	next := ""
	for pages := 0; pages < 5; pages++ {
		a := f.do("GET", "/v1/reminders?account=acct-1&limit=2&next="+next, "", nil)
		var p intake.Page
		if err := json.Unmarshal(a.body, &p); a.status != 200 || err != nil || len(p.Reminders) > 2 {
			t.Fatalf("list: %d %s", a.status, a.body)
		}
		for _, r := range p.Reminders {
			ids = append(ids, r.ID)
			if r.ID == "rem-0" && (r.Deliveries[0].Status != "sent" || r.Deliveries[0].SentAt == "") {
				t.Errorf("rem-0 listed as %+v; want sent", r.Deliveries[0])
			}
		}
		if next = p.Next; next == "" {
			break
		}
	}
	if got := strings.Join(ids, " "); got != "rem-4 rem-3 rem-2 rem-1 rem-0" {
		t.Errorf("listed %s; want latest due first", got)
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

// TestConcurrentPutsOfOneIDCreateItOnce: of many PUTs of the same id at
// once, one creates it and the rest find it (the same content: unchanged;
// other content: conflict), and one reminder is stored.
func TestConcurrentPutsOfOneIDCreateItOnce(t *testing.T) {
	f := setup(t)
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := reminder("")
			if i%2 == 1 {
				r["metadata"] = map[string]string{"plan": "silver"}
			}
			b, _ := json.Marshal(r)
			req, _ := http.NewRequest("PUT", f.srv.URL+"/v1/reminders/rem-race", bytes.NewReader(b))
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			mu.Lock()
			counts[res.StatusCode]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if counts[201] != 1 || counts[200]+counts[409] != 39 || counts[200] < 19 || counts[409] < 19 {
		t.Errorf("answers %v; want one 201, and 200 for the same content, 409 for the other", counts)
	}
	stored, err := f.led.ReadReminder(context.Background(), "rem-race")
	if err != nil || len(stored.Deliveries) != 1 {
		t.Errorf("stored %+v, %v", stored, err)
	}
}

func TestFunctionURLCarriesTheEventAndTheCaller(t *testing.T) {
	f := setup(t)
	fn := intake.FunctionURL(f.h, nil)
	body, _ := json.Marshal(reminder(""))
	ev := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/v1/reminders/rem-1", Headers: map[string]string{"content-type": "application/json"},
		Body: base64.StdEncoding.EncodeToString(body), IsBase64Encoded: true,
		RequestContext: events.LambdaFunctionURLRequestContext{RequestID: "req-1", HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "PUT"},
			Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:role/billing"}}},
	}
	res, err := fn(context.Background(), ev)
	if err != nil || res.StatusCode != 201 || res.Headers["location"] != "/v1/reminders/rem-1" || res.Headers["content-type"] != "application/json" {
		t.Fatalf("PUT through the function URL: %+v, %v", res, err)
	}
	ev.RawPath, ev.Body, ev.IsBase64Encoded = "/v1/reminders/rem-1", "", false
	ev.RequestContext.HTTP.Method = "DELETE"
	if res, err := fn(context.Background(), ev); err != nil || res.StatusCode != 200 {
		t.Fatalf("DELETE: %+v, %v", res, err)
	}
	d, _ := f.led.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-1", Channel: "sms", Provider: "webhook"})
	if last := d.History[len(d.History)-1]; !strings.Contains(last.Note, "arn:aws:iam::123456789012:role/billing") {
		t.Errorf("the cancel's history note %q does not name the caller", last.Note)
	}
	ev.RequestContext.HTTP.Method, ev.RawQueryString = "GET", "account=acct-1&limit=x"
	ev.RawPath = "/v1/reminders"
	if res, _ := fn(context.Background(), ev); res.StatusCode != 400 || !strings.Contains(res.Body, `"instance":"req-1"`) {
		t.Errorf("a bad listing: %+v", res)
	}
	ev.Body, ev.IsBase64Encoded = "%%%", true
	if res, err := fn(context.Background(), ev); err != nil || res.StatusCode != 400 {
		t.Errorf("a body that is not base64: %+v, %v", res, err)
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

// TestRescheduleAndCancelOfAPartlyWrittenReminder: a create cut off after
// its reminder item (a delivery not written yet) cannot be rescheduled
// until it is finished (or the late delivery would keep the old time); a
// cancel writes the missing delivery cancelled, so the create finishing
// later sends nothing.
func TestRescheduleAndCancelOfAPartlyWrittenReminder(t *testing.T) {
	f := setup(t)
	r := ledger.Reminder{ID: "rem-half", AccountRef: "acct-1", DueAt: now.Add(time.Hour), ExpiresAt: now.Add(25 * time.Hour),
		CreatedBy: intake.Caller(context.Background()), // the fixture's caller: its requests carry none
		Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "c", TemplateRef: "t"},
			{Channel: "email", Provider: "webhook", RecipientRef: "c", TemplateRef: "t"}}}
	ctx := context.Background()
	if _, _, err := f.led.CreateReminder(ctx, r); err != nil { // the item, then the first delivery: cut off
		t.Fatal(err)
	}
	if err := f.led.Create(ctx, ledger.Delivery{ReminderID: r.ID, Channel: "sms", Provider: "webhook", RecipientRef: "c", TemplateRef: "t", DueAt: r.DueAt, ExpiresAt: r.ExpiresAt}); err != nil {
		t.Fatal(err)
	}
	a := f.json("POST", "/v1/reminders/rem-half/reschedule", map[string]string{"dueAt": now.Add(48 * time.Hour).Format(time.RFC3339)})
	if p := a.problem(t); a.status != 409 || !strings.Contains(p.Fix, "PUT again") {
		t.Fatalf("reschedule of a half-written reminder: %d %s", a.status, a.body)
	}
	if a := f.do("DELETE", "/v1/reminders/rem-half", "", nil); a.status != 200 || strings.Count(string(a.body), `"outcome":"cancelled"`) != 2 {
		t.Fatalf("cancel of a half-written reminder: %d %s", a.status, a.body)
	}
	// The create, sent again as documented, finds both, and nothing is due.
	body := map[string]any{"accountRef": "acct-1", "dueAt": r.DueAt.Format(time.RFC3339), "expiresAt": r.ExpiresAt.Format(time.RFC3339),
		"deliveries": []map[string]string{{"channel": "sms", "provider": "webhook", "recipientRef": "c", "templateRef": "t"}, {"channel": "email", "provider": "webhook", "recipientRef": "c", "templateRef": "t"}}}
	if a := f.json("PUT", "/v1/reminders/rem-half", body); a.status != 200 {
		t.Fatalf("the create again after the cancel: %d %s", a.status, a.body)
	}
	stored, _ := f.led.ReadReminder(ctx, "rem-half")
	for _, d := range stored.Deliveries {
		if d.Status != ledger.StatusCancelled || d.Index != nil {
			t.Errorf("%s is %s (index %v) after a cancel and a late create", d.Key(), d.Status, d.Index)
		}
	}
}

// TestRescheduleAnswersByWhatStands: ended deliveries stay as they are (a
// 200 when the others moved); a reminder with nothing left to move is a
// 409 saying so.
func TestRescheduleAnswersByWhatStands(t *testing.T) {
	f := setup(t)
	two := reminder("")
	two["deliveries"] = []map[string]string{{"channel": "sms", "provider": "webhook", "recipientRef": "c", "templateRef": "t"}, {"channel": "email", "provider": "webhook", "recipientRef": "c", "templateRef": "t"}}
	f.json("PUT", "/v1/reminders/rem-2", two)
	if _, err := f.led.Cancel(context.Background(), message.DeliveryKey{ReminderID: "rem-2", Channel: "email", Provider: "webhook"}, "one only"); err != nil {
		t.Fatal(err)
	}
	to := map[string]string{"dueAt": now.Add(48 * time.Hour).Format(time.RFC3339)}
	if a := f.json("POST", "/v1/reminders/rem-2/reschedule", to); a.status != 200 || !strings.Contains(string(a.body), `"finished"`) || !strings.Contains(string(a.body), `"moved"`) {
		t.Errorf("reschedule with a cancelled delivery: %d %s", a.status, a.body)
	}
	f.json("PUT", "/v1/reminders/rem-3", reminder(""))
	f.do("DELETE", "/v1/reminders/rem-3", "", nil)
	a := f.json("POST", "/v1/reminders/rem-3/reschedule", to)
	if p := a.problem(t); a.status != 409 || !strings.HasPrefix(p.Detail, "nothing moved") {
		t.Errorf("reschedule of a cancelled reminder: %d %s", a.status, a.body)
	}
}

func TestTheCallersSessionNameIsNotKept(t *testing.T) {
	f := setup(t)
	fn := intake.FunctionURL(f.h, nil)
	body, _ := json.Marshal(reminder(""))
	ev := events.LambdaFunctionURLRequest{RawPath: "/v1/reminders/rem-1", Headers: map[string]string{"content-type": "application/json"}, Body: string(body),
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "PUT"},
			Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
				UserARN: "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Support/ana.silva@example.com"}}}}
	if res, _ := fn(context.Background(), ev); res.StatusCode != 201 {
		t.Fatal(res)
	}
	ev.Body, ev.RequestContext.HTTP.Method = "", "DELETE"
	fn(context.Background(), ev)
	d, _ := f.led.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-1", Channel: "sms", Provider: "webhook"})
	note := d.History[len(d.History)-1].Note
	if strings.Contains(note, "ana.silva") || !strings.Contains(note, "assumed-role/AWSReservedSSO_Support") {
		t.Errorf("the history note %q keeps the session name, or not the role", note)
	}
	ev.RequestContext.HTTP.Method = "HEAD"
	if res, _ := fn(context.Background(), ev); res.StatusCode != 200 || res.Body != "" {
		t.Errorf("HEAD: %d with %d bytes of body", res.StatusCode, len(res.Body))
	}
	if a := f.do("GET", "/v1/reminders?account=a&next=%zz", "", nil); a.status != 400 || a.problem(t).Field != "query" {
		t.Errorf("a malformed query: %d %s", a.status, a.body)
	}
}
