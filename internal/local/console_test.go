package local_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp/kb"

	"github.com/nudgehq/nudge/internal/console"
	"github.com/nudgehq/nudge/internal/console/browsertest"
	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/sink"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/internal/redrive"
	nudgestatus "github.com/nudgehq/nudge/internal/status"
	"github.com/nudgehq/nudge/pkg/provider/webhook"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// TestConsoleAnswersATicketInTheBrowser is the support console as support
// uses it, in headless Chromium with the keyboard alone, over the local
// system with its functions running: the consumer sends to the webhook
// sink (the provider's own record) and to the SES stand-in.
//
// From the overview, the find box reaches an account's reminders and
// renewal-4821's page, whose timeline shows it sent; its e-mail address,
// masked, is revealed with a reason, and the reveal is in its history once
// the page is read again. Five webhook deliveries the provider refused
// (400, for good) are one group of dead letters; the provider then takes
// them, and a selection of at most 2 of the group, confirmed on a page
// that lists exactly 2, is redriven: the consumer sends those 2, once
// each by the sink's count, and the other 3 stay dead and in the DLQ.
// Then a reminder is cancelled through its confirmation page. No page
// writes an error to the browser's console; each is screenshotted into
// .local/screenshots.
func TestConsoleAnswersATicketInTheBrowser(t *testing.T) {
	standintest.AWSConfig(t)
	started := time.Now()
	bins := standintest.Bootstraps(t, "consumer", "enqueue", "outcomes", "feedback")
	// The provider refuses the dead-* reminders, for good, until told.
	var refusing atomic.Bool
	refusing.Store(true)
	plan := func(key string, attempt int) sink.Fault {
		if strings.HasPrefix(key, "dead-") && refusing.Load() {
			return sink.Fault{Kind: "400"}
		}
		return sink.Fault{Kind: "ok"}
	}
	sys := startStageWith(t, "console", local.StandInStage(deployment.Dev()), plan)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The enqueue's cursors 1 s behind now, not 15 s, as the demo has them.
	h, err := sys.StartHarness(ctx, local.HarnessConfig{Bootstraps: bins, Consumers: 1, PollWait: time.Second, EnqueueOverrides: []string{"NUDGE_SETTLE=1s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	mapped := make(chan struct{})
	go func() { defer close(mapped); h.RunMappings(ctx) }()
	defer func() { cancel(); <-mapped }()

	led, err := ledger.New(sys.DB, ledger.Config{Table: sys.Resources.Table, Shards: sys.Stage.Shards})
	if err != nil {
		t.Fatal(err)
	}
	store, err := schedule.New(schedule.Config{Ledger: led, Providers: sys.Stage.Providers})
	if err != nil {
		t.Fatal(err)
	}
	const (
		ticket   = "renewal-4821"
		toCancel = "renewal-4822"
		address  = "renewal-4821@customers.example"
		group    = 5
	)
	now := time.Now().UTC()
	create := func(id, account string, due time.Time, deliveries ...schedule.DeliveryInput) {
		t.Helper()
		r, err := store.Validator().Validate(schedule.Input{ID: id, AccountRef: account, DueAt: due.Format(time.RFC3339Nano), Deliveries: deliveries,
			Metadata: map[string]string{"plan": "Pro", "renewsOn": due.Format("2 January 2006"), "reference": id}})
		if err != nil {
			t.Fatal(err)
		}
		if o, err := store.Create(ctx, r); err != nil || o != schedule.Created {
			t.Fatalf("create %s: %v, %v", id, o, err)
		}
	}
	hook := func(id string) schedule.DeliveryInput {
		return schedule.DeliveryInput{Channel: "webhook", Provider: webhook.Name, RecipientRef: "contact/" + id, TemplateRef: "renewal-notice-v3"}
	}
	create(ticket, "acct-4821", now, hook(ticket),
		schedule.DeliveryInput{Channel: "email", Provider: ses.Name, RecipientRef: "contact/4821", TemplateRef: "renewal-notice", Address: address})
	create(toCancel, "acct-4821", now.Add(2*time.Hour), hook(toCancel))
	var dead []message.DeliveryKey
	for i := range group {
		id := fmt.Sprintf("dead-%d", i+1)
		create(id, "acct-4900", now, hook(id))
		dead = append(dead, message.DeliveryKey{ReminderID: id, Channel: "webhook", Provider: webhook.Name})
	}
	email := message.DeliveryKey{ReminderID: ticket, Channel: "email", Provider: ses.Name}

	// The enqueue, on its schedule, hands the due ones to the consumer: the
	// ticket's are sent, the dead-* dead-lettered.
	settle(ctx, t, h, "the due deliveries end", func() (bool, string) {
		var waiting []string
		for _, k := range append([]message.DeliveryKey{email, {ReminderID: ticket, Channel: "webhook", Provider: webhook.Name}}, dead...) {
			d, err := led.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			want := ledger.StatusSent
			if slices.Contains(dead, k) {
				want = ledger.StatusDead
			}
			if d.Status != want {
				waiting = append(waiting, fmt.Sprintf("%s %s (want %s)", k, d.Status, want))
			}
		}
		return len(waiting) == 0, strings.Join(waiting, ", ")
	})
	settle(ctx, t, nil, "the DLQ holds the group", func() (bool, string) {
		d, err := nudgestatus.QueueDepth(ctx, sys.SQS, sys.Resources.DLQURL)
		if err != nil {
			t.Fatal(err)
		}
		return d.Total() == group, fmt.Sprintf("%+v", d)
	})
	// The e-mail's feedback, for its timeline; a lost receive only delays it.
	fb, stop := context.WithTimeout(ctx, 30*time.Second)
	if err := h.DrainFeedback(fb); err != nil {
		t.Logf("the e-mail's feedback is not recorded yet: %v", err)
	}
	stop()
	refusing.Store(false)
	t.Logf("set up in %v", time.Since(started).Round(time.Second))

	open := serveConsole(t, sys, led, store)
	base := open[:strings.Index(open, "/?token=")]
	b := browsertest.Start(t)
	shot := func(name string) {
		t.Helper()
		b.CheckConsole()
		b.Screenshot("console-" + name)
	}
	at := func(path string) func(*url.URL) bool {
		return func(u *url.URL) bool { return u.Path == path }
	}

	// The overview, then the find box: the account's reminders, the ticket's page.
	b.Open(open)
	b.WaitLocation(func(u *url.URL) bool { return u.Path == "/" && !u.Query().Has("token") })
	if h1 := b.Text("h1"); h1 != "Overview" {
		t.Fatalf("the console opens on %q", h1)
	}
	shot("overview")
	b.TabTo("#find-q")
	b.Type("account:acct-4821")
	b.Enter()
	b.WaitLocation(func(u *url.URL) bool { return strings.HasPrefix(u.Path, "/accounts/") })
	if rows := b.Texts("tbody th[scope=row]"); !slices.Equal(rows, []string{toCancel, ticket}) {
		t.Errorf("the account's reminders: %q; want %s, then %s (latest due first)", rows, toCancel, ticket)
	}
	shot("account")
	b.TabTo(`a[href="/reminders/` + ticket + `"]`)
	b.Enter()
	b.WaitLocation(at("/reminders/" + ticket))
	timeline := strings.Join(b.Texts(".timeline li"), "\n")
	for _, want := range []string{email.String() + " sent", ticket + ":webhook:webhook sent"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the timeline does not say %q:\n%s", want, timeline)
		}
	}
	if section := b.Text("#d-email-ses"); strings.Contains(section, address) || !strings.Contains(section, "(masked)") {
		t.Errorf("the e-mail's section before a reveal, its address not masked: %s", section)
	}
	shot("reminder") // the README's picture, docs/console.png (with its colours reduced to 256)

	// The reveal: a reason typed, the address shown in the answer alone, the
	// reveal in the history when the page is read again.
	const reason = "ticket 4821: no e-mail received"
	b.TabTo("#d-email-ses-reason")
	b.Type(reason)
	b.TabTo("#d-email-ses form.reveal button")
	b.Enter()
	b.WaitLocation(at("/reminders/" + ticket + "/reveal"))
	if got := b.Text("#d-email-ses .revealed"); got != address {
		t.Errorf("the revealed address: %q; want %s", got, address)
	}
	shot("reveal")
	b.Open(base + "/reminders/" + ticket)
	if body := b.Text("#d-email-ses"); strings.Contains(body, address) {
		t.Errorf("the address stays unmasked after a reload: %s", body)
	}
	if reveals := b.Texts(".timeline li.reveal"); len(reveals) != 1 || !strings.Contains(reveals[0], "address revealed to ana: "+reason) {
		t.Errorf("the timeline's reveals: %q; want one, by ana, with the reason", reveals)
	}
	b.CheckConsole()

	// The dead letters: the group of 5, a selection of at most 2, its
	// confirmation listing exactly 2, the redrive.
	b.TabTo(`header a[href="/dlq"]`)
	b.Enter()
	b.WaitLocation(at("/dlq"))
	// A receive whose answer fauxqs lost hides its messages for the review
	// hold (5 s here): the page is read again until it lists them all.
	settle(ctx, t, nil, "the dead letters page lists the group", func() (bool, string) {
		got := b.Text(`section[aria-labelledby="group-0"] dd`)
		if got == fmt.Sprintf("%d (%d messages)", group, group) {
			return true, ""
		}
		b.Open(base + "/dlq")
		return false, fmt.Sprintf("the first group, %s, has %s deliveries; want the %d dead-lettered", b.Text(`section[aria-labelledby="group-0"] h2`), got, group)
	})
	shot("dlq")
	b.TabTo("#max-0")
	b.Type(kb.End + kb.Backspace + kb.Backspace + kb.Backspace + "2")
	b.TabTo(`section[aria-labelledby="group-0"] form.select button`)
	b.Enter()
	b.WaitLocation(func(u *url.URL) bool { return strings.HasPrefix(u.Path, "/dlq/selections/") })
	chosen := b.Texts("table tbody td.mono")
	if len(chosen) != 2 {
		t.Fatalf("the confirmation lists %q; want exactly 2 letters", chosen)
	}
	for _, k := range chosen {
		if !slices.ContainsFunc(dead, func(d message.DeliveryKey) bool { return d.String() == k }) {
			t.Fatalf("the confirmation lists %s, not one of the group", k)
		}
	}
	shot("dlq-confirm")
	b.TabTo(`form[action="/dlq/redrive"] button`)
	b.Enter()
	b.WaitLocation(at("/dlq/redrive"))
	if got := b.Text("p[role=status]"); !strings.HasPrefix(got, "2 moved") {
		t.Errorf("the redrive says %q; want 2 moved", got)
	}
	shot("dlq-redriven")

	// The consumer sends exactly those 2, once each; the others stay.
	settle(ctx, t, nil, "the consumer sends the 2 redriven", func() (bool, string) {
		var waiting []string
		for _, k := range chosen {
			if sys.Sink.Sends(k) != 1 {
				waiting = append(waiting, k)
			}
		}
		return len(waiting) == 0, strings.Join(waiting, ", ")
	})
	var left []string
	for _, k := range dead {
		d, err := led.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := sys.Sink.Accepted(k.String())
		switch redriven := slices.Contains(chosen, k.String()); {
		case redriven && (d.Status != ledger.StatusSent || sys.Sink.Requests(k.String()) != 2 || a.Repeats != 0):
			t.Errorf("%s, redriven: %s, %d requests at the provider (%d repeats); want sent, the refused one and one more", k, d.Status,
				sys.Sink.Requests(k.String()), a.Repeats)
		case !redriven && (d.Status != ledger.StatusDead || sys.Sink.Requests(k.String()) != 1 || sys.Sink.Sends(k.String()) != 0):
			t.Errorf("%s, not chosen: %s, %d requests at the provider, %d sent; want dead, the refused request alone", k, d.Status,
				sys.Sink.Requests(k.String()), sys.Sink.Sends(k.String()))
		case !redriven:
			left = append(left, k.String())
		}
	}
	if r := sys.Sink.Resent(); len(r) != 0 {
		t.Errorf("the provider was sent again what it had accepted: %v", r)
	}
	rd, err := redrive.New(redrive.Config{Queue: sys.SQS, DLQURL: sys.Resources.DLQURL, TargetURL: sys.Resources.WorkURL, Ledger: led,
		ReviewHold: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	settle(ctx, t, nil, "the DLQ holds the letters not chosen", func() (bool, string) {
		letters, err := rd.List(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		var inDLQ []string
		for _, l := range letters {
			inDLQ = append(inDLQ, l.DeliveryKey)
		}
		slices.Sort(inDLQ)
		return slices.Equal(inDLQ, left), fmt.Sprintf("it holds %q; want the %d not chosen, %q", inDLQ, group-2, left)
	})

	// A cancel, through its confirmation page.
	b.TabTo("#find-q")
	b.Type(toCancel)
	b.Enter()
	b.WaitLocation(at("/reminders/" + toCancel))
	b.TabTo(`a[href="/reminders/` + toCancel + `/cancel"]`)
	b.Enter()
	b.WaitLocation(at("/reminders/" + toCancel + "/cancel"))
	if rows := b.Texts("tbody td.mono"); len(rows) != 1 || rows[0] != toCancel+":webhook:webhook" {
		t.Errorf("the cancel's confirmation lists %q; want the reminder's one delivery", rows)
	}
	shot("cancel-confirm")
	b.TabTo("#reason")
	b.Type("ticket 4822: the customer renewed early")
	b.TabTo("button.danger")
	b.Enter()
	b.WaitLocation(at("/reminders/" + toCancel))
	if state := b.Text("#d-webhook-webhook dd"); !strings.Contains(state, "cancelled") {
		t.Errorf("after the cancel, its delivery is %q", state)
	}
	if d, err := led.Get(ctx, message.DeliveryKey{ReminderID: toCancel, Channel: "webhook", Provider: webhook.Name}); err != nil ||
		d.Status != ledger.StatusCancelled {
		t.Errorf("in the ledger, after the cancel: %s, %v", d.Status, err)
	}
	shot("cancelled")
	t.Logf("the scenario took %v", time.Since(started).Round(time.Second))
}

// serveConsole serves a console with actions allowed, operated by ana, on
// the system's table and queues until the test ends, built as nudge
// console builds it (through the packages the CLI calls), and returns the
// address to open, with its token.
func serveConsole(t *testing.T, sys *local.System, led *ledger.Ledger, store *schedule.Store) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	res := sys.Resources
	srv, err := console.New(console.Config{Stage: sys.Stage.Name, Hosts: []string{ln.Addr().String(), "localhost:" + port}, AllowActions: true,
		Operator: "ana", Reminders: store, Ledger: led,
		Status: func(ctx context.Context) (nudgestatus.Report, error) {
			return nudgestatus.Read(ctx, nudgestatus.Config{Ledger: led, Table: res.Table, Queue: sys.SQS, WorkURL: res.WorkURL, DLQURL: res.DLQURL})
		},
		Redriver: func(by string) (*redrive.Redriver, error) {
			// A review hold of 5 s, not 30: a listing fauxqs lost the answer of
			// is read again sooner.
			return redrive.New(redrive.Config{Queue: sys.SQS, DLQURL: res.DLQURL, TargetURL: res.WorkURL, Ledger: led, By: by, ReviewHold: 5 * time.Second})
		},
		Reviver: func(by, reason string) (*redrive.Reviver, error) {
			return redrive.NewReviver(redrive.ReviveConfig{Ledger: led, By: by, Reason: reason})
		}})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return srv.URL("http://" + ln.Addr().String())
}

// settle waits until done says so, invoking the enqueue (h, if not nil) as
// its schedule does each time it looks, and fails t when ctx ends first,
// with what done last said.
func settle(ctx context.Context, t *testing.T, h *local.Harness, what string, done func() (bool, string)) {
	t.Helper()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if h != nil {
			if _, err := h.Enqueue.Invoke(ctx, fmt.Appendf(nil, `{"source":"aws.scheduler","scheduledTime":%q}`,
				time.Now().UTC().Format(time.RFC3339))); err != nil && ctx.Err() == nil {
				t.Fatalf("%s: the enqueue: %v", what, err)
			}
		}
		ok, why := done()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not yet when the test's time ran out: %s", what, why)
		case <-tick.C:
		}
	}
}
