package urlfront_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/nudgehq/nudge/internal/local/urlfront"
)

// fake is a function instance: it records each payload, answers with
// respond, and fails the test if it is ever invoked twice at once.
type fake struct {
	t        *testing.T
	respond  func(ctx context.Context, payload []byte) ([]byte, error)
	mu       sync.Mutex
	payloads [][]byte
	inFlight atomic.Int32
}

func (f *fake) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	if n := f.inFlight.Add(1); n > 1 {
		f.t.Errorf("an invoker got %d invocations at once; the emulator takes one at a time", n)
	}
	defer f.inFlight.Add(-1)
	f.mu.Lock()
	f.payloads = append(f.payloads, payload)
	f.mu.Unlock()
	if f.respond == nil {
		return []byte(`{"statusCode":200,"body":"ok"}`), nil
	}
	return f.respond(ctx, payload)
}

func (f *fake) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.payloads)
}

// event decodes the n-th payload as the function would, and as a map for
// the fields events.LambdaFunctionURLRequest has none for.
func (f *fake) event(t *testing.T, n int) (events.LambdaFunctionURLRequest, map[string]any) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if n >= len(f.payloads) {
		t.Fatalf("the function got %d invocations; want more than %d", len(f.payloads), n)
	}
	var ev events.LambdaFunctionURLRequest
	var raw map[string]any
	if err := json.Unmarshal(f.payloads[n], &ev); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(f.payloads[n], &raw); err != nil {
		t.Fatal(err)
	}
	return ev, raw
}

// syncBuffer is a log safe for the front's handlers and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start(t *testing.T, cfg urlfront.Config) (*urlfront.Front, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	if cfg.Log == nil {
		cfg.Log = log
	}
	f, err := urlfront.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f, log
}

// sign signs req with SigV4 for service lambda, as an SDK client or
// awscurl does.
func sign(t *testing.T, req *http.Request, body []byte, region string) {
	t.Helper()
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: "AKIALOCALTEST", SecretAccessKey: "secret"}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "lambda", region, time.Now()); err != nil {
		t.Fatal(err)
	}
}

func request(t *testing.T, method, url string, body []byte, header http.Header, signed bool) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if signed {
		sign(t, req, body, "us-east-1")
	}
	return req
}

func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func TestStartRefusesABadConfig(t *testing.T) {
	for _, cfg := range []urlfront.Config{
		{},
		{Invokers: []urlfront.Invoker{nil}},
		{Invokers: []urlfront.Invoker{&fake{t: t}}, Timeout: -time.Second},
		{Invokers: []urlfront.Invoker{&fake{t: t}}, AccountID: "local"},
	} {
		if f, err := urlfront.Start(cfg); err == nil {
			f.Close()
			t.Errorf("Start(%+v) succeeded; want an error", cfg)
		} else if !strings.HasPrefix(err.Error(), "urlfront: ") {
			t.Errorf("error %q does not name the package", err)
		}
	}
}

