package intake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// exchange is one request to the handler and the status it must answer.
type exchange struct {
	name             string
	method, path     string
	contentType      string
	body             []byte
	status           int
	invalidOnPurpose bool // the request breaks the document on purpose: its validation must fail
	down             bool // sent to a handler whose table does not answer in time
}

// downStore is an intake whose table never answers in time.
type downStore struct{ intake.Store }

func (downStore) CreateAs(context.Context, schedule.Caller, schedule.Reminder) (schedule.Outcome, error) {
	return "", context.DeadlineExceeded
}
func (downStore) ShowAs(context.Context, schedule.Caller, string) (schedule.View, error) {
	return schedule.View{}, context.DeadlineExceeded
}
func (downStore) CancelAs(context.Context, schedule.Caller, string, string) ([]schedule.CancelResult, error) {
	return nil, context.DeadlineExceeded
}
func (downStore) RescheduleAs(context.Context, schedule.Caller, string, schedule.Times, string) (schedule.Rescheduled, error) {
	return schedule.Rescheduled{}, context.DeadlineExceeded
}
func (downStore) ListAs(context.Context, schedule.Caller, string, int, string) (schedule.ListPage, error) {
	return schedule.ListPage{}, context.DeadlineExceeded
}

// TestOpenAPIDocumentIsTrue holds docs/openapi.yaml and the handler to each
// other: the document is valid OpenAPI 3.1; every route the handler serves
// is in it and every route in it is served; every documented status of
// every route, and every request example, is exercised against the
// handler, with the request and the response validated against the
// document.
func TestOpenAPIDocumentIsTrue(t *testing.T) {
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("the document is OpenAPI %s; want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("docs/openapi.yaml is not valid: %v", err)
	}
	f := setup(t)
	led, err := ledger.NewMemory(ledger.MemoryConfig{Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	store, err := schedule.New(schedule.Config{Ledger: led, Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	downHandler, err := intake.New(intake.Config{Store: downStore{Store: store}})
	if err != nil {
		t.Fatal(err)
	}
	down := httptest.NewServer(downHandler)
	defer down.Close()
	// Requests go to the test's server, not the documented function URL.
	doc.Servers = openapi3.Servers{{URL: f.srv.URL}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}

	// Routes: the document's and the handler's are the same.
	var documented, served []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	for _, r := range f.h.Routes() {
		served = append(served, r.Method+" "+r.Path)
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Errorf("documented routes %v; the handler serves %v", documented, served)
	}

	// The state the exchanges need: a reminder to read, move and cancel;
	// one sent.
	due := now.Add(time.Hour).Format(time.RFC3339)
	mk := func(extra string) []byte {
		return []byte(`{"accountRef":"acct-1","dueAt":"` + due + `","deliveries":[{"channel":"sms","provider":"webhook","recipientRef":"c-1","templateRef":"t"}]` + extra + `}`)
	}
	seen := map[string]bool{} // "PUT /v1/reminders/{id} 201"
	check := func(ex exchange) {
		t.Helper()
		base := f.srv.URL
		if ex.down {
			base = down.URL
		}
		req, err := http.NewRequest(ex.method, base+ex.path, bytes.NewReader(ex.body))
		if err != nil {
			t.Fatal(err)
		}
		if ex.contentType != "" {
			req.Header.Set("Content-Type", ex.contentType)
		}
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDLOCAL/20261201/us-east-1/lambda/aws4_request")
		// The router matches the documented server; the request goes to
		// the down handler's all the same.
		probe := req.Clone(ctx)
		probe.URL.Host, probe.Host = strings.TrimPrefix(f.srv.URL, "http://"), strings.TrimPrefix(f.srv.URL, "http://")
		route, params, err := router.FindRoute(probe)
		if err != nil {
			t.Fatalf("%s: %s %s is not in the document: %v", ex.name, ex.method, ex.path, err)
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		switch err := openapi3filter.ValidateRequest(ctx, in); {
		case err != nil && !ex.invalidOnPurpose:
			t.Errorf("%s: the request breaks the document: %v", ex.name, err)
		case err == nil && ex.invalidOnPurpose:
			t.Errorf("%s: the request was to break the document, and does not: the document allows what the handler refuses", ex.name)
		}
		req.Body = io.NopCloser(bytes.NewReader(ex.body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != ex.status {
			t.Errorf("%s: %s %s answered %d %s; want %d", ex.name, ex.method, ex.path, res.StatusCode, body, ex.status)
			return
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
			Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			t.Errorf("%s: the %d answer breaks the document: %v\n%s", ex.name, res.StatusCode, err, body)
		}
		seen[ex.method+" "+route.Path+" "+fmt.Sprint(res.StatusCode)] = true
	}

	// Every request example, sent as it is.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil {
				continue
			}
			for name, ex := range op.RequestBody.Value.Content.Get("application/json").Examples {
				b, err := json.Marshal(ex.Value.Value)
				if err != nil {
					t.Fatal(err)
				}
				target := strings.ReplaceAll(path, "{id}", "rem-example-"+name) // one reminder per example: two would conflict
				status := map[string]int{http.MethodPut: 201, http.MethodPost: 200}[method]
				if strings.HasSuffix(path, "/reschedule") {
					check(exchange{name: "create for the reschedule example", method: "PUT", path: "/v1/reminders/rem-example-" + name, contentType: "application/json",
						body: mk(""), status: 201})
				}
				if method == http.MethodPut {
					target = "/v1/reminders/rem-example-put-" + name // one reminder per example: two would conflict
				}
				check(exchange{name: "example " + name, method: method, path: target, contentType: "application/json", body: b, status: status})
			}
		}
	}

	// A reminder with no recorded creator, as written before creators were.
	legacy := ledger.ReminderItem{ID: "rem-legacy", AccountRef: "acct-1", DueAt: now.Add(time.Hour), ExpiresAt: now.Add(25 * time.Hour),
		Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "c-1", TemplateRef: "t"}}}
	if _, _, err := f.led.CreateReminder(context.Background(), legacy); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("a"), 9000)
	for _, ex := range []exchange{
		{name: "read an unattributed one", method: "GET", path: "/v1/reminders/rem-legacy", status: 403},
		{name: "reschedule an unattributed one", method: "POST", path: "/v1/reminders/rem-legacy/reschedule", contentType: "application/json", body: []byte(`{"dueAt":"` + due + `"}`), status: 403},
		{name: "cancel an unattributed one", method: "DELETE", path: "/v1/reminders/rem-legacy", status: 403},
		{name: "create", method: "PUT", path: "/v1/reminders/rem-1", contentType: "application/json", body: mk(""), status: 201},
		{name: "create again", method: "PUT", path: "/v1/reminders/rem-1", contentType: "application/json", body: mk(""), status: 200},
		{name: "create a different one", method: "PUT", path: "/v1/reminders/rem-1", contentType: "application/json", body: mk(`,"metadata":{"a":"b"}`), status: 409},
		{name: "create invalid", method: "PUT", path: "/v1/reminders/rem-2", contentType: "application/json", body: []byte(`{"accountRef":"a"}`), status: 400, invalidOnPurpose: true},
		{name: "create too large", method: "PUT", path: "/v1/reminders/rem-2", contentType: "application/json", body: big, status: 413, invalidOnPurpose: true},
		{name: "create not JSON", method: "PUT", path: "/v1/reminders/rem-2", contentType: "text/plain", body: []byte("x"), status: 415, invalidOnPurpose: true},
		{name: "read", method: "GET", path: "/v1/reminders/rem-1", status: 200},
		{name: "read an odd id", method: "GET", path: "/v1/reminders/rem%201", status: 400, invalidOnPurpose: true},
		{name: "read none", method: "GET", path: "/v1/reminders/rem-none", status: 404},
		{name: "list", method: "GET", path: "/v1/reminders?account=acct-1&limit=1", status: 200},
		{name: "list without an account", method: "GET", path: "/v1/reminders?limit=1", status: 400, invalidOnPurpose: true},
		{name: "batch", method: "POST", path: "/v1/reminders", contentType: "application/json", body: []byte(`{"reminders":[` + strings.Replace(string(mk("")), "{", `{"id":"rem-b1",`, 1) + `]}`), status: 200},
		{name: "batch empty", method: "POST", path: "/v1/reminders", contentType: "application/json", body: []byte(`{"reminders":[]}`), status: 400, invalidOnPurpose: true},
		{name: "batch too large", method: "POST", path: "/v1/reminders", contentType: "application/json", body: bytes.Repeat([]byte(" "), 1<<20+1), status: 413, invalidOnPurpose: true},
		{name: "batch not JSON", method: "POST", path: "/v1/reminders", contentType: "text/csv", body: []byte("x"), status: 415, invalidOnPurpose: true},
		{name: "reschedule", method: "POST", path: "/v1/reminders/rem-1/reschedule", contentType: "application/json", body: []byte(`{"dueAt":"` + now.Add(3*time.Hour).Format(time.RFC3339) + `"}`), status: 200},
		{name: "reschedule to no time", method: "POST", path: "/v1/reminders/rem-1/reschedule", contentType: "application/json", body: []byte(`{"due":"x"}`), status: 400, invalidOnPurpose: true},
		{name: "reschedule none", method: "POST", path: "/v1/reminders/rem-none/reschedule", contentType: "application/json", body: []byte(`{"dueAt":"` + due + `"}`), status: 404},
		{name: "reschedule too large", method: "POST", path: "/v1/reminders/rem-1/reschedule", contentType: "application/json", body: big, status: 413, invalidOnPurpose: true},
		{name: "reschedule not JSON", method: "POST", path: "/v1/reminders/rem-1/reschedule", contentType: "text/plain", body: []byte("x"), status: 415, invalidOnPurpose: true},
		{name: "cancel an odd id", method: "DELETE", path: "/v1/reminders/rem%201", status: 400, invalidOnPurpose: true},
		{name: "cancel none", method: "DELETE", path: "/v1/reminders/rem-none", status: 404},
		{name: "create one to send", method: "PUT", path: "/v1/reminders/rem-sent", contentType: "application/json", body: mk(""), status: 201},
		{name: "create, the table down", method: "PUT", path: "/v1/reminders/rem-9", contentType: "application/json", body: mk(""), status: 503, down: true},
		{name: "read, the table down", method: "GET", path: "/v1/reminders/rem-9", status: 503, down: true},
		{name: "cancel, the table down", method: "DELETE", path: "/v1/reminders/rem-9", status: 503, down: true},
		{name: "reschedule, the table down", method: "POST", path: "/v1/reminders/rem-9/reschedule", contentType: "application/json", body: []byte(`{"dueAt":"` + due + `"}`), status: 503, down: true},
		{name: "list, the table down", method: "GET", path: "/v1/reminders?account=acct-1", status: 503, down: true},
	} {
		check(ex)
	}
	f.clk.Advance(time.Hour)
	sent := f.sendOne("rem-sent", true)
	check(exchange{name: "read a sent one", method: "GET", path: "/v1/reminders/rem-sent", status: 200})
	if _, err := f.led.RecordFeedback(ctx, sent.Key(), ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General 5.1.1",
		At: f.clk.Now(), ID: "fb-1", MessageID: "r-1"}); err != nil {
		t.Fatal(err)
	}
	check(exchange{name: "read a sent one that bounced", method: "GET", path: "/v1/reminders/rem-sent", status: 200})
	for _, ex := range []exchange{
		{name: "reschedule a sent one", method: "POST", path: "/v1/reminders/rem-sent/reschedule", contentType: "application/json", body: []byte(`{"dueAt":"` + now.Add(3*time.Hour).Format(time.RFC3339) + `"}`), status: 409},
		{name: "cancel a sent one", method: "DELETE", path: "/v1/reminders/rem-sent", status: 409},
		{name: "cancel", method: "DELETE", path: "/v1/reminders/rem-1", status: 200},
	} {
		check(ex)
	}

	// Every documented status was answered.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				if !seen[method+" "+path+" "+status] {
					t.Errorf("%s %s %s is documented but no exchange answered it", method, path, status)
				}
			}
		}
	}
}
