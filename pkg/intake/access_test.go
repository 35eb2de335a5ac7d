package intake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// The callers of these tests: two services, and a support tool whose role
// (with a path) the stage gives full access.
const (
	billing = "arn:aws:sts::123456789012:assumed-role/billing-service"
	booking = "arn:aws:sts::123456789012:assumed-role/booking-app"
	support = "arn:aws:sts::123456789012:assumed-role/Support"
)

// callerFixture is the handler over an in-memory ledger, each request
// sent as the caller its X-Test-Caller header names, with one request id,
// so that two answers can be compared byte for byte.
type callerFixture struct {
	*fixture
	store *schedule.Store
}

func setupCallers(t *testing.T) *callerFixture {
	t.Helper()
	clk := clock.NewFake(now)
	led := memoryLedger(t, clk)
	store := newStore(t, schedule.Config{Ledger: led, Clock: clk})
	h := newHandler(t, intake.Config{Store: store, FullAccess: []string{"arn:aws:iam::123456789012:role/tools/Support"}})
	asCaller := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(intake.WithCaller(r.Context(), r.Header.Get("X-Test-Caller"), "req-1")))
		})
	}
	return &callerFixture{fixture: serve(t, clk, led, h, asCaller), store: store}
}

func (f *callerFixture) as(caller, method, path string, v any) answer {
	f.t.Helper()
	var body []byte
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			f.t.Fatal(err)
		}
		body = b
	}
	req, err := http.NewRequest(method, f.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if v != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Test-Caller", caller)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(res.Body)
	res.Header.Del("Date")
	return answer{status: res.StatusCode, header: res.Header, body: b.Bytes()}
}

func sameAnswer(a, b answer) bool {
	return a.status == b.status && bytes.Equal(a.body, b.body) && fmt.Sprint(a.header) == fmt.Sprint(b.header)
}

// TestAnotherCallersReminderIsAbsentToIt: to another caller, a reminder's
// GET, DELETE and reschedule answer exactly as for an id no reminder has
// (status, headers and body), whatever the request holds, and change
// nothing.
func TestAnotherCallersReminderIsAbsentToIt(t *testing.T) {
	f := setupCallers(t)
	later := map[string]string{"dueAt": now.Add(48 * time.Hour).Format(time.RFC3339)}
	backwards := map[string]string{"dueAt": now.Add(48 * time.Hour).Format(time.RFC3339), "expiresAt": now.Add(47 * time.Hour).Format(time.RFC3339)}
	probe := func() []answer {
		return []answer{
			f.as(booking, "GET", "/v1/reminders/rem-1", nil),
			f.as(booking, "DELETE", "/v1/reminders/rem-1", nil),
			f.as(booking, "POST", "/v1/reminders/rem-1/reschedule", later),
			f.as(booking, "POST", "/v1/reminders/rem-1/reschedule", backwards),
		}
	}
	absent := probe()
	for _, a := range absent {
		if a.status != 404 || a.problem(t).Type != intake.ProblemNotFound {
			t.Fatalf("an absent id: %d %s", a.status, a.body)
		}
	}
	if a := f.as(billing, "PUT", "/v1/reminders/rem-1", reminder("")); a.status != 201 {
		t.Fatalf("billing's PUT: %d %s", a.status, a.body)
	}
	for i, a := range probe() {
		if !sameAnswer(a, absent[i]) {
			t.Errorf("booking's request %d on billing's reminder: %d %v %s; for an absent id: %d %v %s",
				i, a.status, a.header, a.body, absent[i].status, absent[i].header, absent[i].body)
		}
	}
	d, err := f.led.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-1", Channel: "sms", Provider: "webhook"})
	if err != nil || d.Status != ledger.StatusPending || !d.DueAt.Equal(now.Add(time.Hour)) || len(d.History) != 1 {
		t.Errorf("billing's delivery after booking's requests: %+v, %v", d, err)
	}
	if a := f.as(billing, "GET", "/v1/reminders/rem-1", nil); a.status != 200 || !strings.Contains(string(a.body), `"createdBy":"`+billing+`"`) {
		t.Errorf("billing's GET of its own: %d %s", a.status, a.body)
	}
	if a := f.as(billing, "DELETE", "/v1/reminders/rem-1", nil); a.status != 200 {
		t.Errorf("billing's DELETE of its own: %d %s", a.status, a.body)
	}
}

