package intake_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

func TestCancelIsIdempotentAndNamesWhatWasSentOrInFlight(t *testing.T) {
	f := setup(t)
	for _, id := range []string{"rem-1", "rem-sent", "rem-flying"} {
		if a := f.json("PUT", "/v1/reminders/"+id, reminder(id)); a.status != 201 {
			t.Fatal(a.status, string(a.body))
		}
	}
	for range 2 { // again: still cancelled, 200
		a := f.do("DELETE", "/v1/reminders/rem-1", "", nil)
		var c intake.Changed
		if err := json.Unmarshal(a.body, &c); a.status != 200 || err != nil || len(c.Deliveries) != 1 || c.Deliveries[0].Outcome != "cancelled" {
			t.Fatalf("DELETE: %d %s", a.status, a.body)
		}
	}
	f.clk.Advance(time.Hour)
	f.sendOne("rem-sent", true)
	f.sendOne("rem-flying", false)
	a := f.do("DELETE", "/v1/reminders/rem-sent", "", nil)
	if p := a.problem(t); a.status != 409 || p.Type != intake.ProblemRefused || len(p.Deliveries) != 1 || p.Deliveries[0].Outcome != "sent" || p.Deliveries[0].At == "" {
		t.Errorf("DELETE of a sent reminder: %d %s", a.status, a.body)
	}
	a = f.do("DELETE", "/v1/reminders/rem-flying", "", nil)
	// The lease ends a minute after the claim, on the store's clock (not
	// the machine's): Retry-After counts the seconds to it, and one more.
	if p := a.problem(t); a.status != 409 || p.Deliveries[0].Outcome != "in-flight" || a.header.Get("Retry-After") != "61" {
		t.Errorf("DELETE of a reminder in flight: %d %s (Retry-After %q, want 61)", a.status, a.body, a.header.Get("Retry-After"))
	}
	if a := f.do("DELETE", "/v1/reminders/rem-none", "", nil); a.status != 404 {
		t.Errorf("DELETE of no reminder: %d %s", a.status, a.body)
	}
}

// TestACancelAfterAnUnendedAttemptSaysItMayHaveBeenSent: a consumer
// claimed the delivery and died before recording an end (maybe after the
// provider accepted); once its lease lapsed the DELETE cancels it, and
// says, then and on every repeat, that the attempt may have gone out, as
// does the history.
func TestACancelAfterAnUnendedAttemptSaysItMayHaveBeenSent(t *testing.T) {
	f := setup(t)
	if a := f.json("PUT", "/v1/reminders/rem-unended", reminder("rem-unended")); a.status != 201 {
		t.Fatal(a.status, string(a.body))
	}
	f.clk.Advance(time.Hour)
	f.sendOne("rem-unended", false) // claimed; the consumer dies
	f.clk.Advance(2 * time.Minute)  // its lease lapsed
	for i := range 2 {
		a := f.do("DELETE", "/v1/reminders/rem-unended", "", nil)
		p := a.problem(t)
		if a.status != 409 || len(p.Deliveries) != 1 || p.Deliveries[0].Outcome != "unended" || p.Deliveries[0].Status != schedule.StatusCancelled ||
			!strings.Contains(p.Detail, "may have been sent") {
			t.Fatalf("DELETE %d after an unended attempt: %d %s", i+1, a.status, a.body)
		}
	}
	d, err := f.led.Get(context.Background(), message.DeliveryKey{ReminderID: "rem-unended", Channel: "sms", Provider: "webhook"})
	if err != nil || d.EndedUnended() != 1 || d.LastErrorClass != "ambiguous" {
		t.Fatalf("the delivery after the cancel: %+v, %v", d, err)
	}
}
