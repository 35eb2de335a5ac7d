package intake_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// The e-mail address of the reminder each fuzzed request meets, in each of
// two otherwise equal intakes: no answer may quote the stored one.
const fuzzAddress, otherAddress = "ana.silva@example.com", "bo.lima@example.net"

type invoke = func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)

// FuzzFunctionURL drives the intake as Lambda does: an arbitrary function
// URL event (method, path, query, content type, body, base64 flag) through
// the FunctionURL adapter and the handler, over an in-memory ledger that
// holds one reminder (rem-1, an SES e-mail and a webhook SMS, account
// acct-1) for the request to meet. It checks that:
//   - nothing panics or fails the invocation, and every answer is one the
//     API documents: no 5xx (the in-memory table always answers), a
//     problem with a urn:nudge:problem: type and the answer's status for
//     every 4xx, JSON for every 2xx;
//   - no answer quotes the stored e-mail address: the same request to an
//     intake that stores another address must not show the first one
//     (so an address the request itself carries, in any encoding, may be
//     echoed);
//   - sending the same request again changes nothing: it answers the same
//     status (200 where the first created, 201), a batch the same status
//     for each reminder, and the reminders it names read the same after.
//
// The corpus is seeded with one request per route and the malformed shapes
// the handler tests name.
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
		{"GET", "/v1/reminders/ana.silva%40example.com", "", "", "", false},
		{"PUT", "/v1/reminders/a%2Fb", "", "text/plain", "x", false},
		{"GET", "/v1//reminders/../reminders/rem-1", "", "", "", false},
		{"PATCH", "/v1/reminders/rem-1", "", "application/json", "{}", false},
		{"PUT", "/v1/reminders/rem-2", "", "application/json", `{"accountRef":1,"unknown":true}`, false},
		{"", "", "", "", "", false},
	} {
		f.Add(s.method, s.path, s.query, s.contentType, []byte(s.body), s.base64)
	}
	f.Fuzz(func(t *testing.T, method, rawPath, query, contentType string, body []byte, isBase64 bool) {
		a, b := fuzzIntake(t, fuzzAddress), fuzzIntake(t, otherAddress)
		ev := events.LambdaFunctionURLRequest{
			RawPath: rawPath, RawQueryString: query, Body: string(body), IsBase64Encoded: isBase64,
			Headers: map[string]string{"content-type": contentType},
			RequestContext: events.LambdaFunctionURLRequestContext{RequestID: "req-1", DomainName: "intake.example",
				HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: method, Path: rawPath}},
		}
		ids := []string{"rem-1"}
		if id, ok := strings.CutPrefix(rawPath, "/v1/reminders/"); ok && id != "" && !strings.Contains(id, "/") {
			ids = append(ids, id)
		}
		first := fuzzAnswer(t, a, b, ev)
		before := fuzzRead(t, a, ids)
		again := fuzzAnswer(t, a, b, ev)
		if want := first.StatusCode; again.StatusCode != want && !(want == http.StatusCreated && again.StatusCode == http.StatusOK) {
			t.Fatalf("the same request answered %d, then %d: %s", want, again.StatusCode, again.Body)
		}
		if first.StatusCode == http.StatusOK && method == http.MethodPost && rawPath == "/v1/reminders" {
			var r1, r2 intake.BatchResult
			if json.Unmarshal([]byte(first.Body), &r1) != nil || json.Unmarshal([]byte(again.Body), &r2) != nil || len(r1.Results) != len(r2.Results) {
				t.Fatalf("the same batch answered %s, then %s", first.Body, again.Body)
			}
			for i, r := range r1.Results {
				if got := r2.Results[i].Status; got != r.Status && !(r.Status == http.StatusCreated && got == http.StatusOK) {
					t.Fatalf("the same batch answered %d, then %d for reminder %d (%q)", r.Status, got, i, r.ID)
				}
			}
		}
		if after := fuzzRead(t, a, ids); after != before {
			t.Fatalf("the same request again changed what it names:\n%s\nthen\n%s", before, after)
		}
	})
}

// fuzzIntake returns the function URL handler over a fresh in-memory
// ledger holding rem-1, whose e-mail goes to address.
func fuzzIntake(t *testing.T, address string) invoke {
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
		{Channel: "email", Provider: "ses", RecipientRef: "c-1", TemplateRef: "renewal", Address: address},
		{Channel: "sms", Provider: "webhook", RecipientRef: "c-2", TemplateRef: "renewal"},
	}}
	rem, err := store.Validator().Validate(in)
	if err != nil {
		t.Fatal(err)
	}
	// Created by the fuzzed requests' caller (they carry no authorizer), so
	// that they reach it.
	if _, err := store.CreateAs(context.Background(), schedule.Caller{Principal: intake.Caller(context.Background())}, rem); err != nil {
		t.Fatal(err)
	}
	h, err := intake.New(intake.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return intake.FunctionURL(h, nil)
}

// fuzzAnswer sends ev to a and to b (the same intake storing another
// address) and checks a's answer is one the API documents.
func fuzzAnswer(t *testing.T, a, b invoke, ev events.LambdaFunctionURLRequest) events.LambdaFunctionURLResponse {
	t.Helper()
	res, err := a(context.Background(), ev)
	if err != nil {
		t.Fatalf("the invocation failed (the caller sees a bare 502): %v", err)
	}
	other, err := b(context.Background(), ev)
	if err != nil {
		t.Fatalf("the invocation failed (the caller sees a bare 502): %v", err)
	}
	if shown := fmt.Sprint(res.Headers, res.Body); strings.Contains(shown, fuzzAddress) && !strings.Contains(fmt.Sprint(other.Headers, other.Body), fuzzAddress) {
		t.Fatalf("the answer quotes the stored address: %s", shown)
	}
	switch res.StatusCode {
	case 200, 201, 400, 404, 405, 409, 413, 415:
	default:
		t.Fatalf("%s %q answered %d %s", ev.RequestContext.HTTP.Method, ev.RawPath, res.StatusCode, res.Body)
	}
	if ev.RequestContext.HTTP.Method == http.MethodHead {
		return res
	}
	if res.StatusCode >= 400 {
		var p intake.Problem
		if err := json.Unmarshal([]byte(res.Body), &p); err != nil || p.Status != res.StatusCode || !strings.HasPrefix(p.Type, "urn:nudge:problem:") || p.Detail == "" {
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

// fuzzRead returns what GET answers for each id, as one string.
func fuzzRead(t *testing.T, h invoke, ids []string) string {
	t.Helper()
	var out strings.Builder
	for _, id := range ids {
		res, err := h(context.Background(), events.LambdaFunctionURLRequest{RawPath: "/v1/reminders/" + id,
			RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: http.MethodGet}}})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "%d %s\n", res.StatusCode, res.Body)
	}
	return out.String()
}
