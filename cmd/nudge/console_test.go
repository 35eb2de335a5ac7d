package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/console/browsertest"
)

// TestConsoleRefusesWhatItShouldNotServe: the flags' mistakes are usage
// errors, said before anything is read or bound; an address beyond
// loopback is refused, naming the risk, unless --public.
func TestConsoleRefusesWhatItShouldNotServe(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr", "8089"}, `--addr "8089" is not HOST:PORT`},
		{[]string{"--addr", "0.0.0.0:8089"}, "--addr 0.0.0.0:8089 is not a loopback address: the console would serve the stage's reminders"},
		{[]string{"--addr", ":0"}, "is not a loopback address"},
		{[]string{"--addr", "example.com:8089"}, "add --public if that is what you mean"},
		{[]string{"--operator", " "}, "no operator: give --operator WHO"},
		{[]string{"rem-1"}, `it takes no arguments ("rem-1")`},
		{[]string{"--allow-actions=maybe"}, "invalid argument"},
	} {
		var out, errs bytes.Buffer
		code := run(append([]string{"console", "--stage", "nowhere"}, c.args...), strings.NewReader(""), &out, &errs)
		if code != exitUsage || !strings.Contains(errs.String(), c.want) || out.Len() != 0 {
			t.Errorf("nudge console %s: exit %d, stderr %q, stdout %q; want exit 2 and %q", strings.Join(c.args, " "), code, errs.String(), out.String(), c.want)
		}
	}
}

func TestConsoleHostsAreTheBoundAddressAndItsLoopbackNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ask  string
		want []string
	}{
		{"127.0.0.1", []string{"127.0.0.1:P", "localhost:P"}},
		{"localhost", []string{"127.0.0.1:P", "localhost:P"}},
	} {
		ln, err := net.Listen("tcp", c.ask+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().String()[strings.LastIndexByte(ln.Addr().String(), ':')+1:]
		got := strings.Join(consoleHosts(c.ask, ln), " ")
		if want := strings.ReplaceAll(strings.Join(c.want, " "), "P", port); got != want {
			t.Errorf("listening on %s: hosts %q; want %q", c.ask, got, want)
		}
		if base := consoleBase(ln); base != "http://127.0.0.1:"+port {
			t.Errorf("listening on %s: the address printed is %s", c.ask, base)
		}
		ln.Close()
	}
}

// lines collects what a command prints, line by line, as it prints it.
type lines struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan string
}

func newLines() *lines { return &lines{seen: make(chan string, 64)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line) // a part, till its end comes
			return len(p), nil
		}
		select {
		case l.seen <- strings.TrimSuffix(line, "\n"):
		default:
		}
	}
}

// consoleLine is what nudge console prints once it listens.
var consoleLine = regexp.MustCompile(`^console: (http://127\.0\.0\.1:\d+/\?token=[0-9a-f]{32})  \((read-only|actions allowed)\) — Ctrl-C stops it$`)

// startConsole runs nudge console with args (the stage's flags added) until
// the test ends, and returns the address it printed, whether it said
// actions are allowed, and its exit code once stopped (stop).
func (f *opsFixture) startConsole(args ...string) (address, mode string, stop func() int) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errs := newLines(), &syncWriter{}
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, append([]string{"console", "--stage", f.stage, "--addr", "127.0.0.1:0"}, args...), strings.NewReader(""), out, errs)
	}()
	stopped := false
	stop = func() int {
		if stopped {
			return exitOK
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(15 * time.Second):
			f.t.Fatal("nudge console did not stop within 15s of Ctrl-C")
			return -1
		}
	}
	f.t.Cleanup(func() { stop() })
	select {
	case line := <-out.seen:
		m := consoleLine.FindStringSubmatch(line)
		if m == nil {
			f.t.Fatalf("nudge console printed %q; want %s", line, consoleLine)
		}
		return m[1], m[2], stop
	case code := <-done:
		f.t.Fatalf("nudge console exited %d before it listened: %s", code, errs.String())
	case <-time.After(30 * time.Second):
		f.t.Fatalf("nudge console printed no address in 30s: %s", errs.String())
	}
	return "", "", stop
}

// syncWriter is a buffer written by a command while a test may read it.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestConsoleServesTheStageUntilCtrlC: nudge console prints the address
// with the token; that address opens the overview of the stage (the token
// becomes a cookie), its JSON twin is nudge status's document, a request
// without the token is refused; Ctrl-C stops it, exit 0.
func TestConsoleServesTheStageUntilCtrlC(t *testing.T) {
	f := opsSetup(t)
	address, mode, stop := f.startConsole()
	if mode != "read-only" {
		t.Errorf("the console says %q; want read-only without --allow-actions", mode)
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	u, _ := url.Parse(address)
	if code, body := get("http://" + u.Host + "/"); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d %s; want 401", code, body)
	}
	if code, body := get(address); code != http.StatusOK || !strings.Contains(body, "<h1>Overview</h1>") || !strings.Contains(body, f.stage) {
		t.Errorf("the printed address: %d\n%s", code, body)
	}
	if code, body := get("http://" + u.Host + "/?format=json"); code != http.StatusOK || !strings.Contains(body, `"table": "`+f.res.Table+`"`) {
		t.Errorf("the overview's JSON twin, with the cookie: %d\n%s", code, body)
	}
	if code := stop(); code != exitOK {
		t.Errorf("after Ctrl-C: exit %d; want 0", code)
	}
	if _, err := http.Get(address); err == nil {
		t.Error("the console still answers after Ctrl-C")
	}
}

// TestConsoleInTheBrowser: the printed address, opened in Chromium, lands
// on the overview without the token in the address and with nothing the
// Content-Security-Policy blocks (no console error); the find box in every
// page's header is reached and used with the keyboard alone, and a
// reminder's id takes it to the reminder's page; the overview is
// screenshotted into .local/screenshots.
func TestConsoleInTheBrowser(t *testing.T) {
	f := opsSetup(t)
	address, _, _ := f.startConsole("--allow-actions")
	b := browsertest.Start(t)

	b.Open(address)
	u := b.WaitLocation(func(u *url.URL) bool { return u.Path == "/" && !u.Query().Has("token") })
	if h := b.Text("h1"); h != "Overview" {
		t.Errorf("the printed address lands on %q at %s; want the overview", h, u)
	}
	b.CheckConsole()
	b.Screenshot("overview")

	b.TabTo("#find-q")
	b.Type("rem-ops-1")
	b.Enter()
	found := b.WaitLocation(func(u *url.URL) bool { return u.Path != "/" })
	if found.Path != "/reminders/rem-ops-1" || b.Text("h1") != "Reminder rem-ops-1" {
		t.Errorf("the find box, with the keyboard alone, went to %s (%q); want rem-ops-1's page", found, b.Text("h1"))
	}
}
