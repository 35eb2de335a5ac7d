package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/console"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/status"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// t0 is the fixtures' now.
var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// fixture is a console on the Memory ledger with a fake status, served by
// httptest on loopback.
type fixture struct {
	srv    *console.Server
	ts     *httptest.Server
	host   string
	ledger *ledger.Memory
	store  *schedule.Store
	clk    *clock.Fake
}

func newFixture(t *testing.T, allowActions bool) *fixture {
	t.Helper()
	f := &fixture{clk: clock.NewFake(t0)}
	var err error
	if f.ledger, err = ledger.NewMemory(ledger.MemoryConfig{Clock: f.clk}); err != nil {
		t.Fatal(err)
	}
	if f.store, err = schedule.New(schedule.Config{Ledger: f.ledger, Clock: f.clk}); err != nil {
		t.Fatal(err)
	}
	f.ts = httptest.NewUnstartedServer(nil)
	f.host = f.ts.Listener.Addr().String()
	f.srv, err = console.New(console.Config{Stage: "test", Hosts: []string{f.host}, Token: "secret-token", AllowActions: allowActions,
		Operator: "ana", Reminders: f.store, Ledger: f.ledger, Clock: f.clk,
		Status: func(context.Context) (status.Report, error) {
			return status.Report{Table: "nudge-test-ledger", Live: 3}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	f.ts.Config.Handler = f.srv
	f.ts.Start()
	t.Cleanup(f.ts.Close)
	return f
}

// do sends a request to the console with the session cookie when
// session, and returns the answer's status and body.
func (f *fixture) do(t *testing.T, method, path string, form url.Values, session bool, edit func(*http.Request)) (int, string, http.Header) {
	t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, f.ts.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://"+f.host)
	}
	if session {
		req.AddCookie(&http.Cookie{Name: f.srv.Cookie(), Value: "secret-token"})
	}
	if edit != nil {
		edit(req)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String(), resp.Header
}

// csrf reads the CSRF token from a page's form.
func csrf(t *testing.T, page string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `name="csrf" value="`)
	if !ok {
		t.Fatalf("no CSRF field in the page:\n%s", page)
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

func TestTheTokenInTheAddressBecomesACookieAndLeavesTheAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	code, _, h := f.do(t, "GET", "/find?q=rem-1&token=secret-token", nil, false, nil)
	if code != http.StatusSeeOther || h.Get("Location") != "/find?q=rem-1" {
		t.Fatalf("first visit: %d to %q; want 303 to the address without its token", code, h.Get("Location"))
	}
	c := h.Get("Set-Cookie")
	if !strings.Contains(c, f.srv.Cookie()+"=secret-token") || !strings.HasPrefix(f.srv.Cookie(), console.CookieName+"_") || !strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Strict") {
		t.Fatalf("cookie %q; want the token, HttpOnly, SameSite=Strict", c)
	}
	if code, body, _ := f.do(t, "GET", "/", nil, true, nil); code != http.StatusOK || !strings.Contains(body, "<dd>3</dd>") {
		t.Fatalf("with the cookie: %d\n%s", code, body)
	}
}

func TestRequestsThatDoNotBelongAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	cases := []struct {
		name   string
		method string
		path   string
		form   url.Values
		cookie bool
		edit   func(*http.Request)
		want   int
	}{
		{"no session", "GET", "/", nil, false, nil, http.StatusUnauthorized},
		{"a wrong token in the address", "GET", "/?token=guess", nil, false, nil, http.StatusUnauthorized},
		{"a wrong cookie", "GET", "/", nil, false, func(r *http.Request) { r.AddCookie(&http.Cookie{Name: f.srv.Cookie(), Value: "guess"}) },
			http.StatusUnauthorized},
		{"another host (DNS rebinding)", "GET", "/", nil, true, func(r *http.Request) { r.Host = "attacker.example:80" }, http.StatusMisdirectedRequest},
		{"a POST without the CSRF token", "POST", "/", url.Values{"x": {"1"}}, true, nil, http.StatusForbidden},
		{"a POST with a wrong CSRF token", "POST", "/", url.Values{"csrf": {"guess"}}, true, nil, http.StatusForbidden},
		{"a POST from another origin", "POST", "/", url.Values{"csrf": {"any"}}, true, func(r *http.Request) { r.Header.Set("Origin", "http://attacker.example") },
			http.StatusForbidden},
		{"a POST without an origin", "POST", "/", url.Values{"csrf": {"any"}}, true, func(r *http.Request) { r.Header.Del("Origin") }, http.StatusForbidden},
		{"a page of another site (an image on another port of the loopback)", "GET", "/", nil, true,
			func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-site") }, http.StatusForbidden},
		{"a page of another origin", "GET", "/dlq", nil, true, func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, http.StatusForbidden},
		{"a multipart POST", "POST", "/", url.Values{"csrf": {"any"}}, true,
			func(r *http.Request) { r.Header.Set("Content-Type", "multipart/form-data; boundary=x") }, http.StatusUnsupportedMediaType},
		{"a POST from an opaque origin", "POST", "/", url.Values{"csrf": {"any"}}, true, func(r *http.Request) { r.Header.Set("Origin", "null") },
			http.StatusForbidden},
	}
	for _, c := range cases {
		code, body, h := f.do(t, c.method, c.path, c.form, c.cookie, c.edit)
		if code != c.want {
			t.Errorf("%s: %d, want %d (%s)", c.name, code, c.want, strings.TrimSpace(body))
		}
		if h.Get("Content-Security-Policy") == "" || h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: security headers missing: %v", c.name, h)
		}
		if strings.Contains(body, "nudge-test-ledger") {
			t.Errorf("%s: the refusal shows the stage's data", c.name)
		}
	}
}

func TestEveryPageHasAStrictContentSecurityPolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	_, _, h := f.do(t, "GET", "/", nil, true, nil)
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP %q allows inline or eval'd script", csp)
	}
}

func TestTheOverviewHasItsJSONTwin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	code, body, h := f.do(t, "GET", "/?format=json", nil, true, nil)
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" || !strings.Contains(body, `"table": "nudge-test-ledger"`) {
		t.Fatalf("%d %s\n%s", code, h.Get("Content-Type"), body)
	}
}

// TestTheAddressBarAndTheConsolesOwnPagesGetIn: Sec-Fetch-Site none (the
// address bar) and same-origin (a link of the console) are let in.
func TestTheAddressBarAndTheConsolesOwnPagesGetIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	for _, site := range []string{"none", "same-origin"} {
		if code, _, _ := f.do(t, "GET", "/", nil, true, func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", site) }); code != http.StatusOK {
			t.Errorf("Sec-Fetch-Site %s: %d", site, code)
		}
	}
}

// TestABodyTooLargeIsRefused: a form of more than 64 KiB is not read.
func TestABodyTooLargeIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	big := url.Values{"csrf": {"x"}, "reason": {strings.Repeat("a", 128<<10)}}
	if code, _, _ := f.do(t, "POST", "/reminders/rem-1/cancel", big, true, nil); code == http.StatusOK || code == http.StatusSeeOther {
		t.Fatalf("a 128 KiB form: %d", code)
	}
}
