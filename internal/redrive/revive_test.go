package redrive_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/pkg/clock"
)

var reviveT0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// deadLedger is an in-memory ledger holding n dead deliveries, dead-lettered
// at reviveT0 and read 20 days later.
func deadLedger(t *testing.T, n int) (*ledger.Memory, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(reviveT0)
	m, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		d := ledger.Delivery{ReminderID: fmt.Sprintf("rem-%04d", i), Channel: "email", Provider: "webhook",
			DueAt: reviveT0, ExpiresAt: reviveT0.Add(60 * 24 * time.Hour)}
		if err := m.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		c, err := m.Claim(ctx, ledger.Claim{Key: d.Key(), Token: "tok", LeaseUntil: reviveT0.Add(time.Minute), DueBy: reviveT0})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.DeadLetter(ctx, c, ledger.Failure{Class: "rejected", Message: "provider answered 400"}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(20 * 24 * time.Hour)
	return m, clk
}

// TestRevivePlanStopsReadingAtItsBounds: a plan stops reading once it has
// --max deliveries (a later run finds the rest), or at --read items with a
// token to read on from.
func TestRevivePlanStopsReadingAtItsBounds(t *testing.T) {
	t.Parallel()
	m, clk := deadLedger(t, 1500)
	r, err := redrive.NewReviver(redrive.ReviveConfig{Ledger: m, By: "ops@example", Reason: "provider fixed", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := r.Plan(ctx, redrive.ReviveFilter{Max: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Chosen) != 3 || !p.Full || p.Next != "" || p.Scanned > 1000 || p.Chosen[0].DLQCopyMayRemain || p.Chosen[0].Age() != 20*24*time.Hour {
		t.Fatalf("--max 3: chosen %d, full %v, next %q, scanned %d, %+v", len(p.Chosen), p.Full, p.Next, p.Scanned, p.Chosen[0])
	}
	p, err = r.Plan(ctx, redrive.ReviveFilter{Max: 5000, Read: 1100})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Chosen) != 1100 || p.Full || p.Scanned != 1100 || p.Next == "" {
		t.Fatalf("--read 1100: chosen %d, full %v, scanned %d, next %q", len(p.Chosen), p.Full, p.Scanned, p.Next)
	}
	rest, err := r.Plan(ctx, redrive.ReviveFilter{Max: 5000, After: p.Next})
	if err != nil {
		t.Fatal(err)
	}
	if len(rest.Chosen) != 400 || rest.Next != "" || rest.Chosen[0].DeliveryKey == p.Chosen[0].DeliveryKey {
		t.Fatalf("read on: chosen %d, next %q", len(rest.Chosen), rest.Next)
	}
	for _, f := range []redrive.ReviveFilter{{Max: 0}, {Max: 1, Read: ledger.MaxDeadRead + 1}} {
		if _, err := r.Plan(ctx, f); err == nil {
			t.Errorf("Plan(%+v) accepted", f)
		}
	}
	for _, cfg := range []redrive.ReviveConfig{{By: "x", Reason: "y"}, {Ledger: m, Reason: "y"}, {Ledger: m, By: "x"}} {
		if _, err := redrive.NewReviver(cfg); err == nil {
			t.Errorf("NewReviver(%+v) accepted", cfg)
		}
	}
}

// TestReviveSkipsWhatChangedSinceThePlan: a delivery cancelled, or revived
// by another operator, between the plan and its application is skipped,
// saying why; the others are revived.
func TestReviveSkipsWhatChangedSinceThePlan(t *testing.T) {
	t.Parallel()
	m, clk := deadLedger(t, 3)
	r, err := redrive.NewReviver(redrive.ReviveConfig{Ledger: m, By: "ops@example", Reason: "provider fixed", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := r.Plan(ctx, redrive.ReviveFilter{Max: 3})
	if err != nil || len(p.Chosen) != 3 {
		t.Fatalf("plan: %+v, %v", p, err)
	}
	k := func(i int) message.DeliveryKey {
		return message.DeliveryKey{ReminderID: fmt.Sprintf("rem-%04d", i), Channel: "email", Provider: "webhook"}
	}
	if _, err := m.Cancel(ctx, k(0), "by owner"); err != nil {
		t.Fatal(err)
	}
	other, _ := redrive.NewReviver(redrive.ReviveConfig{Ledger: m, By: "oncall@example", Reason: "same fix", Clock: clk})
	if res, err := other.Apply(ctx, &redrive.RevivePlan{Chosen: p.Chosen[1:2]}, nil); err != nil || res.Revived != 1 {
		t.Fatalf("the other operator's revive: %+v, %v", res, err)
	}
	var seen []redrive.ReviveOutcome
	res, err := r.Apply(ctx, p, func(o redrive.ReviveOutcome) { seen = append(seen, o) })
	if err != nil || res.Revived != 1 || res.Skipped != 2 || res.Failed != 0 || len(seen) != 3 {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	for i, want := range []string{"delivery is not dead (now cancelled)", "delivery is not dead (now pending)"} {
		if o := res.Outcomes[i]; o.Revived || !strings.Contains(o.Why, want) {
			t.Errorf("outcome %d: %+v, want skipped: %s", i, o, want)
		}
	}
	if o := res.Outcomes[2]; !o.Revived || !o.PublishAt.Equal(clk.Now()) {
		t.Errorf("outcome 2: %+v", o)
	}
	d, _ := m.Get(ctx, k(1))
	if last := d.History[len(d.History)-1]; last.Note != "revived by oncall@example: same fix" {
		t.Errorf("revived once, by the first to write: %+v", d.History)
	}
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Apply(ctx, p, nil); err == nil || !strings.Contains(err.Error(), "the rest stay dead") {
		t.Errorf("an interrupted apply: %v", err)
	}
}

// TestReviveSkipsAPrimaryWhoseFallbackWasTaken: a dead primary whose
// fallback was taken after the plan read it is skipped, saying which
// fallback and when, and stays dead.
func TestReviveSkipsAPrimaryWhoseFallbackWasTaken(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(reviveT0)
	m, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	primary := ledger.Delivery{ReminderID: "rem-fb", Channel: "email", Provider: "webhook", DueAt: reviveT0, ExpiresAt: reviveT0.Add(60 * 24 * time.Hour),
		Fallback: ledger.FallbackRef{Channel: "sms", Provider: "webhook"}}
	held := ledger.Delivery{ReminderID: "rem-fb", Channel: "sms", Provider: "webhook", DueAt: reviveT0, ExpiresAt: reviveT0.Add(60 * 24 * time.Hour),
		Status: ledger.StatusHeld, FallbackOf: ledger.FallbackRef{Channel: "email", Provider: "webhook"}}
	for _, d := range []ledger.Delivery{primary, held} {
		if err := m.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := m.DeadLetter(ctx, primary, ledger.Failure{Class: "rejected", Message: "provider answered 400"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := redrive.NewReviver(redrive.ReviveConfig{Ledger: m, By: "ops@example", Reason: "provider fixed", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Plan(ctx, redrive.ReviveFilter{Max: 3})
	if err != nil || len(p.Chosen) != 1 {
		t.Fatalf("plan: %+v, %v", p, err)
	}
	clk.Advance(time.Minute)
	if _, err := m.TakeFallback(ctx, dead, "dead (rejected)"); err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, p, nil)
	want := "its fallback rem-fb:sms:webhook was taken at " + ledger.Format(reviveT0.Add(time.Minute))
	if err != nil || res.Skipped != 1 || res.Revived != 0 || !strings.Contains(res.Outcomes[0].Why, want) {
		t.Fatalf("apply: %+v, %v; want skipped: %s", res, err, want)
	}
	if got, _ := m.Get(ctx, dead.Key()); got.Status != ledger.StatusDead {
		t.Errorf("after the skipped revive: %s", got.Status)
	}
}

// TestRevivePlanOfOneReminder: a plan for one reminder reads its items
// alone, chooses its dead deliveries and says of the others why not: not
// dead, expired, or a primary whose fallback was taken.
func TestRevivePlanOfOneReminder(t *testing.T) {
	t.Parallel()
	m, clk := deadLedger(t, 3)
	ctx := context.Background()
	// rem-x: one dead e-mail, one sent SMS, one dead push that expired.
	mk := func(ch string, exp time.Duration) ledger.Delivery {
		d := ledger.Delivery{ReminderID: "rem-x", Channel: ch, Provider: "webhook", DueAt: clk.Now(), ExpiresAt: clk.Now().Add(exp)}
		if err := m.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		c, err := m.Claim(ctx, ledger.Claim{Key: d.Key(), Token: "tok", LeaseUntil: clk.Now().Add(time.Minute), DueBy: clk.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, err := m.DeadLetter(ctx, mk("email", 24*time.Hour), ledger.Failure{Class: "rejected", Message: "provider answered 400"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(ctx, mk("sms", 24*time.Hour), "r-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DeadLetter(ctx, mk("push", time.Hour), ledger.Failure{Class: "rejected", Message: "provider answered 400"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour)
	r, err := redrive.NewReviver(redrive.ReviveConfig{Ledger: m, By: "ops@example", Reason: "provider fixed", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Plan(ctx, redrive.ReviveFilter{Max: 10, Reminder: "rem-x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Chosen) != 1 || p.Chosen[0].DeliveryKey != "rem-x:email:webhook" || p.Scanned != 3 || p.Full {
		t.Fatalf("chose %+v of %d read (full %v); want rem-x's dead e-mail alone, of its 3", p.Chosen, p.Scanned, p.Full)
	}
	left := map[string]string{}
	for _, d := range p.Left {
		left[d.DeliveryKey] = d.Why
	}
	if w := left["rem-x:sms:webhook"]; w != "not dead (sent); nothing to revive" {
		t.Errorf("the sent SMS: %q", w)
	}
	if w := left["rem-x:push:webhook"]; !strings.HasPrefix(w, "expired ") {
		t.Errorf("the expired push: %q", w)
	}
	if len(left) != 2 {
		t.Errorf("left %v; the other reminders' dead deliveries are not rem-x's", left)
	}
	res, err := r.Apply(ctx, p, nil)
	if err != nil || res.Revived != 1 {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	if d, _ := m.Get(ctx, message.DeliveryKey{ReminderID: "rem-0000", Channel: "email", Provider: "webhook"}); d.Status != ledger.StatusDead {
		t.Errorf("another reminder's dead delivery was revived: %s", d.Status)
	}
}

// TestRevivePlanLeavesAPrimaryWhoseFallbackWasTaken: the plan says so
// before the operator confirms, rather than the apply after.
func TestRevivePlanLeavesAPrimaryWhoseFallbackWasTaken(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(reviveT0)
	m, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	primary := ledger.Delivery{ReminderID: "rem-fb", Channel: "email", Provider: "webhook", DueAt: reviveT0, ExpiresAt: reviveT0.Add(60 * 24 * time.Hour),
		Fallback: ledger.FallbackRef{Channel: "sms", Provider: "webhook"}}
	held := ledger.Delivery{ReminderID: "rem-fb", Channel: "sms", Provider: "webhook", DueAt: reviveT0, ExpiresAt: reviveT0.Add(60 * 24 * time.Hour),
		Status: ledger.StatusHeld, FallbackOf: ledger.FallbackRef{Channel: "email", Provider: "webhook"}}
	for _, d := range []ledger.Delivery{primary, held} {
		if err := m.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := m.DeadLetter(ctx, primary, ledger.Failure{Class: "rejected", Message: "provider answered 400"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TakeFallback(ctx, dead, "dead (rejected)"); err != nil {
		t.Fatal(err)
	}
	r, err := redrive.NewReviver(redrive.ReviveConfig{Ledger: m, By: "ops@example", Reason: "provider fixed", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []redrive.ReviveFilter{{Max: 3}, {Max: 3, Reminder: "rem-fb"}} {
		p, err := r.Plan(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Chosen) != 0 || len(p.Left) == 0 || !strings.Contains(p.Left[0].Why, "its fallback rem-fb:sms:webhook was taken") {
			t.Errorf("plan %+v: chose %+v, left %+v; want the primary left, its fallback taken", f, p.Chosen, p.Left)
		}
	}
}