// TestEventIsWhatAFunctionURLSends: a signed PUT with a query string,
// repeated headers and cookies becomes the payload format 2.0 event.
func TestEventIsWhatAFunctionURLSends(t *testing.T) {
	fn := &fake{t: t}
	front, _ := start(t, urlfront.Config{Invokers: []urlfront.Invoker{fn}, AccountID: "111122223333"})
	body := []byte(`{"dueAt":"2030-01-01T00:00:00Z"}`)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Add("X-Multi", "a")
	h.Add("X-Multi", "b")
	h.Add("Cookie", "c1=v1; c2=v2")
	h.Add("Cookie", "c3=v3")
	h.Set("User-Agent", "nudge-test/1")
	req := request(t, http.MethodPut, front.URL()+"/v1/reminders/rem%3A1?b=2&a=1&a=3&e=", body, h, true)
	before := time.Now()
	resp, got := do(t, req)
	if resp.StatusCode != 200 || string(got) != "ok" {
		t.Fatalf("answer %d %q", resp.StatusCode, got)
	}
	ev, raw := fn.event(t, 0)

	check := func(name string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v; want %v", name, got, want)
		}
	}
	check("version", ev.Version, "2.0")
	check("routeKey", raw["routeKey"], "$default")
	check("rawPath", ev.RawPath, "/v1/reminders/rem%3A1")
	check("rawQueryString", ev.RawQueryString, req.URL.RawQuery) // as sent (the signer sorts it)
	check("queryStringParameters", ev.QueryStringParameters, map[string]string{"a": "1,3", "b": "2", "e": ""})
	check("cookies", ev.Cookies, []string{"c1=v1", "c2=v2", "c3=v3"})
	check("headers[x-multi]", ev.Headers["x-multi"], "a,b")
	check("headers[content-type]", ev.Headers["content-type"], "application/json")
	check("headers[host]", ev.Headers["host"], strings.TrimPrefix(front.URL(), "http://"))
	check("headers[x-forwarded-for]", ev.Headers["x-forwarded-for"], "127.0.0.1")
	check("headers[x-forwarded-proto]", ev.Headers["x-forwarded-proto"], "http")
	if _, ok := ev.Headers["cookie"]; ok {
		t.Error("headers has cookie; a function URL moves cookies to the cookies field")
	}
	if !strings.HasPrefix(ev.Headers["authorization"], "AWS4-HMAC-SHA256 Credential=AKIALOCALTEST/") || ev.Headers["x-amz-date"] == "" {
		t.Errorf("the signature's headers are not passed on: %v", ev.Headers)
	}
	if !strings.HasPrefix(ev.Headers["x-amzn-trace-id"], "Root=1-") {
		t.Errorf("x-amzn-trace-id = %q", ev.Headers["x-amzn-trace-id"])
	}
	for k := range ev.Headers {
		if k != strings.ToLower(k) {
			t.Errorf("header name %q is not lower-case", k)
		}
	}
	check("body", ev.Body, string(body))
	check("isBase64Encoded", ev.IsBase64Encoded, false)

	rc := ev.RequestContext
	check("requestContext.accountId", rc.AccountID, "111122223333")
	if len(rc.APIID) != 32 || rc.DomainPrefix != rc.APIID {
		t.Errorf("apiId %q, domainPrefix %q; want one 32-character url id", rc.APIID, rc.DomainPrefix)
	}
	check("requestContext.domainName", rc.DomainName, strings.TrimPrefix(front.URL(), "http://"))
	rawRC := raw["requestContext"].(map[string]any)
	check("requestContext.routeKey", rawRC["routeKey"], "$default")
	check("requestContext.stage", rawRC["stage"], "$default")
	check("http.method", rc.HTTP.Method, "PUT")
	check("http.path", rc.HTTP.Path, "/v1/reminders/rem:1")
	check("http.protocol", rc.HTTP.Protocol, "HTTP/1.1")
	check("http.sourceIp", rc.HTTP.SourceIP, "127.0.0.1")
	check("http.userAgent", rc.HTTP.UserAgent, "nudge-test/1")
	if len(rc.RequestID) != 36 || strings.Count(rc.RequestID, "-") != 4 {
		t.Errorf("requestId %q is not a UUID", rc.RequestID)
	}
	check("x-amzn-RequestId answered", resp.Header.Get("X-Amzn-Requestid"), rc.RequestID)
	at, err := time.Parse("02/Jan/2006:15:04:05 -0700", rc.Time)
	if err != nil || at.Before(before.Add(-time.Second)) || at.After(time.Now()) {
		t.Errorf("time %q: %v", rc.Time, err)
	}
	if ms := rc.TimeEpoch; ms < before.UnixMilli() || ms > time.Now().UnixMilli() {
		t.Errorf("timeEpoch %d is not the request's time", ms)
	}
	if rc.Authorizer == nil || rc.Authorizer.IAM == nil {
		t.Fatal("no requestContext.authorizer.iam")
	}
	iam := rc.Authorizer.IAM
	check("iam.accessKey", iam.AccessKey, "AKIALOCALTEST")
	check("iam.accountId", iam.AccountID, "111122223333")
	check("iam.userArn", iam.UserARN, "arn:aws:iam::111122223333:user/local")
	if !strings.HasPrefix(iam.CallerID, "AIDA") || iam.UserID != iam.CallerID {
		t.Errorf("callerId %q, userId %q", iam.CallerID, iam.UserID)
	}

	// A second request gets a new id; a request without a query or body
	// has neither field.
	_, _ = do(t, request(t, http.MethodGet, front.URL()+"/", nil, nil, true))
	ev2, raw2 := fn.event(t, 1)
	if ev2.RequestContext.RequestID == rc.RequestID {
		t.Error("two requests got the same requestId")
	}
	for _, k := range []string{"queryStringParameters", "body", "cookies"} {
		if _, ok := raw2[k]; ok {
			t.Errorf("a GET of / without query, body or cookies has %s: %v", k, raw2[k])
		}
	}
	check("rawPath of /", ev2.RawPath, "/")
}

