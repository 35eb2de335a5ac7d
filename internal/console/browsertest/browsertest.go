package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/nudgehq/nudge/internal/local/standin"
)

// StepTimeout bounds each step a Browser takes (a page's load, a key, a
// wait for an element).
const StepTimeout = 20 * time.Second

// startTimeout bounds Chromium's start.
const startTimeout = 60 * time.Second

// maxTabs is how many times TabTo presses Tab before it gives up.
const maxTabs = 60

// Browser is headless Chromium with one tab, for one test.
type Browser struct {
	t   testing.TB
	ctx context.Context

	mu       sync.Mutex
	problems []string
}

// Chromium returns Chromium's path: $NUDGE_CHROMIUM (nudge local exec sets
// it once it has installed Chromium), else the one on this machine.
func Chromium() (string, error) {
	if p := os.Getenv("NUDGE_CHROMIUM"); p != "" {
		return p, nil
	}
	return standin.FindChromium()
}

// required reports whether a test must run, not skip, without Chromium:
// where the stand-ins are required (make test, CI).
func required() bool {
	return os.Getenv("NUDGE_REQUIRE_STANDINS") != "" || os.Getenv("CI") != ""
}

// Start starts headless Chromium for t with a fresh profile, and stops it
// when t ends. Without Chromium it skips t, or fails it where the stand-ins
// are required; it fails t when Chromium does not start. When t ends, t
// fails if a page wrote an error to the console that CheckConsole has not
// reported yet.
func Start(t testing.TB) *Browser {
	t.Helper()
	path, err := Chromium()
	if err != nil {
		if required() {
			t.Fatalf("browsertest: %v", err)
		}
		t.Skipf("browsertest: %v", err)
	}
	profile := t.TempDir()
	var output syncBuffer
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900), chromedp.CombinedOutput(&output))
	for _, f := range standin.ChromiumFlags {
		opts = append(opts, chromedp.Flag(strings.TrimPrefix(f, "--"), true))
	}
	actx, stopAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, stopTab := chromedp.NewContext(actx)
	t.Cleanup(func() { stopTab(); stopAlloc() })
	b := &Browser{t: t, ctx: ctx}
	// The first call starts Chromium, which lives as long as that call's
	// context: it cannot take a timeout, so the wait has its own.
	started := make(chan error, 1)
	go func() { started <- chromedp.Listen(ctx, b.record) }()
	select {
	case err = <-started:
	case <-time.After(startTimeout): // wall clock: Chromium's start runs on it
		err = fmt.Errorf("no answer in %v", startTimeout)
	}
	if err != nil {
		t.Fatalf("browsertest: Chromium (%s) did not start: %v\nits output:\n%s", path, err, output.String())
	}
	t.Cleanup(b.CheckConsole)
	return b
}

// record keeps what a page reports as an error: a console.error or a
// failed console.assert, an uncaught exception, and an error of the
// browser's log (a resource the Content-Security-Policy refused, one that
// failed to load). It runs in chromedp's reading loop: it only appends.
func (b *Browser) record(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		var args []string
		for _, a := range ev.Args {
			if a.Description != "" {
				args = append(args, a.Description)
			} else {
				args = append(args, string(a.Value))
			}
		}
		p = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		p = "uncaught exception: " + d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			p += " " + d.Exception.Description
		}
		if d.URL != "" {
			p += fmt.Sprintf(" (%s:%d)", d.URL, d.LineNumber+1)
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level != log.EntryLevelError {
			return
		}
		p = fmt.Sprintf("%s error: %s", ev.Entry.Source, ev.Entry.Text)
		if ev.Entry.URL != "" {
			p += " (" + ev.Entry.URL + ")"
		}
	default:
		return
	}
	b.mu.Lock()
	b.problems = append(b.problems, p)
	b.mu.Unlock()
}

// TakeProblems returns the errors the pages wrote since the last call, and
// forgets them: for a test that expects some.
func (b *Browser) TakeProblems() []string {
	b.t.Helper()
	// A round trip: every event sent before its answer has been recorded.
	_, _ = b.eval("true")
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

// CheckConsole fails the test if a page wrote an error to the console
// since the last check.
func (b *Browser) CheckConsole() {
	b.t.Helper()
	if p := b.TakeProblems(); len(p) > 0 {
		b.t.Errorf("browsertest: the page at %s wrote errors to the console:\n  %s", b.Location(), strings.Join(p, "\n  "))
	}
}

// step is the context of n steps in the tab: StepTimeout each.
func (b *Browser) step(n int) (context.Context, context.CancelFunc) {
	// wall clock: Chromium runs on it, and a test waits for it no longer
	return context.WithTimeout(b.ctx, StepTimeout*time.Duration(max(1, n)))
}

// Do runs the steps in the tab, each within StepTimeout, and fails the test
// on an error.
func (b *Browser) Do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.step(len(steps))
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browsertest: at %s: %v", b.Location(), err)
	}
}

