package browsertest_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nudgehq/nudge/internal/console/browsertest"
)

// csp is as strict as the console's: the page's own scripts and styles
// alone.
const csp = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; form-action 'self'"

// pages serves a page with a form, one with an inline script (which the
// CSP blocks), one whose script throws, one whose script writes
// console.error, and the scripts.
func pages() http.Handler {
	mux := http.NewServeMux()
	page := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Security-Policy", csp)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>t</title>` +
				`<link rel="icon" href="/favicon.ico"><link rel="stylesheet" href="/s.css"></head><body>` + body + `</body></html>`))
		}
	}
	mux.HandleFunc("GET /{$}", page(`<a href="/inline">a link</a><form action="/find" method="get"><label for="q">Find</label>`+
		`<input id="q" name="q"><button>Find</button></form>`))
	mux.HandleFunc("GET /find", page(`<h1 id="found">found</h1>`))
	mux.HandleFunc("GET /inline", page(`<script>document.title = "ran"</script>`))
	mux.HandleFunc("GET /throws", page(`<script src="/throws.js"></script>`))
	mux.HandleFunc("GET /logs", page(`<script src="/logs.js"></script>`))
	js := func(src string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write([]byte(src))
		}
	}
	mux.HandleFunc("GET /throws.js", js(`throw new Error("boom from the page")`))
	mux.HandleFunc("GET /logs.js", js(`console.error("bad news from the page")`))
	mux.HandleFunc("GET /s.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		_, _ = w.Write([]byte("body { font-family: sans-serif }"))
	})
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return mux
}

// TestTheBrowserSeesWhatAPersonWould: a clean page leaves the console
// empty; the keyboard alone reaches a form's field, types and sends it; a
// script the CSP blocks, an uncaught exception and a console.error are
// each caught; a screenshot is a PNG in .local/screenshots.
func TestTheBrowserSeesWhatAPersonWould(t *testing.T) {
	local := t.TempDir()
	t.Setenv("NUDGE_LOCAL_DIR", local)
	srv := httptest.NewServer(pages())
	t.Cleanup(srv.Close)
	b := browsertest.Start(t)

	b.Open(srv.URL + "/")
	if p := b.TakeProblems(); len(p) != 0 {
		t.Fatalf("a clean page: %q", p)
	}
	if n := b.TabTo("#q"); n != 2 {
		t.Errorf("Tab reached the field after %d presses; want 2 (the link, then the field)", n)
	}
	b.Type("rem-42")
	b.Enter()
	u := b.WaitLocation(func(u *url.URL) bool { return u.Path == "/find" })
	if u.Query().Get("q") != "rem-42" || b.Text("#found") != "found" {
		t.Errorf("the form sent %s; want /find?q=rem-42", u)
	}
	if got := b.Texts("h1, p"); len(got) != 1 || got[0] != "found" {
		t.Errorf("the texts of h1, p: %q; want the heading's alone", got)
	}

	for path, want := range map[string]string{"/inline": "Content Security Policy", "/throws": "boom from the page", "/logs": "bad news from the page"} {
		b.Open(srv.URL + path)
		if p := b.TakeProblems(); !strings.Contains(strings.Join(p, "\n"), want) {
			t.Errorf("%s: the problems %q do not say %q", path, p, want)
		}
	}

	path := b.Screenshot("selftest")
	if path != filepath.Join(local, "screenshots", "selftest.png") {
		t.Errorf("the screenshot went to %s", path)
	}
	if shot, err := os.ReadFile(path); err != nil || len(shot) < 1000 {
		t.Errorf("the screenshot: %d bytes, %v", len(shot), err)
	}
}
