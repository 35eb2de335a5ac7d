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
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/internal/status"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// The changing pages on the Memory ledger: a reminder's cancel, reschedule
// and revive, and the read-only console's refusals. The DLQ's pages, which
// need SQS, are in dlq_test.go.

// newChangeFixture is newFixture (security_test.go) with a reviver on its
// ledger, and edit applied to the console's Config.
func newChangeFixture(t *testing.T, allowActions bool, edit func(*console.Config)) *fixture {
	t.Helper()
	f := &fixture{clk: clock.NewFake(t0)}
	var err error
	if f.ledger, err = ledger.NewMemory(ledger.MemoryConfig{Clock: f.clk}); err != nil {
		t.Fatal(err)
	}
	if f.store, err = schedule.New(schedule.Config{Ledger: f.ledger, Clock: f.clk}); err != nil {
		t.Fatal(err)
	}
	cfg := console.Config{Stage: "test", Token: "secret-token", AllowActions: allowActions, Operator: "ana", Reminders: f.store, Ledger: f.ledger, Clock: f.clk,
		Status: func(context.Context) (status.Report, error) { return status.Report{Table: "nudge-test-ledger"}, nil },
		Reviver: func(by, reason string) (*redrive.Reviver, error) {
			return redrive.NewReviver(redrive.ReviveConfig{Ledger: f.ledger, By: by, Reason: reason, Clock: f.clk})
		}}
	if edit != nil {
		edit(&cfg)
	}
	f.serve(t, cfg)
	return f
}

// serve starts the console cfg on loopback, answering for its address.
func (f *fixture) serve(t *testing.T, cfg console.Config) {
	t.Helper()
	f.ts = httptest.NewUnstartedServer(nil)
	f.host = f.ts.Listener.Addr().String()
	cfg.Hosts = []string{f.host}
	var err error
	if f.srv, err = console.New(cfg); err != nil {
		t.Fatal(err)
	}
	f.ts.Config.Handler = f.srv
	f.ts.Start()
	t.Cleanup(f.ts.Close)
}

// reminder is rem-1 as the fixtures create it: an e-mail and an SMS, due
// a day after t0.
const reminder = `{"id":"rem-1","accountRef":"acct-1","dueAt":"2026-12-01T09:00:00Z","deliveries":[` +
	`{"channel":"email","provider":"webhook","recipientRef":"r","templateRef":"t"},{"channel":"sms","provider":"webhook","recipientRef":"r","templateRef":"t"}]}`

var (
	email = message.DeliveryKey{ReminderID: "rem-1", Channel: "email", Provider: "webhook"}
	sms   = message.DeliveryKey{ReminderID: "rem-1", Channel: "sms", Provider: "webhook"}
)