// Open loads the address and waits for the page's body.
func (b *Browser) Open(address string) {
	b.t.Helper()
	b.Do(chromedp.Navigate(address), chromedp.WaitReady(chromedp.CSS("body")))
}

// Location is the tab's address.
func (b *Browser) Location() string {
	ctx, cancel := b.step(1)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return "(unknown: " + err.Error() + ")"
	}
	return loc
}

// WaitLocation waits until the tab's address satisfies ok (a form sent, a
// link followed), then for the new page's body, and returns the address.
func (b *Browser) WaitLocation(ok func(*url.URL) bool) *url.URL {
	b.t.Helper()
	deadline := time.Now().Add(StepTimeout) // wall clock: the page navigates in Chromium, on it
	var last string
	for time.Now().Before(deadline) { // wall clock: as above
		last = b.Location()
		if u, err := url.Parse(last); err == nil && ok(u) {
			b.Do(chromedp.WaitReady(chromedp.CSS("body")))
			return u
		}
		time.Sleep(50 * time.Millisecond) // wall clock: as above
	}
	b.t.Fatalf("browsertest: the tab stayed at %s", last)
	return nil
}

// Text is the text of the first element sel matches (a CSS selector).
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	ctx, cancel := b.step(1)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("browsertest: no text of %q at %s: %v", sel, b.Location(), err)
	}
	return s
}

// Texts are the texts of every element sel matches (a CSS selector), in
// the page's order, each trimmed: a table's cells, a list's entries.
func (b *Browser) Texts(sel string) []string {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	ctx, cancel := b.step(1)
	defer cancel()
	texts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string]("Array.from(document.querySelectorAll("+string(q)+"), e => e.textContent.trim())"))
	if err != nil {
		b.t.Fatalf("browsertest: the texts of %q at %s: %v", sel, b.Location(), err)
	}
	return texts
}

// Focused reports whether the element with the focus matches sel (a CSS
// selector).
func (b *Browser) Focused(sel string) bool {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	v, err := b.eval("document.activeElement !== null && document.activeElement.matches(" + string(q) + ")")
	if err != nil {
		b.t.Fatalf("browsertest: which element has the focus: %v", err)
	}
	return v
}

func (b *Browser) eval(expr string) (bool, error) {
	ctx, cancel := b.step(1)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
}

// TabTo presses Tab until the element sel matches (a CSS selector) has the
// focus, as a person with a keyboard alone would reach it, and returns how
// many presses it took; it fails the test if Tab never reaches it.
func (b *Browser) TabTo(sel string) int {
	b.t.Helper()
	for n := 1; n <= maxTabs; n++ {
		b.Do(chromedp.KeyEvent(kb.Tab))
		if b.Focused(sel) {
			return n
		}
	}
	b.t.Fatalf("browsertest: %d presses of Tab at %s never reached %q: the keyboard alone cannot", maxTabs, b.Location(), sel)
	return 0
}

// Type types text into the element that has the focus.
func (b *Browser) Type(text string) {
	b.t.Helper()
	b.Do(chromedp.KeyEvent(text))
}

// Enter presses Enter on the element that has the focus.
func (b *Browser) Enter() {
	b.t.Helper()
	b.Do(chromedp.KeyEvent(kb.Enter))
}

// ScreenshotDir is where screenshots go: .local/screenshots (the
// stand-ins' folder's).
func ScreenshotDir() (string, error) {
	dir, err := standin.DefaultDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "screenshots"), nil
}

// Screenshot writes the whole page as a PNG to .local/screenshots/name.png
// and returns its path.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := b.step(1)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("browsertest: screenshot %s: %v", name, err)
	}
	dir, err := ScreenshotDir()
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	path := filepath.Join(dir, name+".png")
	if err == nil {
		err = os.WriteFile(path, png, 0o644)
	}
	if err != nil {
		b.t.Fatalf("browsertest: screenshot %s: %v", name, err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		b.t.Fatalf("browsertest: screenshot %s is not a PNG", name)
	}
	return path
}

// syncBuffer is a buffer Chromium's output goroutine writes while a test
// may read it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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