// TestBinaryBodiesAreBase64: bodies pass as text only for text-like content
// types.
func TestBinaryBodiesAreBase64(t *testing.T) {
	fn := &fake{t: t}
	front, _ := start(t, urlfront.Config{Invokers: []urlfront.Invoker{fn}})
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	cases := []struct {
		contentType string
		body        []byte
		base64      bool
	}{
		{"application/octet-stream", bin, true},
		{"", bin, true},
		{"image/png", []byte("\x89PNG"), true},
		{"text/csv; charset=utf-8", []byte("a,b\n1,2\n"), false},
		{"application/json", []byte(`{"a":1}`), false},
		{"application/merge-patch+json", []byte(`{"a":1}`), false},
		{"application/xml", []byte(`<a/>`), false},
		{"application/x-www-form-urlencoded", []byte(`a=1&b=2`), false},
	}
	for i, c := range cases {
		h := http.Header{}
		if c.contentType != "" {
			h.Set("Content-Type", c.contentType)
		}
		if resp, _ := do(t, request(t, http.MethodPost, front.URL()+"/upload", c.body, h, true)); resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", c.contentType, resp.StatusCode)
		}
		ev, _ := fn.event(t, i)
		if ev.IsBase64Encoded != c.base64 {
			t.Errorf("%q: isBase64Encoded = %v; want %v", c.contentType, ev.IsBase64Encoded, c.base64)
		}
		got := []byte(ev.Body)
		if ev.IsBase64Encoded {
			var err error
			if got, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
				t.Fatalf("%q: %v", c.contentType, err)
			}
		}
		if !bytes.Equal(got, c.body) {
			t.Errorf("%q: body %q; want %q", c.contentType, got, c.body)
		}
	}
}

// TestUnsignedRequestsAreForbiddenAndNeverInvoke: as a function URL with
// AWS_IAM, without (a plausible) SigV4 header the answer is 403.
func TestUnsignedRequestsAreForbiddenAndNeverInvoke(t *testing.T) {
	fn := &fake{t: t}
	front, log := start(t, urlfront.Config{Invokers: []urlfront.Invoker{fn}, Region: "eu-west-1"})
	cred := "AWS4-HMAC-SHA256 Credential=AKIA/20300101/%s/%s/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc"
	for _, auth := range []string{
		"",
		"Bearer token",
		"AWS4-HMAC-SHA256 SignedHeaders=host, Signature=abc",
		"AWS4-HMAC-SHA256 Credential=AKIA/20300101/eu-west-1/lambda/aws4_request",
		fmt.Sprintf(cred, "eu-west-1", "execute-api"),
		fmt.Sprintf(cred, "us-east-1", "lambda"),
	} {
		req := request(t, http.MethodGet, front.URL()+"/v1/reminders/x", nil, nil, false)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, body := do(t, req)
		if resp.StatusCode != http.StatusForbidden || string(body) != `{"Message":"Forbidden"}` {
			t.Errorf("Authorization %q: %d %s; want 403 {\"Message\":\"Forbidden\"}", auth, resp.StatusCode, body)
		}
	}
	if fn.calls() != 0 {
		t.Errorf("the function was invoked %d times; unsigned requests must never reach it", fn.calls())
	}
	if lines := strings.Count(log.String(), " 403 "); lines != 6 {
		t.Errorf("%d access lines with 403; want 6:\n%s", lines, log)
	}
	if !strings.Contains(log.String(), "never the signature") || !strings.Contains(log.String(), "invoker=- ") {
		t.Errorf("the 403 lines do not say the signature is not verified:\n%s", log)
	}
	// Signed for its region, it passes (the signature itself unchecked).
	req := request(t, http.MethodGet, front.URL()+"/", nil, nil, false)
	req.Header.Set("Authorization", fmt.Sprintf(cred, "eu-west-1", "lambda"))
	if resp, _ := do(t, req); resp.StatusCode != 200 || fn.calls() != 1 {
		t.Errorf("a request signed for the front's region: %d, %d calls", resp.StatusCode, fn.calls())
	}
}

