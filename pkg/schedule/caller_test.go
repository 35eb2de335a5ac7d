package schedule_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// TestTheCallersDoorIsScopedAndTheOperatorsIsNot: what a caller creates
// records it; another caller finds it absent and its id taken; a caller
// without a principal is refused; the operator's door (the CLI's) acts on
// every reminder, and records no creator.
func TestTheCallersDoorIsScopedAndTheOperatorsIsNot(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(at)
	led, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	store, err := schedule.New(schedule.Config{Ledger: led, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(id string) schedule.Reminder {
		r, err := store.Validator().Validate(schedule.Input{ID: id, AccountRef: "acct-1", DueAt: at.Add(time.Hour).Format(time.RFC3339),
			Deliveries: []schedule.DeliveryInput{{Channel: "sms", Provider: "webhook", RecipientRef: "c-1", TemplateRef: "t"}}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	billing, booking := schedule.Caller{Principal: "arn:aws:sts::1:assumed-role/billing"}, schedule.Caller{Principal: "arn:aws:sts::1:assumed-role/booking"}
	if o, err := store.CreateAs(ctx, billing, mk("rem-1")); err != nil || o != schedule.Created {
		t.Fatalf("billing's create: %v, %v", o, err)
	}
	if v, err := store.ShowAs(ctx, billing, "rem-1"); err != nil || v.Reminder.CreatedBy != billing.Principal {
		t.Fatalf("billing's show: %+v, %v", v.Reminder, err)
	}
	if _, err := store.CreateAs(ctx, booking, mk("rem-1")); !errors.Is(err, schedule.ErrTaken) {
		t.Errorf("booking's create of billing's id: %v; want ErrTaken", err)
	}
	if _, err := store.ShowAs(ctx, booking, "rem-1"); !errors.Is(err, schedule.ErrNoReminder) {
		t.Errorf("booking's show: %v; want ErrNoReminder", err)
	}
	if _, err := store.CancelAs(ctx, booking, "rem-1", ""); !errors.Is(err, schedule.ErrNoReminder) {
		t.Errorf("booking's cancel: %v; want ErrNoReminder", err)
	}
	if _, err := store.RescheduleAs(ctx, booking, "rem-1", schedule.Times{DueAt: "yesterday"}, ""); !errors.Is(err, schedule.ErrNoReminder) {
		t.Errorf("booking's reschedule (with times it would refuse): %v; want ErrNoReminder", err)
	}
	if p, err := store.ListAs(ctx, booking, "acct-1", 10, ""); err != nil || len(p.Reminders) != 0 {
		t.Errorf("booking's listing: %+v, %v", p.Reminders, err)
	}
	if _, err := store.ShowAs(ctx, schedule.Caller{}, "rem-1"); err == nil {
		t.Error("a caller with no principal and no full access was served")
	}
	// The operator's door.
	if _, err := store.Create(ctx, mk("rem-cli")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"rem-1", "rem-cli"} {
		if _, err := store.Show(ctx, id); err != nil {
			t.Errorf("the operator's show of %s: %v", id, err)
		}
	}
	if v, _ := store.Show(ctx, "rem-cli"); v.Reminder == nil || v.Reminder.CreatedBy != "" {
		t.Errorf("the CLI's reminder records %+v", v.Reminder)
	}
	if p, err := store.List(ctx, "acct-1", 10, ""); err != nil || len(p.Reminders) != 2 {
		t.Errorf("the operator's listing: %d, %v; want both", len(p.Reminders), err)
	}
	if _, err := store.ShowAs(ctx, billing, "rem-cli"); !errors.Is(err, schedule.ErrUnattributed) {
		t.Errorf("billing's show of the CLI's reminder: %v; want ErrUnattributed (not absent: it stays scheduled)", err)
	}
	if _, err := store.Reschedule(ctx, "rem-1", schedule.Times{DueAt: at.Add(3 * time.Hour).Format(time.RFC3339)}, "ops"); err != nil {
		t.Errorf("the operator's reschedule of billing's: %v", err)
	}
	if res, err := store.Cancel(ctx, "rem-1", "ops"); err != nil || len(res) != 1 || !res[0].Cancelled {
		t.Errorf("the operator's cancel of billing's: %+v, %v", res, err)
	}
}