// TestAPutOfAnotherCallersIDRevealsNothing: another caller's PUT of a
// taken id (the same reminder, one differing only in the address, one
// differing in its time) and its batch entry answer one 409, naming no
// field and quoting nothing of the stored reminder, and write nothing; the
// creator's PUT differing only in the address is the conflict it was,
// with both addresses masked.
func TestAPutOfAnotherCallersIDRevealsNothing(t *testing.T) {
	f := setupCallers(t)
	withAddress := func(address string) map[string]any {
		r := reminder("")
		r["deliveries"] = []map[string]string{{"channel": "email", "provider": "ses", "recipientRef": "contact-2", "templateRef": "renewal", "address": address}}
		return r
	}
	stored, other := "jane.doe@example.com", "john.roe@example.org"
	if a := f.as(billing, "PUT", "/v1/reminders/rem-1", withAddress(stored)); a.status != 201 {
		t.Fatalf("billing's PUT: %d %s", a.status, a.body)
	}
	moved := withAddress(stored)
	moved["dueAt"] = now.Add(2 * time.Hour).Format(time.RFC3339)
	var answers []answer
	for _, body := range []map[string]any{withAddress(stored), withAddress(other), moved} {
		answers = append(answers, f.as(booking, "PUT", "/v1/reminders/rem-1", body))
	}
	for i, a := range answers {
		p := a.problem(t)
		if a.status != 409 || p.Type != intake.ProblemConflict || p.Field != "" || !sameAnswer(a, answers[0]) {
			t.Errorf("booking's PUT %d of billing's id: %d %s; want one 409 for all, naming no field", i, a.status, a.body)
		}
		for _, leak := range []string{"jane", "john", "example", "•", "ses", "contact-2", "renewal", "acct-1", ledger.Format(now.Add(time.Hour))} {
			if strings.Contains(string(a.body), leak) {
				t.Errorf("booking's PUT %d answer quotes %q: %s", i, leak, a.body)
			}
		}
	}
	batch := withAddress(other)
	batch["id"] = "rem-1"
	a := f.as(booking, "POST", "/v1/reminders", map[string]any{"reminders": []any{batch}})
	var res intake.BatchResult
	if err := json.Unmarshal(a.body, &res); err != nil || len(res.Results) != 1 || res.Results[0].Status != 409 || res.Results[0].Problem.Field != "" ||
		strings.Contains(string(a.body), "jane") || strings.Contains(string(a.body), "example") {
		t.Errorf("booking's batch entry of billing's id: %d %s", a.status, a.body)
	}
	stored1, _ := f.led.ReadReminder(context.Background(), "rem-1")
	if len(stored1.Deliveries) != 1 || stored1.Deliveries[0].Address != stored || !stored1.Reminder.DueAt.Equal(now.Add(time.Hour)) ||
		stored1.Reminder.CreatedBy != billing {
		t.Errorf("billing's reminder after booking's PUTs: %+v %+v", stored1.Reminder, stored1.Deliveries)
	}
	// The creator: unchanged for the same, a conflict naming the address,
	// masked, for another.
	if a := f.as(billing, "PUT", "/v1/reminders/rem-1", withAddress(stored)); a.status != 200 {
		t.Errorf("billing's PUT again: %d %s", a.status, a.body)
	}
	a = f.as(billing, "PUT", "/v1/reminders/rem-1", withAddress(other))
	if p := a.problem(t); a.status != 409 || !strings.Contains(p.Field, "address") ||
		strings.Contains(string(a.body), "jane") || strings.Contains(string(a.body), "john") {
		t.Errorf("billing's PUT with another address: %d %s; want a conflict naming the address, both masked", a.status, a.body)
	}
}