// create creates rem-1.
func (f *fixture) create(t *testing.T) {
	t.Helper()
	r, err := f.store.Validator().ParseJSON([]byte(reminder))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

// claim claims k at the fixture's now, as a consumer does.
func (f *fixture) claim(t *testing.T, k message.DeliveryKey) ledger.Delivery {
	t.Helper()
	d, err := f.ledger.Claim(context.Background(), ledger.Claim{Key: k, Token: "tok", LeaseUntil: f.clk.Now().Add(time.Minute), DueBy: f.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fixture) get(t *testing.T, k message.DeliveryKey) ledger.Delivery {
	t.Helper()
	d, err := f.ledger.Get(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// lastNote is the note of k's last history entry.
func (f *fixture) lastNote(t *testing.T, k message.DeliveryKey) string {
	t.Helper()
	h := f.get(t, k).History
	return h[len(h)-1].Note
}

// page GETs path with the session and wants code.
func (f *fixture) page(t *testing.T, path string, code int) string {
	t.Helper()
	got, body, _ := f.do(t, "GET", path, nil, true, nil)
	if got != code {
		t.Fatalf("GET %s: %d, want %d\n%s", path, got, code, body)
	}
	return body
}

// post POSTs the form, with the page's CSRF token, and returns the status,
// the body and where it redirects.
func (f *fixture) post(t *testing.T, path, token string, form url.Values) (int, string, string) {
	t.Helper()
	form.Set("csrf", token)
	code, body, h := f.do(t, "POST", path, form, true, nil)
	return code, body, h.Get("Location")
}

func TestReadOnlyRefusesEveryChangeAndItsConfirmation(t *testing.T) {
	t.Parallel()
	allowed := newChangeFixture(t, true, nil)
	allowed.create(t)
	token := csrf(t, allowed.page(t, "/reminders/rem-1/cancel", http.StatusOK))

	f := newChangeFixture(t, false, nil)
	f.create(t)
	for _, p := range []string{"/reminders/rem-1/cancel", "/reminders/rem-1/reschedule", "/reminders/rem-1/revive", "/dlq/selections/0123"} {
		if body := f.page(t, p, http.StatusForbidden); !strings.Contains(body, "started read-only: restart with --allow-actions") {
			t.Errorf("GET %s: the refusal does not say how to allow it:\n%s", p, body)
		}
	}
	form := url.Values{"reason": {"customer asked"}, "due": {"2026-12-08T09:00:00Z"}, "key": {email.String()}, "selection": {"0123"},
		"class": {"rejected"}, "max": {"2"}}
	for _, p := range []string{"/reminders/rem-1/cancel", "/reminders/rem-1/reschedule", "/reminders/rem-1/revive", "/dlq/select", "/dlq/redrive",
		"/dlq/release"} {
		code, body, _ := f.post(t, p, token, form)
		if code != http.StatusForbidden || !strings.Contains(body, "started read-only") {
			t.Errorf("POST %s: %d, want 403 saying read-only\n%s", p, code, body)
		}
	}
	for _, k := range []message.DeliveryKey{email, sms} {
		if d := f.get(t, k); d.Status != ledger.StatusPending || !d.DueAt.Equal(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) {
			t.Errorf("%s changed by a read-only console: %s due %v", k, d.Status, d.DueAt)
		}
	}
}

func TestCancelFromTheConsoleRecordsWhoAndWhy(t *testing.T) {
	t.Parallel()
	f := newChangeFixture(t, true, nil)
	f.create(t)
	page := f.page(t, "/reminders/rem-1/cancel", http.StatusOK)
	if strings.Count(page, "cancelled: never sent") != 2 || !strings.Contains(page, "cancelled by ana (console): ") {
		t.Fatalf("the confirmation page does not say what the cancel does to each delivery:\n%s", page)
	}
	token := csrf(t, page)
	code, body, _ := f.post(t, "/reminders/rem-1/cancel", token, url.Values{"reason": {"  "}})
	if code != http.StatusBadRequest || !strings.Contains(body, "give a reason") {
		t.Fatalf("without a reason: %d\n%s", code, body)
	}
	if d := f.get(t, email); d.Status != ledger.StatusPending {
		t.Fatalf("cancelled without a reason: %s", d.Status)
	}
	code, body, to := f.post(t, "/reminders/rem-1/cancel", token, url.Values{"reason": {"customer asked"}})
	if code != http.StatusSeeOther || to != "/reminders/rem-1" {
		t.Fatalf("cancel: %d to %q, want 303 to the reminder\n%s", code, to, body)
	}
	for _, k := range []message.DeliveryKey{email, sms} {
		if d := f.get(t, k); d.Status != ledger.StatusCancelled || f.lastNote(t, k) != "cancelled by ana (console): customer asked" {
			t.Errorf("%s: %s, noted %q", k, d.Status, f.lastNote(t, k))
		}
	}
}

func TestACancelRefusedForADeliverySaysSoInsteadOfRedirecting(t *testing.T) {
	t.Parallel()
	f := newChangeFixture(t, true, nil)
	f.create(t)
	f.clk.Advance(24 * time.Hour)
	if _, err := f.ledger.Complete(context.Background(), f.claim(t, sms), "receipt-1"); err != nil {
		t.Fatal(err)
	}
	page := f.page(t, "/reminders/rem-1/cancel", http.StatusOK)
	if !strings.Contains(page, "stays sent: it was sent at 2026-12-01T09:00:00.000Z") || strings.Count(page, "cancelled: never sent") != 1 {
		t.Fatalf("the confirmation page:\n%s", page)
	}
	code, body, _ := f.post(t, "/reminders/rem-1/cancel", csrf(t, page), url.Values{"reason": {"customer asked"}})
	if code != http.StatusOK || !strings.Contains(body, "not cancelled: it was already sent at 2026-12-01T09:00:00.000Z") {
		t.Fatalf("cancel: %d\n%s", code, body)
	}
	if f.get(t, email).Status != ledger.StatusCancelled || f.get(t, sms).Status != ledger.StatusSent {
		t.Fatalf("after the cancel: email %s, sms %s", f.get(t, email).Status, f.get(t, sms).Status)
	}
}

func TestRescheduleFromTheConsoleHasTheCLIsSemantics(t *testing.T) {
	t.Parallel()
	f := newChangeFixture(t, true, nil)
	f.create(t)
	page := f.page(t, "/reminders/rem-1/reschedule", http.StatusOK)
	if strings.Count(page, "moves to the new due time") != 2 || !strings.Contains(page, "Its window (24h") {
		t.Fatalf("the confirmation page:\n%s", page)
	}
	token := csrf(t, page)
	code, body, _ := f.post(t, "/reminders/rem-1/reschedule", token, url.Values{"due": {"tomorrow"}, "reason": {"customer on holiday"}})
	if code != http.StatusBadRequest || !strings.Contains(body, "RFC 3339") || !strings.Contains(body, `value="tomorrow"`) {
		t.Fatalf("a bad due time: %d\n%s", code, body)
	}
	code, body, to := f.post(t, "/reminders/rem-1/reschedule", token, url.Values{"due": {"2026-12-08T09:00:00Z"}, "reason": {"customer on holiday"}})
	if code != http.StatusSeeOther || to != "/reminders/rem-1" {
		t.Fatalf("reschedule: %d to %q\n%s", code, to, body)
	}
	due := time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC)
	const note = "rescheduled to 2026-12-08T09:00:00.000Z: by ana (console): customer on holiday"
	for _, k := range []message.DeliveryKey{email, sms} {
		d := f.get(t, k)
		if !d.DueAt.Equal(due) || !d.ExpiresAt.Equal(due.Add(24*time.Hour)) || f.lastNote(t, k) != note {
			t.Errorf("%s: due %v expires %v (the window kept?), noted %q", k, d.DueAt, d.ExpiresAt, f.lastNote(t, k))
		}
	}
}

func TestReviveFromTheConsoleRevivesWhatItShowed(t *testing.T) {
	t.Parallel()
	f := newChangeFixture(t, true, nil)
	f.create(t)
	f.clk.Advance(24 * time.Hour)
	if _, err := f.ledger.DeadLetter(context.Background(), f.claim(t, email), ledger.Failure{Class: "rejected", Message: "provider answered 400"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.Complete(context.Background(), f.claim(t, sms), "receipt-1"); err != nil {
		t.Fatal(err)
	}
	page := f.page(t, "/reminders/rem-1/revive", http.StatusOK)
	if !strings.Contains(page, `name="key" value="rem-1:email:webhook"`) || strings.Contains(page, `name="key" value="rem-1:sms:webhook"`) ||
		!strings.Contains(page, "not dead (sent); nothing to revive") {
		t.Fatalf("the confirmation page does not list the dead e-mail alone, and the sent SMS as not revived:\n%s", page)
	}
	token := csrf(t, page)
	// A post that did not show the e-mail revives nothing.
	code, body, _ := f.post(t, "/reminders/rem-1/revive", token, url.Values{"reason": {"provider fixed"}})
	if code != http.StatusOK || !strings.Contains(body, "not on the confirmation page") || f.get(t, email).Status != ledger.StatusDead {
		t.Fatalf("a revive of what was not shown: %d, %s\n%s", code, f.get(t, email).Status, body)
	}
	code, body, to := f.post(t, "/reminders/rem-1/revive", token, url.Values{"reason": {"provider fixed"}, "key": {email.String()}})
	if code != http.StatusSeeOther || to != "/reminders/rem-1" {
		t.Fatalf("revive: %d to %q\n%s", code, to, body)
	}
	if d := f.get(t, email); d.Status != ledger.StatusPending || f.lastNote(t, email) != "revived by ana (console): provider fixed" {
		t.Fatalf("the e-mail: %s, noted %q", d.Status, f.lastNote(t, email))
	}
	if f.get(t, sms).Status != ledger.StatusSent {
		t.Fatalf("the sms changed")
	}
}

func TestChangesToAnUnknownReminderAreNotFound(t *testing.T) {
	t.Parallel()
	f := newChangeFixture(t, true, nil)
	for _, p := range []string{"/reminders/rem-404/cancel", "/reminders/rem-404/reschedule", "/reminders/rem-404/revive"} {
		if body := f.page(t, p, http.StatusNotFound); !strings.Contains(body, "no such reminder") {
			t.Errorf("GET %s:\n%s", p, body)
		}
	}
}

func TestWithoutARedriverTheDeadLettersPageSaysSo(t *testing.T) {
	t.Parallel()
	f := newChangeFixture(t, true, nil)
	if body := f.page(t, "/dlq", http.StatusNotFound); !strings.Contains(body, "no DLQ to show") {
		t.Fatalf("/dlq without a redriver:\n%s", body)
	}
}
