package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
)

// testAWaitForTheWindowSpendsNoAttempt: a delivery claimed while its send
// window is shut is given back: pending, due when the window opens, back
// in the due index for then, its attempt count as before the claim, its
// window kept; not claimable before the opening, claimable after; and only
// the claim's holder can give it back.
func testAWaitForTheWindowSpendsNoAttempt(t *testing.T, b bundle) {
	ctx := context.Background()
	d := ledger.Delivery{ReminderID: "rem-win", Channel: "sms", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
		DueAt: t0, ExpiresAt: t0.Add(48 * time.Hour), Status: ledger.StatusQueued, Window: "08:00-21:00 America/New_York"}
	if err := b.l.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	c, err := b.claim("tok-a", d)
	if err != nil || c.Attempts != 1 || c.Window != d.Window {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	opens := t0.Add(3 * time.Hour)
	stale := c
	stale.ClaimToken = "tok-other"
	_, err = b.l.AwaitWindow(ctx, stale, opens)
	refusal(t, err, ledger.ErrLeaseLost)

	got, err := b.l.AwaitWindow(ctx, c, opens)
	if err != nil {
		t.Fatal(err)
	}
	last := got.History[len(got.History)-1]
	if got.Status != ledger.StatusPending || got.Attempts != 0 || got.ClaimToken != "" || !got.LeaseUntil.IsZero() || !got.DueAt.Equal(opens) ||
		got.Window != d.Window || last.Note != ledger.WindowNote(opens) || last.Status != ledger.StatusPending {
		t.Fatalf("given back: %+v", got)
	}
	if e, ok := b.entry(t, d.Key()); !ok || !e.DueAt.Equal(opens) || e.PublishAt.After(opens) || !e.PublishAt.After(t0) {
		t.Fatalf("index entry %+v (%v); want it due at the opening, published by then", e, ok)
	}
	refusal(t, func() error { _, err := b.claim("tok-b", d); return err }(), ledger.ErrNotDue)
	b.clk.Advance(3 * time.Hour)
	again, err := b.claim("tok-c", d)
	if err != nil || again.Attempts != 1 || again.LapsedLeaseTaken() {
		t.Fatalf("claim once the window opened: %+v, %v", again, err)
	}

	// A claim that took a lapsed lease keeps the mark through the wait.
	b.clk.Advance(2 * time.Minute) // tok-c's lease lapses unended
	lapsed, err := b.claim("tok-d", d)
	if err != nil || !lapsed.LapsedLeaseTaken() || lapsed.Attempts != 2 {
		t.Fatalf("claim of a lapsed lease: %+v, %v", lapsed, err)
	}
	if _, err := b.l.AwaitWindow(ctx, lapsed, b.clk.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Hour)
	after, err := b.claim("tok-e", d)
	if err != nil || !after.LapsedLeaseTaken() || after.Attempts != 2 {
		t.Fatalf("the claim after the wait: %+v, %v; want it to know attempt 1 never ended", after, err)
	}
}
