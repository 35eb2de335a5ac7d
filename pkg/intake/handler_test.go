package intake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/intake"
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