// TestOversizedRequestsAre413: over Lambda's 6 MB payload limit, counting
// the event as Lambda does, nothing is invoked.
func TestOversizedRequestsAre413(t *testing.T) {
	fn := &fake{t: t}
	front, _ := start(t, urlfront.Config{Invokers: []urlfront.Invoker{fn}})
	text := http.Header{"Content-Type": {"text/plain"}}
	binary := http.Header{"Content-Type": {"application/octet-stream"}}
	for _, c := range []struct {
		name   string
		size   int
		header http.Header
	}{
		{"text over 6 MB", urlfront.MaxPayload + 1, text},
		{"text of 6 MB (the event is larger)", urlfront.MaxPayload, text},
		{"binary of 5 MB (6.7 MB in base64)", 5 << 20, binary},
	} {
		resp, body := do(t, request(t, http.MethodPost, front.URL()+"/big", bytes.Repeat([]byte("a"), c.size), c.header, true))
		if resp.StatusCode != http.StatusRequestEntityTooLarge || string(body) != `{"Message":"Request Entity Too Large"}` {
			t.Errorf("%s: %d %s; want 413", c.name, resp.StatusCode, body)
		}
	}
	if fn.calls() != 0 {
		t.Errorf("the function was invoked %d times with oversized events", fn.calls())
	}
	if resp, _ := do(t, request(t, http.MethodPost, front.URL()+"/big", bytes.Repeat([]byte("a"), 4<<20), binary, true)); resp.StatusCode != 200 {
		t.Errorf("4 MB binary (5.3 MB in base64): %d; want 200", resp.StatusCode)
	}
}

