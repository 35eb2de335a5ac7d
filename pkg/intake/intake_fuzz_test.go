package intake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// fuzzAddress is the e-mail address of the reminder each fuzzed request
// meets; no answer may quote it.
const fuzzAddress = "ana.silva@example.com"

// FuzzFunctionURL drives the intake as Lambda does: an arbitrary function
// URL event (method, path, query, content type, body, base64 flag) through
// the FunctionURL adapter and the handler, over an in-memory ledger that
// holds one reminder (rem-1, an SES e-mail and a webhook SMS, account
// acct-1) for the request to meet. It checks that nothing panics or fails
// the invocation; that every answer is one the API documents (no 5xx: the
// in-memory table always answers), a problem with a urn:nudge:problem:
// type and the answer's status for every 4xx, JSON for every 2xx; that no
// answer quotes the stored e-mail address the request did not contain; and
// that sending the same request again creates nothing: no 201, no batch
// item created twice. The corpus is seeded with one request per route and
// the malformed shapes the handler tests name.
func FuzzFunctionURL(f *testing.F) {
	put := `{"accountRef":"acct-1","dueAt":"2026-12-01T10:00:00Z","deliveries":[{"channel":"sms","provider":"webhook","recipientRef":"c-2","templateRef":"renewal"}]}`
	for _, s := range []struct {
		method, path, query, contentType, body string
		base64                                 bool
	}{
		{"PUT", "/v1/reminders/rem-2", "", "application/json", put, false},
		{"PUT", "/v1/reminders/rem-1", "", "application/json", put, false},
		{"PUT", "/v1/reminders/rem-2", "", "application/json; charset=utf-8", "eyJhY2NvdW50UmVmIjoiYWNjdC0xIn0=", true},
		{"GET", "/v1/reminders/rem-1", "", "", "", false},
		{"HEAD", "/v1/reminders/rem-1", "", "", "", false},
		{"DELETE", "/v1/reminders/rem-1", "", "", "", false},
		{"POST", "/v1/reminders/rem-1/reschedule", "", "application/json", `{"dueAt":"2026-12-02T09:00:00Z"}`, false},
		{"GET", "/v1/reminders", "account=acct-1&limit=1", "", "", false},
		{"GET", "/v1/reminders", "account=acct-1&next=%zz", "", "", false},
		{"POST", "/v1/reminders", "", "application/json", `{"reminders":[` + strings.Replace(put, `{`, `{"id":"rem-3",`, 1) + `,{"id":"rem-3"}]}`, false},
		{"PUT", "/v1/reminders/a%2Fb", "", "text/plain", "x", false},
		{"GET", "/v1//reminders/../reminders/rem-1", "", "", "", false},
		{"PATCH", "/v1/reminders/rem-1", "", "application/json", "{}", false},
		{"PUT", "/v1/reminders/rem-2", "", "application/json", `{"accountRef":1,"unknown":true}`, false},
		{"", "", "", "", "", false},
	} {
		f.Add(s.method, s.path, s.query, s.contentType, []byte(s.body), s.base64)
	}
	f.Fuzz(func(t *testing.T, method, rawPath, query, contentType string, body []byte, isBase64 bool) {
		handle := fuzzIntake(t)
		ev := events.LambdaFunctionURLRequest{
			RawPath: rawPath, RawQueryString: query, Body: string(body), IsBase64Encoded: isBase64,
			Headers: map[string]string{"content-type": contentType},
			RequestContext: events.LambdaFunctionURLRequestContext{RequestID: "req-1", DomainName: "intake.example",
				HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: method, Path: rawPath}},
		}
		sent := method + rawPath + query + string(body)
		first := fuzzAnswer(t, handle, ev, sent)
		again := fuzzAnswer(t, handle, ev, sent)
		if again.StatusCode == http.StatusCreated {
			t.Fatalf("the same request answered %d, then 201 again: it created twice", first.StatusCode)
		}
		if first.StatusCode == http.StatusOK && method == http.MethodPost && strings.TrimSuffix(rawPath, "/") == "/v1/reminders" {
			var br intake.BatchResult
			if err := json.Unmarshal([]byte(again.Body), &br); err == nil {
				for _, r := range br.Results {
					if r.Outcome == schedule.Created {
						t.Fatalf("the same batch created %q again: %s", r.ID, again.Body)
					}
				}
			}
		}
	})
}

// fuzzIntake returns the function URL handler over a fresh in-memory
// ledger holding rem-1.
func fuzzIntake(t *testing.T) func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	clk := clock.NewFake(now)
	led, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	store, err := schedule.New(schedule.Config{Ledger: led, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	in := schedule.Input{ID: "rem-1", AccountRef: "acct-1", DueAt: now.Add(time.Hour).Format(time.RFC3339), Deliveries: []schedule.DeliveryInput{
		{Channel: "email", Provider: "ses", RecipientRef: "c-1", TemplateRef: "renewal", Address: fuzzAddress},
		{Channel: "sms", Provider: "webhook", RecipientRef: "c-2", TemplateRef: "renewal"},
	}}
	rem, err := store.Validator().Validate(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(context.Background(), rem); err != nil {
		t.Fatal(err)
	}
	h, err := intake.New(intake.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return intake.FunctionURL(h, nil)
}

// fuzzAnswer sends ev and checks its answer is one the API documents.
func fuzzAnswer(t *testing.T, handle func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error),
	ev events.LambdaFunctionURLRequest, sent string) events.LambdaFunctionURLResponse {
	t.Helper()
	res, err := handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("the invocation failed (the caller sees a bare 502): %v", err)
	}
	switch res.StatusCode {
	case 200, 201, 400, 404, 405, 409, 413, 415:
	default:
		t.Fatalf("%s %q answered %d %s", ev.RequestContext.HTTP.Method, ev.RawPath, res.StatusCode, res.Body)
	}
	if !strings.Contains(sent, fuzzAddress) && strings.Contains(res.Body, fuzzAddress) {
		t.Fatalf("the answer quotes the stored address: %s", res.Body)
	}
	if ev.RequestContext.HTTP.Method == http.MethodHead {
		if res.Body != "" {
			t.Fatalf("HEAD answered a body: %q", res.Body)
		}
		return res
	}
	if res.StatusCode >= 400 {
		var p intake.Problem
		dec := json.NewDecoder(bytes.NewReader([]byte(res.Body)))
		if err := dec.Decode(&p); err != nil || p.Status != res.StatusCode || !strings.HasPrefix(p.Type, "urn:nudge:problem:") || p.Detail == "" {
			t.Fatalf("a %d answer is not a problem (%v): %s", res.StatusCode, err, res.Body)
		}
		if ct := res.Headers["content-type"]; ct != "application/problem+json" {
			t.Fatalf("a problem's content type is %q", ct)
		}
		return res
	}
	if ct := res.Headers["content-type"]; !strings.HasPrefix(ct, "application/json") || !json.Valid([]byte(res.Body)) {
		t.Fatalf("a %d answer is not JSON (%q): %s", res.StatusCode, ct, res.Body)
	}
	return res
}
