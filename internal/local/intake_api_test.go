package local_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

func apiReminder(id string, due time.Time) schedule.Input {
	return schedule.Input{ID: id, AccountRef: "acct-api", DueAt: due.UTC().Format(time.RFC3339Nano),
		Deliveries: []schedule.DeliveryInput{{Channel: "sms", Provider: "webhook", RecipientRef: "contact-1", TemplateRef: "renewal"}}}
}

func status(err error) int {
	var e *intake.Error
	if errors.As(err, &e) {
		return e.Status
	}
	if err != nil {
		return -1
	}
	return 200
}

// TestIntakeAPIThroughItsFunctionURL calls the API as an application
// would: SigV4-signed requests (the SDK's signer) over HTTP to the local
// function URL, the intake's real bootstrap behind it under the emulator,
// DynamoDB Local behind that. Every status the API answers, bad input of
// every kind, and concurrent PUTs of one id across instances.
func TestIntakeAPIThroughItsFunctionURL(t *testing.T) {
	_, in, log := startIntake(t, 3)
	ctx := context.Background()
	api := in.Client()
	due := time.Now().Add(time.Hour)

	c, err := api.Put(ctx, apiReminder("rem-api-1", due))
	if err != nil || c.Outcome != schedule.Created {
		t.Fatalf("PUT: %+v, %v\n%s", c, err, log)
	}
	if c, err := api.Put(ctx, apiReminder("rem-api-1", due)); err != nil || c.Outcome != schedule.Unchanged {
		t.Fatalf("PUT again: %+v, %v", c, err)
	}
	changed := apiReminder("rem-api-1", due)
	changed.Deliveries[0].TemplateRef = "renewal-v2"
	if _, err := api.Put(ctx, changed); status(err) != 409 || !strings.Contains(err.Error(), "deliveries") {
		t.Errorf("PUT of another reminder under the id: %v", err)
	}
	doc, err := api.Get(ctx, "rem-api-1")
	if err != nil || doc.Reminder == nil || len(doc.Deliveries) != 1 || doc.Deliveries[0].Status != schedule.StatusPending {
		t.Errorf("GET: %+v, %v", doc, err)
	}
	if _, err := api.Get(ctx, "rem-api-none"); status(err) != 404 {
		t.Errorf("GET of no reminder: %v", err)
	}
	page, err := api.List(ctx, "acct-api", 10, "")
	if err != nil || len(page.Reminders) != 1 || page.Reminders[0].ID != "rem-api-1" {
		t.Errorf("list: %+v, %v", page, err)
	}
	moved, err := api.Reschedule(ctx, "rem-api-1", schedule.Times{DueAt: due.Add(time.Hour).UTC().Format(time.RFC3339)})
	if err != nil || moved.Deliveries[0].Outcome != "moved" {
		t.Errorf("reschedule: %+v, %v", moved, err)
	}
	batch, err := api.Batch(ctx, []schedule.Input{apiReminder("rem-api-2", due), apiReminder("rem-api-3", due), apiReminder("rem api", due)})
	if err != nil || len(batch.Results) != 3 || batch.Results[0].Status != 201 || batch.Results[1].Status != 201 || batch.Results[2].Status != 400 {
		t.Errorf("batch: %+v, %v", batch, err)
	}
	if _, err := api.Cancel(ctx, "rem-api-1"); err != nil {
		t.Errorf("DELETE: %v", err)
	}

	// Bad input of every kind, as raw bodies: each a problem, none a 5xx.
	for _, tc := range []struct {
		name, method, path, contentType string
		body                            []byte
		status                          int
	}{
		{"bad JSON", "PUT", "/v1/reminders/rem-api-9", "application/json", []byte(`{"accountRef":`), 400},
		{"unknown field", "PUT", "/v1/reminders/rem-api-9", "application/json", []byte(`{"acountRef":"a"}`), 400},
		{"wrong type", "PUT", "/v1/reminders/rem-api-9", "application/json", []byte(`{"accountRef":["a"]}`), 400},
		{"oversized", "PUT", "/v1/reminders/rem-api-9", "application/json", []byte(`{"accountRef":"` + strings.Repeat("a", 20_000) + `"}`), 413},
		{"not JSON", "PUT", "/v1/reminders/rem-api-9", "text/plain", []byte(`hi`), 415},
		{"an id with a space", "PUT", "/v1/reminders/rem%20api", "application/json", []byte(`{}`), 400},
		{"an id with a slash", "GET", "/v1/reminders/rem%2Fapi", "", nil, 400},
		{"an id with a quote", "DELETE", "/v1/reminders/rem%22api", "", nil, 400},
		{"an id of 3000 bytes", "GET", "/v1/reminders/" + strings.Repeat("r", 3000), "", nil, 400},
		{"a listing without an account", "GET", "/v1/reminders", "", nil, 400},
		{"no such route", "GET", "/v1/nothing", "", nil, 404},
		{"no such method", "PATCH", "/v1/reminders/rem-api-1", "application/json", []byte(`{}`), 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p intake.Problem
			_, err := api.Do(ctx, tc.method, tc.path, tc.body, &p)
			if tc.contentType != "application/json" && tc.body != nil {
				req, _ := api.NewRequest(ctx, tc.method, tc.path, tc.body)
				req.Header.Set("Content-Type", tc.contentType)
				// Signed with the content type unsigned: the front does not
				// verify, and the function sees the type the caller sent.
				res, err2 := http.DefaultClient.Do(req)
				if err2 != nil {
					t.Fatal(err2)
				}
				res.Body.Close()
				if res.StatusCode != tc.status {
					t.Errorf("%s %s with %s: %d; want %d", tc.method, tc.path, tc.contentType, res.StatusCode, tc.status)
				}
				return
			}
			var e *intake.Error
			if !errors.As(err, &e) || e.Status != tc.status || e.Problem.Type == "" || e.Problem.Detail == "" {
				t.Errorf("%s %s: %v; want a %d problem", tc.method, tc.path, err, tc.status)
			}
		})
	}
	// Unsigned: refused by the function URL itself.
	res, err := http.Post(in.URL()+"/v1/reminders", "application/json", strings.NewReader(`{}`))
	if err != nil || res.StatusCode != http.StatusForbidden {
		t.Errorf("an unsigned POST: %v, %v", res, err)
	} else {
		res.Body.Close()
	}

	// Concurrent PUTs of one id across the instances: one creates it; the
	// same content finds it unchanged, other content is a conflict.
	var mu sync.Mutex
	answers := map[int]int{}
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := apiReminder("rem-api-race", due)
			if i%2 == 1 {
				r.Metadata = map[string]string{"plan": "other"}
			}
			c, err := api.Put(ctx, r)
			mu.Lock()
			if c.Outcome == schedule.Created {
				answers[201]++
			} else {
				answers[status(err)]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if answers[201] != 1 || answers[200]+answers[409] != 11 || answers[409] == 0 {
		t.Errorf("concurrent PUTs answered %v; want one 201, the rest 200 or 409", answers)
	}
	if doc, err := api.Get(ctx, "rem-api-race"); err != nil || len(doc.Deliveries) != 1 {
		t.Errorf("the raced reminder: %+v, %v", doc, err)
	}
}

