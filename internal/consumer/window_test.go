package consumer_test

// A delivery is never sent outside its send window (the ledger's copy,
// Delivery.Window): one claimed while the window is shut is given back
// with its attempt unspent, due when it opens; a retry that would land
// outside it waits for it; one whose window opens only after it expires
// waits for its expiry, and expires.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/failure"
)

// seedWindowed creates a queued delivery due at due with window spec.
func (f *fast) seedWindowed(t *testing.T, id string, due, expires time.Time, window string) ledger.Delivery {
	t.Helper()
	d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: due, ExpiresAt: expires, Status: ledger.StatusQueued,
		Window: window}
	if err := f.l.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fast) get(t *testing.T, id string) ledger.Delivery {
	t.Helper()
	d, err := f.l.Get(context.Background(), message.DeliveryKey{ReminderID: id, Channel: "email", Provider: "webhook"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestADeliveryClaimedWhileItsWindowIsShutWaitsForItUnspent(t *testing.T) {
	f := newFast(t, nil)
	now := f.clk.Now() // 09:00Z: 04:00 in New York
	opens := time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)
	f.seedWindowed(t, "rem-night", now, now.Add(24*time.Hour), "08:00-21:00 America/New_York")
	if err := f.handle("rem-night", "webhook", now, "1", nil); err != nil {
		t.Fatalf("handle: %v; want the record acknowledged (the calendar hands it back)", err)
	}
	d := f.get(t, "rem-night")
	if f.sends != 0 || d.Status != ledger.StatusPending || d.Attempts != 0 || !d.DueAt.Equal(opens) ||
		d.History[len(d.History)-1].Note != ledger.WindowNote(opens) {
		t.Fatalf("sends %d, delivery %+v; want it unsent, pending, no attempt spent, due at 08:00 EST", f.sends, d)
	}
	// A message before the opening (the calendar's, early) is deferred.
	f.clk.Advance(time.Hour)
	if err := f.handle("rem-night", "webhook", opens, "2", nil); err != nil || f.sends != 0 || f.get(t, "rem-night").Attempts != 0 {
		t.Fatalf("a message at 05:00: %v, sends %d; want it deferred, unclaimed", err, f.sends)
	}
	f.clk.Advance(opens.Sub(f.clk.Now()))
	if err := f.handle("rem-night", "webhook", opens, "1", nil); err != nil || f.sends != 1 {
		t.Fatalf("at the opening: %v, sends %d", err, f.sends)
	}
	if d := f.get(t, "rem-night"); d.Status != ledger.StatusSent || d.Attempts != 1 {
		t.Fatalf("after the opening: %+v", d)
	}
}

func TestARetryThatWouldLandOutsideTheWindowWaitsForIt(t *testing.T) {
	f := newFast(t, failure.Retryable(errors.New("provider answered 503"), 0))
	// 20:59:58 in New York: the retry's backoff (5 s) ends after 21:00.
	start := time.Date(2026, 12, 1, 1, 59, 58, 0, time.UTC)
	f.clk.Advance(start.Sub(f.clk.Now()))
	f.seedWindowed(t, "rem-late", start, start.Add(48*time.Hour), "08:00-21:00 America/New_York")
	err := f.handle("rem-late", "webhook", start, "1", nil)
	var fe *failure.Error
	opens := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	if !errors.As(err, &fe) || fe.After != opens.Sub(start) {
		t.Fatalf("handle: %v (after %v); want a retry after %v, when the window opens", err, fe.After, opens.Sub(start))
	}
	if d := f.get(t, "rem-late"); d.Status != ledger.StatusRetrying || !d.NextAttemptAt.Equal(opens) || f.sends != 1 {
		t.Fatalf("after the failure: %+v, sends %d", d, f.sends)
	}
}

func TestAWindowThatOpensAfterTheExpiryWaitsForTheExpiry(t *testing.T) {
	f := newFast(t, nil)
	now := f.clk.Now() // 04:00 in New York
	expires := now.Add(2 * time.Hour)
	f.seedWindowed(t, "rem-never", now, expires, "08:00-21:00 America/New_York")
	if err := f.handle("rem-never", "webhook", now, "1", nil); err != nil {
		t.Fatal(err)
	}
	if d := f.get(t, "rem-never"); d.Status != ledger.StatusPending || !d.DueAt.Equal(expires) || d.Attempts != 0 {
		t.Fatalf("given back: %+v; want it due at its expiry", d)
	}
	f.clk.Advance(expires.Sub(f.clk.Now()))
	if err := f.handle("rem-never", "webhook", expires, "1", nil); err != nil {
		t.Fatal(err)
	}
	if d := f.get(t, "rem-never"); d.Status != ledger.StatusExpired || f.sends != 0 {
		t.Fatalf("at its expiry: %+v, sends %d; want it expired, never sent", d, f.sends)
	}
}
