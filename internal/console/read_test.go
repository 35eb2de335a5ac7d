package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/console"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/status"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// newReadFixture is newFixture with the status report rep and account
// pages of pageSize reminders.
func newReadFixture(t *testing.T, allowActions bool, rep status.Report, pageSize int) *fixture {
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
		Operator: "ana", Reminders: f.store, Ledger: f.ledger, Clock: f.clk, AccountPage: pageSize,
		Status: func(context.Context) (status.Report, error) { return rep, nil }})
	if err != nil {
		t.Fatal(err)
	}
	f.ts.Config.Handler = f.srv
	f.ts.Start()
	t.Cleanup(f.ts.Close)
	return f
}

// remind creates reminder id of account, due a minute after the clock's
// now, with an e-mail through SES (an address) and an SMS through the
// webhook.
func (f *fixture) remind(t *testing.T, id, account string) {
	t.Helper()
	due := f.clk.Now().Add(time.Minute)
	r := schedule.Reminder{ID: id, AccountRef: account, DueAt: due, ExpiresAt: due.Add(24 * time.Hour),
		Metadata: map[string]string{"plan": "Pro"},
		Deliveries: []schedule.Delivery{
			{Channel: "email", Provider: "ses", RecipientRef: "acct-1/contact-1", TemplateRef: "renewal-notice", Address: "ana.lima@example.com"},
			{Channel: "sms", Provider: "webhook", RecipientRef: "acct-1/contact-1", TemplateRef: "renewal-sms"},
		}}
	if _, err := f.store.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

// play drives reminder id's deliveries, from their due time: the e-mail
// fails once (a 503), is sent 40 s late and bounces for good; the SMS is
// dead-lettered (a 400).
func (f *fixture) play(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	email := message.DeliveryKey{ReminderID: id, Channel: "email", Provider: "ses"}
	sms := message.DeliveryKey{ReminderID: id, Channel: "sms", Provider: "webhook"}
	claim := func(k message.DeliveryKey, tok string) ledger.Delivery {
		t.Helper()
		c, err := f.ledger.Claim(ctx, ledger.Claim{Key: k, Token: tok, LeaseUntil: f.clk.Now().Add(time.Minute), DueBy: f.clk.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	must := func(_ ledger.Delivery, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	f.clk.Advance(time.Minute + 10*time.Second)
	must(f.ledger.Retry(ctx, claim(email, "t-1"), ledger.Failure{Class: "server", Message: "503 slow down", NextAttemptAt: f.clk.Now().Add(30 * time.Second)}))
	must(f.ledger.DeadLetter(ctx, claim(sms, "t-2"), ledger.Failure{Class: "permanent", Message: "400 no such number"}))
	f.clk.Advance(30 * time.Second)
	must(f.ledger.Complete(ctx, claim(email, "t-3"), "ses-msg-1"))
	f.clk.Advance(time.Second)
	must(f.ledger.RecordFeedback(ctx, email, ledger.Feedback{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General",
		At: f.clk.Now(), ID: "fb-1", MessageID: "ses-msg-1"}))
	f.clk.Advance(time.Minute)
}

func TestFindGoesToTheReminderTheDeliveryOrTheAccount(t *testing.T) {
	t.Parallel()
	f := newReadFixture(t, false, status.Report{}, 0)
	f.remind(t, "renewal-4821", "acct-1")
	for _, c := range []struct{ q, to string }{
		{"renewal-4821", "/reminders/renewal-4821"},
		{" renewal-4821 ", "/reminders/renewal-4821"},
		{"renewal-4821:email:ses", "/reminders/renewal-4821#d-email-ses"},
		{"account:acct-1", "/accounts/acct-1"},
		{"acct-1", "/accounts/acct-1"},
		{"account:a b/c", "/accounts/a%20b%2Fc"},
	} {
		code, body, h := f.do(t, "GET", "/find?q="+url.QueryEscape(c.q), nil, true, nil)
		if code != http.StatusSeeOther || h.Get("Location") != c.to {
			t.Errorf("find %q: %d to %q, want 303 to %q\n%s", c.q, code, h.Get("Location"), c.to, body)
		}
	}
	_, _, h := f.do(t, "GET", "/find?q=renewal-4821:email:ses&format=json", nil, true, nil)
	if h.Get("Location") != "/reminders/renewal-4821?format=json#d-email-ses" {
		t.Errorf("the JSON find goes to %q, want the reminder's JSON twin", h.Get("Location"))
	}
	for _, c := range []struct{ q, says string }{
		{"renewal-9999", "reminder ids are case-sensitive"},
		{"Renewal-4821", "account:REF"},
		{"renewal-4821:email:sns", "no delivery renewal-4821:email:sns"},
		{"a:b", "reminderId:channel:provider"},
		{"account:", "account:acct-1"},
	} {
		code, body, _ := f.do(t, "GET", "/find?q="+url.QueryEscape(c.q), nil, true, nil)
		if code != http.StatusNotFound || !strings.Contains(body, "Nothing found") || !strings.Contains(body, c.says) || !strings.Contains(body, `name="q"`) {
			t.Errorf("find %q: %d; want 404, the find page saying %q\n%s", c.q, code, c.says, body)
		}
	}
	code, body, _ := f.do(t, "GET", "/find?q=nope&format=json", nil, true, nil)
	var doc struct {
		Query string
		Found bool
		Error string
	}
	if err := json.Unmarshal([]byte(body), &doc); code != http.StatusNotFound || err != nil || doc.Query != "nope" || doc.Found || doc.Error == "" {
		t.Errorf("the JSON twin of nothing found: %d %s", code, body)
	}
}

// TestTheReminderPageShowsItsDeliveriesAndTimeline: each delivery in its
// section (state, attempts, last error, receipt, feedback), the address
// masked, the history in time order with failures and feedback styled;
// the actions linked only when allowed; the JSON twin is the CLI's
// document.
func TestTheReminderPageShowsItsDeliveriesAndTimeline(t *testing.T) {
	t.Parallel()
	f := newReadFixture(t, false, status.Report{}, 0)
	f.remind(t, "renewal-4821", "acct-1")
	f.play(t, "renewal-4821")
	code, body, _ := f.do(t, "GET", "/reminders/renewal-4821", nil, true, nil)
	if code != http.StatusOK {
		t.Fatalf("%d\n%s", code, body)
	}
	for _, want := range []string{
		`id="d-email-ses"`, `id="d-sms-webhook"`,
		"sent, then bounced (Permanent/General) at", "ses-msg-1", "permanent: 400 no such number", "server: 503 slow down",
		"a•••@example.com", `<ol class="timeline">`, `<li class="failed">`, `<li class="feedback">`, `href="/accounts/acct-1"`,
		`name="reason"`, `action="/reminders/renewal-4821/reveal"`, "allowed in read-only mode",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "ana.lima@example.com") {
		t.Error("the page shows an address whole")
	}
	if strings.Contains(body, "/reminders/renewal-4821/cancel") {
		t.Error("a read-only console links the actions")
	}
	var times []string
	for _, li := range strings.Split(between(body, `<ol class="timeline">`, "</ol>"), "<li")[1:] {
		if at, _, ok := strings.Cut(strings.TrimPrefix(li[strings.Index(li, "<time>"):], "<time>"), "</time>"); ok {
			times = append(times, at)
		}
	}
	if len(times) < 6 || !slices.IsSorted(times) {
		t.Errorf("timeline times %v; want every entry, in time order", times)
	}

	code, body, _ = f.do(t, "GET", "/reminders/renewal-4821?format=json", nil, true, nil)
	var doc schedule.Document
	if err := json.Unmarshal([]byte(body), &doc); code != http.StatusOK || err != nil {
		t.Fatalf("JSON twin: %d %v\n%s", code, err, body)
	}
	if len(doc.Deliveries) != 2 || doc.Deliveries[0].Address != "a•••@example.com" || len(doc.History) < 6 || doc.Reminder.ID != "renewal-4821" {
		t.Errorf("JSON twin %+v", doc)
	}

	a := newReadFixture(t, true, status.Report{}, 0)
	a.remind(t, "renewal-4821", "acct-1")
	_, body, _ = a.do(t, "GET", "/reminders/renewal-4821", nil, true, nil)
	for _, want := range []string{`href="/reminders/renewal-4821/cancel"`, `href="/reminders/renewal-4821/reschedule"`, `href="/reminders/renewal-4821/revive"`} {
		if !strings.Contains(body, want) {
			t.Errorf("with actions allowed the page lacks %s", want)
		}
	}
	if code, body, _ := f.do(t, "GET", "/reminders/renewal-9999", nil, true, nil); code != http.StatusNotFound || !strings.Contains(body, "case-sensitive") {
		t.Errorf("an unknown reminder: %d\n%s", code, body)
	}
}

// reveal posts a reveal of renewal-4821's e-mail with reason.
func (f *fixture) reveal(t *testing.T, query, delivery, reason string) (int, string, http.Header) {
	t.Helper()
	_, page, _ := f.do(t, "GET", "/reminders/renewal-4821", nil, true, nil)
	return f.do(t, "POST", "/reminders/renewal-4821/reveal"+query, url.Values{"csrf": {csrf(t, page)}, "delivery": {delivery}, "reason": {reason}}, true, nil)
}

func reveals(t *testing.T, f *fixture) []ledger.Entry {
	t.Helper()
	d, err := f.ledger.Get(context.Background(), message.DeliveryKey{ReminderID: "renewal-4821", Channel: "email", Provider: "ses"})
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(d.History, func(e ledger.Entry) bool { return !e.Reveal })
}

func TestARevealWithoutAReasonIsRefused(t *testing.T) {
	t.Parallel()
	f := newReadFixture(t, false, status.Report{}, 0)
	f.remind(t, "renewal-4821", "acct-1")
	for _, reason := range []string{"", "   ", "ab", " a\n ", strings.Repeat("x", 96), strings.Repeat("é", 48)} {
		code, body, _ := f.reveal(t, "", "renewal-4821:email:ses", reason)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "Give a reason of 3 to 95 characters") ||
			strings.Contains(body, "ana.lima@example.com") {
			t.Errorf("reason %q: %d; want 422 with the reason's rule and the address masked\n%s", reason, code, body)
		}
	}
	if r := reveals(t, f); len(r) != 0 {
		t.Fatalf("refused reveals were recorded: %+v", r)
	}
}

// TestARevealShowsTheAddressAndTheHistoryRecordsIt: with a reason, in a
// read-only console, the answer (not a redirect) shows that one address
// whole and is not stored; the history says who, when and why, and the
// page read again masks the address and shows the reveal.
func TestARevealShowsTheAddressAndTheHistoryRecordsIt(t *testing.T) {
	t.Parallel()
	f := newReadFixture(t, false, status.Report{}, 0)
	f.remind(t, "renewal-4821", "acct-1")
	f.clk.Advance(time.Hour)
	code, body, h := f.reveal(t, "", "renewal-4821:email:ses", "  ticket 4821: was the e-mail right? ")
	if code != http.StatusOK || !strings.Contains(body, "ana.lima@example.com") || h.Get("Cache-Control") != "no-store" || h.Get("Location") != "" {
		t.Fatalf("reveal: %d, cache %q, location %q\n%s", code, h.Get("Cache-Control"), h.Get("Location"), body)
	}
	r := reveals(t, f)
	if len(r) != 1 || r[0].Note != "address revealed to ana: ticket 4821: was the e-mail right?" || r[0].At != ledger.Format(f.clk.Now()) ||
		r[0].Status != ledger.StatusPending {
		t.Fatalf("reveals recorded: %+v", r)
	}
	_, body, _ = f.do(t, "GET", "/reminders/renewal-4821", nil, true, nil)
	if strings.Contains(body, "ana.lima@example.com") || !strings.Contains(body, `<li class="reveal">`) ||
		!strings.Contains(body, "address revealed to ana: ticket 4821") {
		t.Errorf("the page read again:\n%s", body)
	}

	code, body, _ = f.reveal(t, "?format=json", "renewal-4821:email:ses", "ticket 4821")
	var doc schedule.Document
	if err := json.Unmarshal([]byte(body), &doc); code != http.StatusOK || err != nil || doc.Deliveries[0].Address != "ana.lima@example.com" {
		t.Errorf("the reveal's JSON twin: %d %v\n%s", code, err, body)
	}
	if code, body, _ := f.reveal(t, "", "renewal-4821:email:sns", "ticket 4821"); code != http.StatusNotFound || !strings.Contains(body, "no delivery") {
		t.Errorf("a reveal of no delivery: %d\n%s", code, body)
	}
	if code, _, _ := f.reveal(t, "", "other-1:email:ses", "ticket 4821"); code != http.StatusBadRequest {
		t.Errorf("a reveal of another reminder's delivery: %d", code)
	}
	wrong := url.Values{"csrf": {"guess"}, "delivery": {"renewal-4821:email:ses"}, "reason": {"ticket"}}
	code, _, _ = f.do(t, "POST", "/reminders/renewal-4821/reveal", wrong, true, nil)
	if code != http.StatusForbidden || len(reveals(t, f)) != 2 {
		t.Errorf("a reveal with a wrong CSRF token: %d, %d reveals recorded", code, len(reveals(t, f)))
	}
}

// TestTheOverviewShowsTheActivityAndTheLateness: the status report with
// its links (the oldest overdue delivery, the DLQ), the window's counts
// by provider, and the lateness as SVG bars with titles beside a table.
func TestTheOverviewShowsTheActivityAndTheLateness(t *testing.T) {
	t.Parallel()
	rep := status.Report{Table: "nudge-test-ledger", Live: 4, OverduePending: 1, OldestOverdueSeconds: 1200, OldestOverdueKey: "renewal-4821:email:ses",
		DLQ: status.Depth{Visible: 2}, DLQOldestAgeSeconds: 3600, DLQSampled: 2}
	f := newReadFixture(t, false, rep, 0)
	f.remind(t, "renewal-4821", "acct-1")
	f.play(t, "renewal-4821")
	code, body, _ := f.do(t, "GET", "/", nil, true, nil)
	if code != http.StatusOK {
		t.Fatalf("%d\n%s", code, body)
	}
	for _, want := range []string{
		`href="/reminders/renewal-4821#d-email-ses"`, "20m 0s past due", `href="/dlq"`, "2 in the DLQ", "oldest 1h 0m old",
		"The last 6 hours", `<th scope="row">ses</th><td class="num">1</td><td class="num">1</td>`,
		`<th scope="row">webhook</th><td class="num">0</td><td class="num">0</td><td class="num bad">1</td>`,
		"<svg", `<rect class="bar"`, "<title>15s–1m late: 1 delivery sent</title>", `<th scope="row">15s–1m</th><td class="num">1</td>`,
		`aria-current="page">6 h</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview lacks %s", want)
		}
	}
	if strings.Contains(body, " style=") || strings.Contains(body, "<script") {
		t.Error("the overview has inline style or script, which the CSP refuses")
	}
	code, body, _ = f.do(t, "GET", "/?format=json&hours=1", nil, true, nil)
	var doc struct {
		Table    string          `json:"table"`
		Activity status.Activity `json:"activity"`
	}
	if err := json.Unmarshal([]byte(body), &doc); code != http.StatusOK || err != nil || doc.Table != "nudge-test-ledger" || doc.Activity.Hours != 1 ||
		doc.Activity.Total != (status.Counts{Sent: 1, Retried: 1, DeadLettered: 1}) || doc.Activity.Lateness.Sent != 1 {
		t.Errorf("JSON twin: %d %v\n%s", code, err, body)
	}
	for _, h := range []string{"0", "73", "six"} {
		if code, body, _ := f.do(t, "GET", "/?hours="+h, nil, true, nil); code != http.StatusBadRequest || !strings.Contains(body, "1 to 72") {
			t.Errorf("hours=%s: %d\n%s", h, code, body)
		}
	}
}

func TestTheAccountPageListsItsRemindersAPageAtATime(t *testing.T) {
	t.Parallel()
	f := newReadFixture(t, false, status.Report{}, 2)
	for i := range 3 {
		f.remind(t, fmt.Sprint("renewal-", i), "acct-1")
		f.clk.Advance(time.Minute)
	}
	code, body, _ := f.do(t, "GET", "/accounts/acct-1", nil, true, nil)
	if code != http.StatusOK || !strings.Contains(body, `href="/reminders/renewal-2"`) || !strings.Contains(body, `href="/reminders/renewal-1"`) ||
		strings.Contains(body, `href="/reminders/renewal-0"`) || !strings.Contains(body, `href="/reminders/renewal-2#d-email-ses"`) {
		t.Fatalf("first page: %d\n%s", code, body)
	}
	nav := between(body, `<nav aria-label="Pages"`, "</nav>")
	if !strings.Contains(nav, `rel="next"`) || strings.Contains(nav, `rel="prev"`) {
		t.Fatalf("the first page has no next link, or a previous one:\n%s", body)
	}
	next := between(nav, `href="`, `"`)
	code, body, _ = f.do(t, "GET", strings.ReplaceAll(next, "&amp;", "&"), nil, true, nil)
	if code != http.StatusOK || !strings.Contains(body, `href="/reminders/renewal-0"`) || strings.Contains(body, `href="/reminders/renewal-1"`) ||
		!strings.Contains(body, `href="/accounts/acct-1" rel="prev"`) || strings.Contains(body, `rel="next"`) {
		t.Fatalf("second page (%s): %d\n%s", next, code, body)
	}
	code, body, _ = f.do(t, "GET", "/accounts/acct-1?format=json", nil, true, nil)
	var page intake.Page
	if err := json.Unmarshal([]byte(body), &page); code != http.StatusOK || err != nil || len(page.Reminders) != 2 || page.Next == "" ||
		page.Reminders[0].ID != "renewal-2" || page.Reminders[0].Deliveries[0].Status != "pending" {
		t.Errorf("JSON twin: %d %v\n%s", code, err, body)
	}
	if code, _, _ := f.do(t, "GET", "/accounts/acct-1?next=forged", nil, true, nil); code != http.StatusBadRequest {
		t.Errorf("a forged page token: %d", code)
	}
}

// between is the text of s between the first from and the next to.
func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(rest, to)
	return v
}

// TestARevealWaitsWhileTheDeliveryIsBeingSent: a delivery in flight
// refuses the reveal (409, saying to try again): its consumer's next write
// would replace the history, reveal included. Nothing is shown or written.
func TestARevealWaitsWhileTheDeliveryIsBeingSent(t *testing.T) {
	t.Parallel()
	f := newReadFixture(t, false, status.Report{}, 0)
	f.remind(t, "renewal-4821", "acct-1")
	f.clk.Advance(time.Minute)
	k := message.DeliveryKey{ReminderID: "renewal-4821", Channel: "email", Provider: "ses"}
	if _, err := f.ledger.Claim(context.Background(), ledger.Claim{Key: k, Token: "t-1", LeaseUntil: f.clk.Now().Add(time.Minute), DueBy: f.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	code, body, _ := f.reveal(t, "", k.String(), "ticket 4821")
	if code != http.StatusConflict || !strings.Contains(body, "being sent right now") || strings.Contains(body, "ana.lima@example.com") {
		t.Fatalf("a reveal while sending: %d\n%s", code, body)
	}
	if r := reveals(t, f); len(r) != 0 {
		t.Fatalf("a refused reveal was recorded: %+v", r)
	}
}

// TestARevealsReasonIsRecordedWhole: the longest reason the page takes
// (the history's note less "address revealed to ana: ") is kept whole.
func TestARevealsReasonIsRecordedWhole(t *testing.T) {
	t.Parallel()
	f := newReadFixture(t, false, status.Report{}, 0)
	f.remind(t, "renewal-4821", "acct-1")
	reason := strings.Repeat("y", 95)
	if code, body, _ := f.reveal(t, "", "renewal-4821:email:ses", reason); code != http.StatusOK {
		t.Fatalf("a 95-byte reason: %d\n%s", code, body)
	}
	if r := reveals(t, f); len(r) != 1 || r[0].Note != "address revealed to ana: "+reason {
		t.Fatalf("reveals %+v; want the reason whole", r)
	}
}