// TestARescheduleRacingASendIsOneOrTheOther: a reschedule through the API
// and a consumer's claim of the same due delivery, at once, many times:
// either the reschedule answered 200 and the delivery was not sent at its
// old time (the claim was refused, and it waits at the new time), or the
// claim won and the reschedule was refused (409), never both.
func TestARescheduleRacingASendIsOneOrTheOther(t *testing.T) {
	sys, in, _ := startIntake(t, 2)
	ctx := context.Background()
	api := in.Client()
	consumer, err := ledger.New(sys.DB, ledger.Config{Table: sys.Resources.Table, Shards: sys.Stage.Shards})
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	wins := map[string]int{}
	for i := range 24 {
		id := fmt.Sprintf("rem-race-%02d", i)
		if _, err := api.Put(ctx, apiReminder(id, time.Now())); err != nil {
			t.Fatal(err)
		}
		key := message.DeliveryKey{ReminderID: id, Channel: "sms", Provider: "webhook"}
		var claimErr, moveErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			// Stagger the two a little differently each round.
			time.Sleep(time.Duration(i%4) * 2 * time.Millisecond)
			now := time.Now()
			var d ledger.Delivery
			if d, claimErr = consumer.Claim(ctx, ledger.Claim{Key: key, Token: "consumer-" + id, LeaseUntil: now.Add(time.Minute), DueBy: now.Add(time.Second)}); claimErr == nil {
				_, claimErr = consumer.Complete(ctx, d, "receipt")
			}
		}()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(3-i%4) * 2 * time.Millisecond)
			_, moveErr = api.Reschedule(ctx, id, schedule.Times{DueAt: later.Format(time.RFC3339)})
		}()
		wg.Wait()
		d, err := consumer.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case moveErr == nil && claimErr == nil:
			t.Errorf("%s: the reschedule answered 200 and the delivery was sent at its old time too", id)
		case moveErr == nil:
			if !errors.Is(claimErr, ledger.ErrNotDue) || d.Status != ledger.StatusPending || !d.DueAt.Equal(later) {
				t.Errorf("%s: moved, but the claim says %v and the delivery is %s due %v", id, claimErr, d.Status, d.DueAt)
			}
			wins["reschedule"]++
		case claimErr == nil:
			if status(moveErr) != 409 || d.Status != ledger.StatusSent {
				t.Errorf("%s: sent, but the reschedule says %v and the delivery is %s", id, moveErr, d.Status)
			}
			wins["send"]++
		default:
			t.Errorf("%s: neither: claim %v, reschedule %v", id, claimErr, moveErr)
		}
	}
	t.Logf("wins: %v", wins)
}