// TestTheListingShowsTheCallersOwn: an account's listing holds the
// caller's own reminders alone, in order, whatever the page size, while
// other callers' and unattributed ones are interleaved; a page of others'
// reminders beyond what one call reads is empty with a next token; a
// full-access caller lists them all.
func TestTheListingShowsTheCallersOwn(t *testing.T) {
	f := setupCallers(t)
	ctx := context.Background()
	mine := map[string][]string{}
	for i := range 15 {
		r := reminder("")
		r["dueAt"] = now.Add(time.Duration(30-i) * time.Hour).Format(time.RFC3339) // latest due first: i's order
		id := fmt.Sprintf("rem-%02d", i)
		switch i % 3 {
		case 0:
			f.as(billing, "PUT", "/v1/reminders/"+id, r)
			mine[billing] = append(mine[billing], id)
		case 1:
			f.as(booking, "PUT", "/v1/reminders/"+id, r)
			mine[booking] = append(mine[booking], id)
		default: // the operator's CLI: no creator
			b, _ := json.Marshal(r)
			rem, err := f.store.Validator().ParseJSONAs(id, b)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.store.Create(ctx, rem); err != nil {
				t.Fatal(err)
			}
		}
		mine[support] = append(mine[support], id)
	}
	list := func(caller string, limit int) (ids []string, empty int) {
		t.Helper()
		next := ""
		for pages := 0; ; pages++ {
			if pages > 40 {
				t.Fatal("the listing does not end")
			}
			q := url.Values{"account": {"acct-1"}, "limit": {fmt.Sprint(limit)}}
			if next != "" {
				q.Set("next", next)
			}
			a := f.as(caller, "GET", "/v1/reminders?"+q.Encode(), nil)
			var page intake.Page
			if err := json.Unmarshal(a.body, &page); a.status != 200 || err != nil || len(page.Reminders) > limit {
				t.Fatalf("%s's listing: %d %s", caller, a.status, a.body)
			}
			if len(page.Reminders) == 0 && page.Next != "" {
				empty++
			}
			for _, r := range page.Reminders {
				ids = append(ids, r.ID)
			}
			if next = page.Next; next == "" {
				return ids, empty
			}
		}
	}
	for _, caller := range []string{billing, booking, support} {
		for _, limit := range []int{1, 2, 3, 4, 25} {
			if got, _ := list(caller, limit); !slices.Equal(got, mine[caller]) {
				t.Errorf("%s's listing in pages of %d: %v; want %v", caller, limit, got, mine[caller])
			}
		}
	}
	// Far more of booking's than one call reads, all due after billing's.
	for i := range 320 {
		r := reminder("")
		r["accountRef"], r["dueAt"] = "acct-2", now.Add(time.Duration(900-i)*time.Hour).Format(time.RFC3339)
		b, _ := json.Marshal(r)
		rem, err := f.store.Validator().ParseJSONAs(fmt.Sprintf("rem-b%03d", i), b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.CreateAs(ctx, schedule.Caller{Principal: booking}, rem); err != nil {
			t.Fatal(err)
		}
	}
	r := reminder("")
	r["accountRef"] = "acct-2"
	f.as(billing, "PUT", "/v1/reminders/rem-mine", r)
	next := ""
	var got []string
	empty := 0
	for pages := 0; pages < 10; pages++ {
		q := url.Values{"account": {"acct-2"}, "limit": {"1"}}
		if next != "" {
			q.Set("next", next)
		}
		var page intake.Page
		a := f.as(billing, "GET", "/v1/reminders?"+q.Encode(), nil)
		if err := json.Unmarshal(a.body, &page); err != nil || a.status != 200 {
			t.Fatalf("%d %s", a.status, a.body)
		}
		if len(page.Reminders) == 0 && page.Next != "" {
			empty++
		}
		for _, l := range page.Reminders {
			got = append(got, l.ID)
		}
		if next = page.Next; next == "" {
			break
		}
	}
	if !slices.Equal(got, []string{"rem-mine"}) || empty == 0 || next != "" {
		t.Errorf("billing's one among 320 of booking's: %v (%d empty pages, next %q); want it, after an empty page with a next token", got, empty, next)
	}
}

// TestAFullAccessPrincipalActsOnEvery: the role the stage names (by its
// IAM ARN, with a path) reads, reschedules, lists and cancels any caller's
// reminder and an unattributed one; its own creates record it.
func TestAFullAccessPrincipalActsOnEvery(t *testing.T) {
	f := setupCallers(t)
	f.as(billing, "PUT", "/v1/reminders/rem-1", reminder(""))
	b, _ := json.Marshal(reminder(""))
	legacy, err := f.store.Validator().ParseJSONAs("rem-legacy", b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Create(context.Background(), legacy); err != nil {
		t.Fatal(err)
	}
	later := map[string]string{"dueAt": now.Add(48 * time.Hour).Format(time.RFC3339)}
	for _, id := range []string{"rem-1", "rem-legacy"} {
		if a := f.as(support, "GET", "/v1/reminders/"+id, nil); a.status != 200 {
			t.Errorf("support's GET of %s: %d %s", id, a.status, a.body)
		}
		if a := f.as(support, "PUT", "/v1/reminders/"+id, reminder("")); a.status != 200 || !strings.Contains(string(a.body), `"unchanged"`) {
			t.Errorf("support's PUT of %s as it is: %d %s", id, a.status, a.body)
		}
		if a := f.as(support, "POST", "/v1/reminders/"+id+"/reschedule", later); a.status != 200 {
			t.Errorf("support's reschedule of %s: %d %s", id, a.status, a.body)
		}
		if a := f.as(support, "DELETE", "/v1/reminders/"+id, nil); a.status != 200 {
			t.Errorf("support's DELETE of %s: %d %s", id, a.status, a.body)
		}
	}
	a := f.as(support, "GET", "/v1/reminders?account=acct-1", nil)
	if a.status != 200 || !strings.Contains(string(a.body), `"rem-1"`) || !strings.Contains(string(a.body), `"rem-legacy"`) {
		t.Errorf("support's listing: %d %s", a.status, a.body)
	}
	f.as(support, "PUT", "/v1/reminders/rem-2", reminder(""))
	if s, _ := f.led.ReadReminder(context.Background(), "rem-2"); s.Reminder == nil || s.Reminder.CreatedBy != support {
		t.Errorf("support's own reminder records %+v", s.Reminder)
	}
	// The role's name alone, in another account, or a session of another
	// role with that name as its session, is not the role.
	for _, not := range []string{"arn:aws:sts::210987654321:assumed-role/Support", "arn:aws:sts::123456789012:assumed-role/Support2",
		"arn:aws:iam::123456789012:role/tools/Support"} {
		if a := f.as(not, "GET", "/v1/reminders/rem-1", nil); a.status != 404 {
			t.Errorf("%s's GET of billing's: %d; want 404", not, a.status)
		}
	}
}

// TestAnUnattributedReminderIsFullAccessOnly: a reminder with no recorded
// creator (created before creators were recorded, or by the CLI) is, to
// every caller without full access, its own creator included, refused
// with 403 and the fix, never answered as absent (a cancel told "absent"
// would leave it to be sent); its id is taken; the listing leaves it out.
func TestAnUnattributedReminderIsFullAccessOnly(t *testing.T) {
	f := setupCallers(t)
	absent := f.as(billing, "GET", "/v1/reminders/rem-old", nil)
	r := ledger.ReminderItem{ID: "rem-old", AccountRef: "acct-1", DueAt: now.Add(time.Hour), ExpiresAt: now.Add(25 * time.Hour),
		Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "contact-2", TemplateRef: "renewal"}}}
	ctx := context.Background()
	if _, _, err := f.led.CreateReminder(ctx, r); err != nil { // as written before this change: no createdBy
		t.Fatal(err)
	}
	d := ledger.Delivery{ReminderID: r.ID, Channel: "sms", Provider: "webhook", RecipientRef: "contact-2", TemplateRef: "renewal", DueAt: r.DueAt, ExpiresAt: r.ExpiresAt}
	if err := f.led.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if absent.status != 404 {
		t.Fatalf("the absent answer: %d %s", absent.status, absent.body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if a := f.as(billing, m, "/v1/reminders/rem-old", nil); a.status != 403 || a.problem(t).Type != intake.ProblemForbidden || !strings.Contains(a.problem(t).Fix, "intakeFullAccess") {
			t.Errorf("billing's %s of an unattributed reminder: %d %s; want 403 with the fix", m, a.status, a.body)
		}
	}
	if a := f.as(billing, "POST", "/v1/reminders/rem-old/reschedule", map[string]string{"dueAt": now.Add(2 * time.Hour).Format(time.RFC3339)}); a.status != 403 {
		t.Errorf("billing's reschedule of an unattributed reminder: %d %s", a.status, a.body)
	}
	if got, _ := f.led.Get(ctx, d.Key()); got.Status != ledger.StatusPending {
		t.Errorf("the refused calls changed the delivery: %q", got.Status)
	}
	body := map[string]any{"accountRef": "acct-1", "dueAt": r.DueAt.Format(time.RFC3339), "expiresAt": r.ExpiresAt.Format(time.RFC3339),
		"deliveries": []map[string]string{{"channel": "sms", "provider": "webhook", "recipientRef": "contact-2", "templateRef": "renewal"}}}
	if a := f.as(billing, "PUT", "/v1/reminders/rem-old", body); a.status != 409 || a.problem(t).Field != "" || !strings.Contains(a.problem(t).Title, "taken") {
		t.Errorf("billing's PUT of an unattributed reminder's id: %d %s; want 409 taken", a.status, a.body)
	}
	if a := f.as(billing, "GET", "/v1/reminders?account=acct-1", nil); a.status != 200 || strings.Contains(string(a.body), "rem-old") {
		t.Errorf("billing's listing: %d %s", a.status, a.body)
	}
	if a := f.as(support, "DELETE", "/v1/reminders/rem-old", nil); a.status != 200 {
		t.Errorf("support's DELETE of an unattributed reminder: %d %s", a.status, a.body)
	}
}

// TestAnEmailLikeUserNameIsMasked: an IAM user whose name is an e-mail
// address is logged, noted and recorded as creator masked, told apart by
// its unique id: the same user acts on its reminder, another user of the
// same mask does not; a full-access user is matched by its ARN, unmasked.
func TestAnEmailLikeUserNameIsMasked(t *testing.T) {
	clk := clock.NewFake(now)
	led, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	store, err := schedule.New(schedule.Config{Ledger: led, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	h, err := intake.New(intake.Config{Store: store, Logger: log, FullAccess: []string{"arn:aws:iam::123456789012:user/ops/ana.ops@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	fn := intake.FunctionURL(h, log)
	send := func(userARN, userID, method, path string, body any) events.LambdaFunctionURLResponse {
		t.Helper()
		ev := events.LambdaFunctionURLRequest{RawPath: path, Headers: map[string]string{"content-type": "application/json"},
			RequestContext: events.LambdaFunctionURLRequestContext{RequestID: "req-1", HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: method},
				Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
					AccountID: "123456789012", UserARN: userARN, UserID: userID}}}}
		if body != nil {
			b, _ := json.Marshal(body)
			ev.Body = string(b)
		}
		res, err := fn(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	const jane, janeID = "arn:aws:iam::123456789012:user/jane.doe@example.com", "AIDAJANEDOEEXAMPLE123"
	const jim, jimID = "arn:aws:iam::123456789012:user/jim.doe@example.com", "AIDAJIMDOEEXAMPLE4567" // the same mask: j•••@example.com
	if res := send(jane, janeID, "PUT", "/v1/reminders/rem-1", reminder("")); res.StatusCode != 201 {
		t.Fatalf("jane's PUT: %d %s", res.StatusCode, res.Body)
	}
	want := "arn:aws:iam::123456789012:user/j•••@example.com#" + janeID
	s, _ := led.ReadReminder(context.Background(), "rem-1")
	if s.Reminder == nil || s.Reminder.CreatedBy != want {
		t.Errorf("the stored creator is %+v; want %q", s.Reminder, want)
	}
	if res := send(jane, janeID, "GET", "/v1/reminders/rem-1", nil); res.StatusCode != 200 || strings.Contains(res.Body, "jane") {
		t.Errorf("jane's GET of her own: %d %s", res.StatusCode, res.Body)
	}
	if res := send(jim, jimID, "GET", "/v1/reminders/rem-1", nil); res.StatusCode != 404 {
		t.Errorf("jim's GET of jane's (one mask, two users): %d %s", res.StatusCode, res.Body)
	}
	if res := send("arn:aws:iam::123456789012:user/ops/ana.ops@example.com", "AIDAANAOPSEXAMPLE9876", "GET", "/v1/reminders/rem-1", nil); res.StatusCode != 200 {
		t.Errorf("the full-access user's GET: %d %s", res.StatusCode, res.Body)
	}
	if res := send(jane, janeID, "DELETE", "/v1/reminders/rem-1", nil); res.StatusCode != 200 {
		t.Errorf("jane's DELETE: %d %s", res.StatusCode, res.Body)
	}
	d, _ := led.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-1", Channel: "sms", Provider: "webhook"})
	if note := d.History[len(d.History)-1].Note; !strings.Contains(note, want) {
		t.Errorf("the cancel's note %q does not name %q", note, want)
	}
	if !strings.Contains(logs.String(), `"caller":"`+want+`"`) {
		t.Errorf("the request lines do not name the masked caller:\n%s", logs.String())
	}
	for _, whole := range []string{"jane.doe", "jim.doe", "ana.ops"} {
		if strings.Contains(logs.String(), whole) || strings.Contains(d.History[len(d.History)-1].Note, whole) {
			t.Errorf("%q is logged or noted whole:\n%s", whole, logs.String())
		}
	}
}
