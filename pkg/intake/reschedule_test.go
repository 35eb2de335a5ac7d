package intake_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/intake"
)

// TestARefusedRescheduleChangesNothing: a reschedule of a reminder whose
// every delivery was sent is refused, and leaves the reminder as it was:
// GET shows the old dueAt, and its creator's PUT retry is unchanged, not a
// conflict on dueAt.
func TestARefusedRescheduleChangesNothing(t *testing.T) {
	f := setup(t)
	if a := f.json("PUT", "/v1/reminders/rem-done", reminder("rem-done")); a.status != 201 {
		t.Fatal(a.status, string(a.body))
	}
	f.clk.Advance(time.Hour)
	f.sendOne("rem-done", true)
	a := f.json("POST", "/v1/reminders/rem-done/reschedule", map[string]string{"dueAt": now.Add(48 * time.Hour).Format(time.RFC3339)})
	if p := a.problem(t); a.status != 409 || p.Deliveries[0].Outcome != "sent" {
		t.Fatalf("reschedule of a sent reminder: %d %s", a.status, a.body)
	}
	var doc struct {
		Reminder struct {
			DueAt time.Time `json:"dueAt"`
		} `json:"reminder"`
	}
	if a := f.do("GET", "/v1/reminders/rem-done", "", nil); a.status != 200 || json.Unmarshal(a.body, &doc) != nil || !doc.Reminder.DueAt.Equal(now.Add(time.Hour)) {
		t.Errorf("GET after the refused reschedule: %d %s; want the old dueAt", a.status, a.body)
	}
	if a := f.json("PUT", "/v1/reminders/rem-done", reminder("rem-done")); a.status != 200 {
		t.Errorf("the creator's PUT retry after the refused reschedule: %d %s; want 200 unchanged", a.status, a.body)
	}
}

func TestRescheduleMovesUnsentDeliveriesAndTheReminder(t *testing.T) {
	f := setup(t)
	if a := f.json("PUT", "/v1/reminders/rem-1", reminder("rem-1")); a.status != 201 {
		t.Fatal(a.status, string(a.body))
	}
	to := now.Add(48 * time.Hour)
	a := f.json("POST", "/v1/reminders/rem-1/reschedule", map[string]string{"dueAt": to.Format(time.RFC3339)})
	var c intake.Changed
	if err := json.Unmarshal(a.body, &c); a.status != 200 || err != nil || c.Deliveries[0].Outcome != "moved" {
		t.Fatalf("reschedule: %d %s", a.status, a.body)
	}
	// The reminder keeps its 24 h window; the reminder item has the new
	// times, so the old reminder PUT again is now a conflict, the new one
	// unchanged.
	if c.ExpiresAt != ledger.Format(to.Add(24*time.Hour)) {
		t.Errorf("new expiresAt %s; want dueAt + the reminder's 24 h window", c.ExpiresAt)
	}
	if a := f.json("PUT", "/v1/reminders/rem-1", reminder("rem-1")); a.status != 409 || a.problem(t).Field != "dueAt" {
		t.Errorf("PUT of the old times after a reschedule: %d %s", a.status, a.body)
	}
	moved := reminder("rem-1")
	moved["dueAt"] = to.Format(time.RFC3339)
	if a := f.json("PUT", "/v1/reminders/rem-1", moved); a.status != 200 {
		t.Errorf("PUT of the new times after a reschedule: %d %s", a.status, a.body)
	}
	// Again: unchanged.
	a = f.json("POST", "/v1/reminders/rem-1/reschedule", map[string]string{"dueAt": to.Format(time.RFC3339)})
	if a.status != 200 || !strings.Contains(string(a.body), `"unchanged"`) {
		t.Errorf("the same reschedule again: %d %s", a.status, a.body)
	}
	// Not claimable at the old time.
	f.clk.Advance(time.Hour)
	key := message.DeliveryKey{ReminderID: "rem-1", Channel: "sms", Provider: "webhook"}
	if _, err := f.led.Claim(context.Background(), ledger.Claim{Key: key, Token: "c", LeaseUntil: f.clk.Now().Add(time.Minute), DueBy: f.clk.Now()}); err == nil {
		t.Error("the delivery was claimed at its old time after the reschedule answered")
	}
	// A sent one is refused.
	if a := f.json("PUT", "/v1/reminders/rem-sent", reminder("rem-sent")); a.status != 201 {
		t.Fatal(a.status)
	}
	f.sendOne("rem-sent", true)
	a = f.json("POST", "/v1/reminders/rem-sent/reschedule", map[string]string{"dueAt": to.Format(time.RFC3339)})
	if p := a.problem(t); a.status != 409 || p.Deliveries[0].Outcome != "sent" {
		t.Errorf("reschedule of a sent reminder: %d %s", a.status, a.body)
	}
	if a := f.json("POST", "/v1/reminders/rem-none/reschedule", map[string]string{"dueAt": to.Format(time.RFC3339)}); a.status != 404 {
		t.Errorf("reschedule of no reminder: %d %s", a.status, a.body)
	}
	if a := f.json("POST", "/v1/reminders/rem-1/reschedule", map[string]string{"dueAt": "soon"}); a.status != 400 || a.problem(t).Field != "dueAt" {
		t.Errorf("reschedule to no time: %d %s", a.status, a.body)
	}
}

