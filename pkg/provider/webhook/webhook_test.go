package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/failure/awsfailure"

	"github.com/nudgehq/nudge/pkg/provider/webhook"

	"github.com/nudgehq/nudge/internal/local/sink"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

var secret = []byte("0123456789abcdef-test-secret")

func setup(t *testing.T, script string) (*webhook.Sender, *sink.Sink) {
	t.Helper()
	t.Parallel()
	plan, err := sink.ParseScript(script)
	if err != nil {
		t.Fatal(err)
	}
	s := &sink.Sink{Secret: secret, Plan: plan}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	w, err := webhook.New(webhook.Config{URL: srv.URL, Secret: secret, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return w, s
}

var req = provider.Request{DeliveryKey: "rem-1:email:webhook", ReminderID: "rem-1", Channel: "email", RecipientRef: "acct/contact", TemplateRef: "tpl", Attempt: 1}

func TestWebhookSendsSignedAndIdempotent(t *testing.T) {
	w, s := setup(t, "")
	r1, err := w.Send(context.Background(), req, req.DeliveryKey)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := w.Send(context.Background(), req, req.DeliveryKey)
	if err != nil {
		t.Fatal(err)
	}
	if r1.ID == "" || r1 != r2 {
		t.Fatalf("receipts %q and %q, want the same non-empty receipt", r1.ID, r2.ID)
	}
	a, _ := s.Accepted(req.DeliveryKey)
	if s.Sends(req.DeliveryKey) != 1 || s.Requests(req.DeliveryKey) != 2 || a.Repeats != 1 || a.Request.TemplateRef != "tpl" {
		t.Fatalf("sink saw %+v", a)
	}
}

func TestWebhookBadSignatureIsRejectedPermanently(t *testing.T) {
	_, s := setup(t, "")
	srv := httptest.NewServer(s)
	defer srv.Close()
	w, _ := webhook.New(webhook.Config{URL: srv.URL, Secret: []byte("another-secret-of-16b")})
	_, err := w.Send(context.Background(), req, req.DeliveryKey)
	if o := awsfailure.Default.Classify(err); o.Kind != failure.KindPermanent {
		t.Fatalf("bad signature classified %+v", o)
	}
}

func TestWebhookFaultsAreClassified(t *testing.T) {
	w, s := setup(t, "rem-1=429/30s,500,400,hang,drop")
	want := []failure.Outcome{
		{Kind: failure.KindRetry, Class: failure.ClassThrottled, RetryAfter: 30 * time.Second},
		{Kind: failure.KindRetry, Class: failure.ClassServer},
		{Kind: failure.KindPermanent, Class: failure.ClassRejected},
		{Kind: failure.KindAmbiguous, Class: failure.ClassTimeout},
		{Kind: failure.KindAmbiguous, Class: failure.ClassNetwork},
	}
	for i, w0 := range want {
		_, err := w.Send(context.Background(), req, req.DeliveryKey)
		if err == nil {
			t.Fatalf("attempt %d succeeded", i+1)
		}
		if got := awsfailure.Default.Classify(err); got != w0 {
			t.Fatalf("attempt %d: %v classified %+v, want %+v", i+1, err, got, w0)
		}
	}
	// The dropped attempt was accepted: the retry gets the same receipt.
	r, err := w.Send(context.Background(), req, req.DeliveryKey)
	if err != nil || r.ID != "sink-1" || s.Sends(req.DeliveryKey) != 1 {
		t.Fatalf("retry after drop = %v, %v; sends %d", r, err, s.Sends(req.DeliveryKey))
	}
}

func TestWebhookRefusesConnectionBeforeWriting(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(&sink.Sink{})
	url := srv.URL
	srv.Close()
	w, _ := webhook.New(webhook.Config{URL: url, Secret: secret})
	_, err := w.Send(context.Background(), req, req.DeliveryKey)
	if o := awsfailure.Default.Classify(err); o.Kind != failure.KindRetry || o.Class != failure.ClassNetwork {
		t.Fatalf("refused connection classified %+v (%v)", o, err)
	}
}

func TestNewWebhookValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  webhook.Config
		want string
	}{
		{webhook.Config{URL: "http://example.com/hook", Secret: secret}, "https"},
		{webhook.Config{URL: "not a url", Secret: secret}, "absolute"},
		{webhook.Config{URL: "https://example.com/hook", Secret: []byte("short")}, "16 bytes"},
	} {
		if _, err := webhook.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewWebhook(%q) = %v, want an error about %s", tc.cfg.URL, err, tc.want)
		}
	}
	if _, err := webhook.New(webhook.Config{URL: "http://127.0.0.1:9/x", Secret: secret}); err != nil {
		t.Errorf("loopback http refused: %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"120":                           2 * time.Minute,
		"-5":                            0,
		"soon":                          0,
		"Mon, 30 Nov 2026 09:01:30 GMT": 90 * time.Second,
		"Mon, 30 Nov 2026 08:00:00 GMT": 0,
		"99999999999999":                provider.MaxRetryAfter, // epoch milliseconds by mistake: would overflow
		"Fri, 31 Dec 9999 23:59:59 GMT": provider.MaxRetryAfter,
		"99999999999999999999999":       0, // not a number SQS or Go can hold
	} {
		if got := provider.ParseRetryAfter(v, now); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
	var se *provider.StatusError
	if !errors.As(error(&provider.StatusError{Code: 429, After: time.Second}), &se) {
		t.Fatal("StatusError is not an error")
	}
}

func TestWebhookReadsAtMostTheResponseCap(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"id":"` + r.URL.Query().Get("id") + `"}`))
	}))
	defer srv.Close()
	for id, want := range map[string]string{"short": "short", strings.Repeat("x", 64): ""} {
		w, err := webhook.New(webhook.Config{URL: srv.URL + "/?id=" + id, Secret: secret, MaxResponseBytes: 32})
		if err != nil {
			t.Fatal(err)
		}
		r, err := w.Send(context.Background(), req, req.DeliveryKey)
		if err != nil || r.ID != want {
			t.Errorf("id %d bytes: receipt %q, %v; want %q (a 2xx is a send even when its answer is cut)", len(id), r.ID, err, want)
		}
	}
}

// TestWebhookNeverFollowsARedirect: a 301, 302 or 303 would turn the signed
// POST into a GET whose 2xx was recorded as a send the provider never got;
// a 307 or 308 would re-send the signed body and headers wherever Location
// points. Each is a permanent failure of class config naming the status
// and the target's host (not its path or query), and nothing reaches the
// target, whether the webhook built its client or was given one that
// follows redirects.
func TestWebhookNeverFollowsARedirect(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Write([]byte(`{"id":"stolen"}`))
	}))
	defer target.Close()
	targetHost := strings.TrimPrefix(target.URL, "http://")
	for _, code := range []int{301, 302, 303, 307, 308} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/elsewhere/path?token=s3cr3t", code)
		}))
		for name, client := range map[string]*http.Client{"own client": nil, "caller's client": {Timeout: time.Second}} {
			w, err := webhook.New(webhook.Config{URL: redirector.URL + "/hook", Secret: secret, Client: client})
			if err != nil {
				t.Fatal(err)
			}
			_, err = w.Send(context.Background(), req, req.DeliveryKey)
			o := awsfailure.Default.Classify(err)
			if o.Kind != failure.KindPermanent || o.Class != failure.ClassConfig {
				t.Errorf("%d (%s): %v classified %+v, want permanent config", code, name, err, o)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, strconv.Itoa(code)) || !strings.Contains(msg, targetHost) || !strings.Contains(msg, "NUDGE_WEBHOOK_URL") {
				t.Errorf("%d (%s): reason %q does not name the status, the target host and the fix", code, name, msg)
			}
			if strings.Contains(msg, "elsewhere") || strings.Contains(msg, "s3cr3t") {
				t.Errorf("%d (%s): reason %q carries the target's path or query", code, name, msg)
			}
			var re *webhook.RedirectError
			if !errors.As(err, &re) || re.Code != code || re.Host != targetHost {
				t.Errorf("%d (%s): %#v is not a RedirectError for the target", code, name, err)
			}
		}
		redirector.Close()
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the redirect target received %d requests", n)
	}
}

// TestErrorsNeverCarryTheURLsPathOrQuery: a webhook URL may hold a token in
// its path or query. A refused connection, a timeout after the request was
// written and a bad configuration each say what happened, with the scheme
// and host only.
func TestErrorsNeverCarryTheURLsPathOrQuery(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	refused := closed.URL
	closed.Close()
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-stop }))
	defer hang.Close()
	defer close(stop)
	for name, base := range map[string]string{"refused": refused, "timeout": hang.URL} {
		w, err := webhook.New(webhook.Config{URL: base + "/hooks/T0/s3cr3t-path?token=s3cr3t-query", Secret: secret, Timeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = w.Send(context.Background(), req, req.DeliveryKey)
		if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), base+"/…") {
			t.Errorf("%s: %v; want an error naming %s/… and nothing of the path or query", name, err, base)
		}
	}
	if _, err := webhook.New(webhook.Config{URL: "http://hooks.example.com/x?token=s3cr3t", Secret: secret}); err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "http://hooks.example.com/…") {
		t.Errorf("configuration error: %v", err)
	}
}

// TestTheDeclaredTableIsTheTestedOne: every row of the driver's
// classification table is an outcome a test here makes happen against the
// sink, with the same kind and class, and no tested outcome is undeclared.
func TestTheDeclaredTableIsTheTestedOne(t *testing.T) {
	tested := map[string]failure.Outcome{
		// TestWebhookFaultsAreClassified
		"429, with or without Retry-After": {Kind: failure.KindRetry, Class: failure.ClassThrottled},
		"5xx":                              {Kind: failure.KindRetry, Class: failure.ClassServer},
		"other 4xx":                        {Kind: failure.KindPermanent, Class: failure.ClassRejected},
		"no answer in the timeout, after the request was written": {Kind: failure.KindAmbiguous, Class: failure.ClassTimeout},
		"connection dropped after the request was written":        {Kind: failure.KindAmbiguous, Class: failure.ClassNetwork},
		// TestWebhookNeverFollowsARedirect
		"3xx, a redirect (not followed)": {Kind: failure.KindPermanent, Class: failure.ClassConfig},
		// TestWebhookRefusesConnectionBeforeWriting
		"connection refused, before the request was written": {Kind: failure.KindRetry, Class: failure.ClassNetwork},
	}
	declared := map[string]bool{}
	for _, d := range webhook.Driver.Contract.Classification {
		declared[d.Answer] = true
		if o, ok := tested[d.Answer]; !ok || o.Kind != d.Kind || o.Class != d.Class {
			t.Errorf("declared %q → %v/%s; the tests have %+v", d.Answer, d.Kind, d.Class, o)
		}
	}
	for answer := range tested {
		if !declared[answer] {
			t.Errorf("the tests make %q happen, which the driver does not declare", answer)
		}
	}
}