// TestResponseIsWrittenBack: status, headers as given (multiple values
// comma-joined), one Set-Cookie per cookie, a base64 body decoded.
func TestResponseIsWrittenBack(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x01")
	first, err := json.Marshal(events.LambdaFunctionURLResponse{
		StatusCode:      202,
		Headers:         map[string]string{"Content-Type": "image/png", "x-multi": "a,b", "Cache-Control": "no-store"},
		Cookies:         []string{"s=1; Path=/; HttpOnly", "t=2; Max-Age=60"},
		Body:            base64.StdEncoding.EncodeToString(png),
		IsBase64Encoded: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out atomic.Value
	out.Store(first)
	fn := &fake{t: t, respond: func(context.Context, []byte) ([]byte, error) { return out.Load().([]byte), nil }}
	front, _ := start(t, urlfront.Config{Invokers: []urlfront.Invoker{fn}})
	resp, body := do(t, request(t, http.MethodGet, front.URL()+"/img", nil, nil, true))
	if resp.StatusCode != 202 || !bytes.Equal(body, png) {
		t.Errorf("answer %d %q; want 202 %q", resp.StatusCode, body, png)
	}
	if got := resp.Header.Get("Content-Type"); got != "image/png" {
		t.Errorf("content-type %q", got)
	}
	if got := resp.Header.Values("X-Multi"); len(got) != 1 || got[0] != "a,b" {
		t.Errorf("x-multi %q; want one header a,b", got)
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("cache-control %q", got)
	}
	if got := resp.Header.Values("Set-Cookie"); len(got) != 2 || got[0] != "s=1; Path=/; HttpOnly" || got[1] != "t=2; Max-Age=60" {
		t.Errorf("set-cookie %q", got)
	}

	// A text body, no content type: as given, application/json.
	out.Store([]byte(`{"statusCode":404,"body":"{\"message\":\"no such reminder\"}"}`))
	resp, body = do(t, request(t, http.MethodGet, front.URL()+"/v1/reminders/nope", nil, nil, true))
	if resp.StatusCode != 404 || string(body) != `{"message":"no such reminder"}` || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("answer %d %s %q", resp.StatusCode, body, resp.Header.Get("Content-Type"))
	}
}

// TestOutputWithoutStatusCodeIs200JSON: a function URL answers any other
// JSON output as it is, 200, application/json.
func TestOutputWithoutStatusCodeIs200JSON(t *testing.T) {
	var out atomic.Value
	fn := &fake{t: t, respond: func(context.Context, []byte) ([]byte, error) { return out.Load().([]byte), nil }}
	front, _ := start(t, urlfront.Config{Invokers: []urlfront.Invoker{fn}})
	for _, o := range []string{`"Hello, world!"`, `{"message":"Hello, world!"}`, `[1,2]`, `42`, `null`, `{"status":201}`} {
		out.Store([]byte(o))
		resp, body := do(t, request(t, http.MethodGet, front.URL()+"/", nil, nil, true))
		if resp.StatusCode != 200 || string(body) != o || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("output %s: answer %d %q %s", o, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}

// TestFailuresAre502: a function error, an output that is not JSON (the
// emulator's timeout), a malformed response or a failed invocation.
func TestFailuresAre502(t *testing.T) {
	var out atomic.Value
	fn := &fake{t: t, respond: func(context.Context, []byte) ([]byte, error) {
		o := out.Load().(string)
		if o == "invoke error" {
			return nil, errors.New("standin: invoke http://127.0.0.1:1: connection refused")
		}
		return []byte(o), nil
	}}
	front, log := start(t, urlfront.Config{Invokers: []urlfront.Invoker{fn}})
	for _, c := range []struct{ output, logs string }{
		{`{"errorMessage":"ledger: table missing","errorType":"errorString"}`, "function error: errorString: ledger: table missing"},
		{`{"errorMessage":"boom","errorType":"Runtime.ExitError","stackTrace":[]}`, "function error: Runtime.ExitError: boom"},
		{`Task timed out after 10.00 seconds`, "not JSON"},
		{`{"statusCode":"201"}`, "malformed response"},
		{`{"statusCode":0}`, "malformed response: statusCode 0"},
		{`{"statusCode":200,"body":"%%%","isBase64Encoded":true}`, "not base64"},
		{"invoke error", "invocation failed: standin: invoke"},
	} {
		out.Store(c.output)
		resp, body := do(t, request(t, http.MethodGet, front.URL()+"/", nil, nil, true))
		if resp.StatusCode != http.StatusBadGateway || string(body) != `{"Message":"Internal Server Error"}` {
			t.Errorf("output %s: %d %s; want 502 Internal Server Error", c.output, resp.StatusCode, body)
		}
		if !strings.Contains(log.String(), c.logs) {
			t.Errorf("output %s: the log does not say %q:\n%s", c.output, c.logs, log)
		}
	}
}

// TestHungInvocationIs502AfterTheTimeout: an instance that never answers is
// given up at the function's timeout plus a margin.
func TestHungInvocationIs502AfterTheTimeout(t *testing.T) {
	t.Parallel() // waits, mostly
	var deadline atomic.Value
	fn := &fake{t: t, respond: func(ctx context.Context, _ []byte) ([]byte, error) {
		d, _ := ctx.Deadline()
		deadline.Store(d)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	front, _ := start(t, urlfront.Config{Invokers: []urlfront.Invoker{fn}, Timeout: 100 * time.Millisecond})
	began := time.Now()
	resp, _ := do(t, request(t, http.MethodGet, front.URL()+"/", nil, nil, true))
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d; want 502", resp.StatusCode)
	}
	if d := deadline.Load().(time.Time).Sub(began); d < 100*time.Millisecond || d > 3*time.Second {
		t.Errorf("invocation deadline %v after the request; want the timeout plus a margin", d)
	}
}

// TestBusyInstancesAnswer429: a request that finds no free instance within
// the function's timeout is refused as a throttled function URL's would be.
func TestBusyInstancesAnswer429(t *testing.T) {
	t.Parallel() // waits, mostly
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	fn := &fake{t: t, respond: func(context.Context, []byte) ([]byte, error) {
		started <- struct{}{}
		<-release
		return []byte(`{"statusCode":200}`), nil
	}}
	front, log := start(t, urlfront.Config{Invokers: []urlfront.Invoker{fn}, Timeout: 200 * time.Millisecond})
	first := make(chan int)
	slow := request(t, http.MethodGet, front.URL()+"/slow", nil, nil, true)
	go func() {
		resp, err := http.DefaultClient.Do(slow)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-started
	resp, body := do(t, request(t, http.MethodGet, front.URL()+"/other", nil, nil, true))
	if resp.StatusCode != http.StatusTooManyRequests || string(body) != `{"Message":"Rate Exceeded."}` {
		t.Errorf("with every instance busy: %d %s; want 429", resp.StatusCode, body)
	}
	close(release)
	if s := <-first; s != 200 {
		t.Errorf("the first request: %d", s)
	}
	if !strings.Contains(log.String(), "GET /other 429") || !strings.Contains(log.String(), "GET /slow 200") {
		t.Errorf("access log:\n%s", log)
	}
}

// TestEachInvokerServesOneRequestAtATime: 50 concurrent requests on 4
// instances; no instance is ever invoked twice at once (fake checks), and
// each serves some.
func TestEachInvokerServesOneRequestAtATime(t *testing.T) {
	var total, peak atomic.Int32
	var fns []*fake
	var invokers []urlfront.Invoker
	for range 4 {
		fn := &fake{t: t, respond: func(_ context.Context, payload []byte) ([]byte, error) {
			n := total.Add(1)
			defer total.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(5 * time.Millisecond)
			var ev events.LambdaFunctionURLRequest
			if err := json.Unmarshal(payload, &ev); err != nil {
				return nil, err
			}
			return json.Marshal(map[string]string{"path": ev.RawPath})
		}}
		fns = append(fns, fn)
		invokers = append(invokers, fn)
	}
	front, log := start(t, urlfront.Config{Invokers: invokers})
	reqs := make([]*http.Request, 50)
	for i := range reqs {
		reqs[i] = request(t, http.MethodGet, fmt.Sprintf("%s/r/%d", front.URL(), i), nil, nil, true)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := fmt.Sprintf("/r/%d", i)
			resp, err := http.DefaultClient.Do(reqs[i])
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if want := `{"path":"` + path + `"}`; resp.StatusCode != 200 || string(b) != want {
				t.Errorf("%s: %d %s; want 200 %s", path, resp.StatusCode, b, want)
			}
		}()
	}
	wg.Wait()
	sum := 0
	for i, fn := range fns {
		if fn.calls() == 0 {
			t.Errorf("invoker %d served nothing", i)
		}
		sum += fn.calls()
	}
	if sum != 50 {
		t.Errorf("%d invocations; want 50", sum)
	}
	if p := peak.Load(); p > 4 {
		t.Errorf("%d invocations at once; want at most 4", p)
	}
	if n := strings.Count(log.String(), "\n"); n != 50 {
		t.Errorf("%d access lines; want 50", n)
	}
}

// TestCloseEndsInvocationsInFlight: Close does not wait out a hung
// function; its request is answered 502.
func TestCloseEndsInvocationsInFlight(t *testing.T) {
	started := make(chan struct{})
	fn := &fake{t: t, respond: func(ctx context.Context, _ []byte) ([]byte, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	front, _ := start(t, urlfront.Config{Invokers: []urlfront.Invoker{fn}, Timeout: time.Minute})
	status := make(chan int)
	req := request(t, http.MethodGet, front.URL()+"/", nil, nil, true)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	<-started
	began := time.Now()
	front.Close()
	if s := <-status; s != http.StatusBadGateway {
		t.Errorf("the request in flight: %d; want 502", s)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
}