// TestRescheduleAndCancelOfAPartlyWrittenReminder: a create cut off after
// its reminder item (a delivery not written yet) cannot be rescheduled
// until it is finished (or the late delivery would keep the old time); a
// cancel writes the missing delivery cancelled, so the create finishing
// later sends nothing.
func TestRescheduleAndCancelOfAPartlyWrittenReminder(t *testing.T) {
	f := setup(t)
	r := ledger.ReminderItem{ID: "rem-half", AccountRef: "acct-1", DueAt: now.Add(time.Hour), ExpiresAt: now.Add(25 * time.Hour),
		CreatedBy: intake.Caller(context.Background()), // the fixture's caller: its requests carry none
		Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "c", TemplateRef: "t"},
			{Channel: "email", Provider: "webhook", RecipientRef: "c", TemplateRef: "t"}}}
	ctx := context.Background()
	if _, _, err := f.led.CreateReminder(ctx, r); err != nil { // the item, then the first delivery: cut off
		t.Fatal(err)
	}
	if err := f.led.Create(ctx, ledger.Delivery{ReminderID: r.ID, Channel: "sms", Provider: "webhook", RecipientRef: "c", TemplateRef: "t", DueAt: r.DueAt, ExpiresAt: r.ExpiresAt}); err != nil {
		t.Fatal(err)
	}
	a := f.json("POST", "/v1/reminders/rem-half/reschedule", map[string]string{"dueAt": now.Add(48 * time.Hour).Format(time.RFC3339)})
	if p := a.problem(t); a.status != 409 || !strings.Contains(p.Fix, "PUT again") {
		t.Fatalf("reschedule of a half-written reminder: %d %s", a.status, a.body)
	}
	if a := f.do("DELETE", "/v1/reminders/rem-half", "", nil); a.status != 200 || strings.Count(string(a.body), `"outcome":"cancelled"`) != 2 {
		t.Fatalf("cancel of a half-written reminder: %d %s", a.status, a.body)
	}
	// The create, sent again as documented, finds both, and nothing is due.
	body := map[string]any{"accountRef": "acct-1", "dueAt": r.DueAt.Format(time.RFC3339), "expiresAt": r.ExpiresAt.Format(time.RFC3339),
		"deliveries": []map[string]string{{"channel": "sms", "provider": "webhook", "recipientRef": "c", "templateRef": "t"}, {"channel": "email", "provider": "webhook", "recipientRef": "c", "templateRef": "t"}}}
	if a := f.json("PUT", "/v1/reminders/rem-half", body); a.status != 200 {
		t.Fatalf("the create again after the cancel: %d %s", a.status, a.body)
	}
	stored, _ := f.led.ReadReminder(ctx, "rem-half")
	for _, d := range stored.Deliveries {
		if d.Status != ledger.StatusCancelled || d.Index != nil {
			t.Errorf("%s is %s (index %v) after a cancel and a late create", d.Key(), d.Status, d.Index)
		}
	}
}

// TestRescheduleAnswersByWhatStands: ended deliveries stay as they are (a
// 200 when the others moved); a reminder with nothing left to move is a
// 409 saying so.
func TestRescheduleAnswersByWhatStands(t *testing.T) {
	f := setup(t)
	two := reminder("")
	two["deliveries"] = []map[string]string{{"channel": "sms", "provider": "webhook", "recipientRef": "c", "templateRef": "t"}, {"channel": "email", "provider": "webhook", "recipientRef": "c", "templateRef": "t"}}
	f.json("PUT", "/v1/reminders/rem-2", two)
	if _, err := f.led.Cancel(context.Background(), message.DeliveryKey{ReminderID: "rem-2", Channel: "email", Provider: "webhook"}, "one only"); err != nil {
		t.Fatal(err)
	}
	to := map[string]string{"dueAt": now.Add(48 * time.Hour).Format(time.RFC3339)}
	if a := f.json("POST", "/v1/reminders/rem-2/reschedule", to); a.status != 200 || !strings.Contains(string(a.body), `"finished"`) || !strings.Contains(string(a.body), `"moved"`) {
		t.Errorf("reschedule with a cancelled delivery: %d %s", a.status, a.body)
	}
	f.json("PUT", "/v1/reminders/rem-3", reminder(""))
	f.do("DELETE", "/v1/reminders/rem-3", "", nil)
	a := f.json("POST", "/v1/reminders/rem-3/reschedule", to)
	if p := a.problem(t); a.status != 409 || !strings.HasPrefix(p.Detail, "nothing moved") {
		t.Errorf("reschedule of a cancelled reminder: %d %s", a.status, a.body)
	}
}
