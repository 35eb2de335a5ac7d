package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/failure"
)

// Fallbacks and the late policy: a held fallback is in no index and never
// claimed, expired or dead-lettered; TakeFallback takes it once; Cancel
// ends it; a reschedule moves it, held, and derives every delivery's
// expiry from the reminder's under its late rule.

// withFallback creates reminder id's primary (email:webhook, queued, due
// at t0, naming its fallback sms:webhook) and the held fallback, which may
// take 2h once taken.
func (b bundle) withFallback(t *testing.T, id string) (primary, held ledger.Delivery) {
	t.Helper()
	fb := ledger.FallbackRef{Channel: "sms", Provider: "webhook"}
	primary = ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", RecipientRef: "acct-1/contact-2", TemplateRef: "renewal-v3",
		DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour), Status: ledger.StatusQueued, Fallback: fb, FallbackWithin: 2 * time.Hour}
	held = ledger.Delivery{ReminderID: id, Channel: "sms", Provider: "webhook", RecipientRef: "acct-1/contact-3", TemplateRef: "renewal-sms",
		DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour), Status: ledger.StatusHeld,
		FallbackOf: ledger.FallbackRef{Channel: "email", Provider: "webhook"}, FallbackWithin: 2 * time.Hour}
	for _, d := range []ledger.Delivery{primary, held} {
		if err := b.l.Create(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	return b.get(t, primary), b.get(t, held)
}

func (b bundle) get(t *testing.T, d ledger.Delivery) ledger.Delivery {
	t.Helper()
	got, err := b.l.Get(context.Background(), d.Key())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func testAHeldFallbackIsInNoIndexAndNeverClaimed(t *testing.T, b bundle) {
	ctx := context.Background()
	primary, held := b.withFallback(t, "rem-fb1")
	if held.Status != ledger.StatusHeld || held.Index != nil || held.FallbackOf.String() != "email:webhook" || held.FallbackWithin != 2*time.Hour {
		t.Fatalf("held fallback read back as %+v", held)
	}
	if primary.Fallback.String() != "sms:webhook" || primary.FallbackWithin != 2*time.Hour || primary.Index == nil {
		t.Fatalf("primary read back as %+v", primary)
	}
	if !held.TTL.Equal(primary.TTL) || held.TTL.IsZero() {
		t.Errorf("held TTL %v, its sibling's %v; want the same", held.TTL, primary.TTL)
	}
	if _, ok := b.entry(t, held.Key()); ok {
		t.Error("the held fallback is in the due index")
	}
	if _, ok := b.entry(t, primary.Key()); !ok {
		t.Error("the primary is not in the due index")
	}
	_, err := b.claim("tok-1", held)
	if re := refusal(t, err, ledger.ErrHeld); re.Current.Status != ledger.StatusHeld {
		t.Errorf("refused claim's current status %q", re.Current.Status)
	}
	b.clk.Advance(25 * time.Hour) // past its expiresAt: still not expired by Expire
	_, err = b.l.Expire(ctx, held)
	refusal(t, err, ledger.ErrHeld)
	_, err = b.l.DeadLetter(ctx, held, ledger.Failure{Class: failure.ClassRejected, Message: "no"})
	refusal(t, err, ledger.ErrHeld)
	if got := b.get(t, held); got.Status != ledger.StatusHeld || got.Index != nil {
		t.Errorf("after refused writes: %s, index %v", got.Status, got.Index)
	}
}

func testTakeFallbackTakesItOnce(t *testing.T, b bundle) {
	ctx := context.Background()
	primary, held := b.withFallback(t, "rem-fb2")
	if _, err := b.l.TakeFallback(ctx, held, "dead"); err == nil || errors.As(err, new(*ledger.RefusedError)) ||
		!strings.Contains(err.Error(), "names no fallback") {
		t.Errorf("take of a delivery with no fallback: %v", err)
	}
	c, err := b.claim("tok-1", primary)
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Minute)
	dead, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: failure.ClassRejected, Message: "410 gone"})
	if err != nil {
		t.Fatal(err)
	}
	reason, ok := dead.FallbackDue()
	if !ok || reason != "dead (rejected)" {
		t.Fatalf("FallbackDue of the dead primary = %q, %v", reason, ok)
	}
	b.clk.Advance(time.Minute)
	now := b.clk.Now()
	taken, err := b.l.TakeFallback(ctx, dead, reason)
	if err != nil {
		t.Fatal(err)
	}
	if p := b.get(t, primary); !p.FallbackTaken.Equal(now) || !p.UpdatedAt.Equal(dead.UpdatedAt) || p.Status != ledger.StatusDead {
		t.Errorf("the primary after the take: %s, fallback taken %v (want %v), updatedAt %v (want %v as it was)",
			p.Status, p.FallbackTaken, now, p.UpdatedAt, dead.UpdatedAt)
	} else if note := ledger.FallbackTakenNote(p); note != "its fallback rem-fb2:sms:webhook was taken at "+ledger.Format(now) {
		t.Errorf("FallbackTakenNote = %q", note)
	}
	last := taken.History[len(taken.History)-1]
	if taken.Status != ledger.StatusPending || !taken.DueAt.Equal(now) || !taken.ExpiresAt.Equal(now.Add(2*time.Hour)) ||
		last.Status != ledger.StatusPending || last.Note != "fallback of email:webhook: dead (rejected)" {
		t.Fatalf("taken: %s due %v expires %v, last entry %+v", taken.Status, taken.DueAt, taken.ExpiresAt, last)
	}
	if taken.TTL.Before(held.TTL) || taken.TTL.Before(now.Add(2*time.Hour)) {
		t.Errorf("taken TTL %v: before its sibling's %v or its new expiry", taken.TTL, held.TTL)
	}
	if e, ok := b.entry(t, taken.Key()); !ok || e.PublishAt.After(now) || !e.ExpiresAt.Equal(taken.ExpiresAt) {
		t.Errorf("the taken fallback's index entry: %+v, %v", e, ok)
	}
	again, err := b.l.TakeFallback(ctx, dead, reason)
	if re := refusal(t, err, ledger.ErrNotHeld); re.Current.Status != ledger.StatusPending || again.Status != "" {
		t.Errorf("second take: current %q", re.Current.Status)
	}
	if c, err := b.claim("tok-2", taken); err != nil || c.Status != ledger.StatusSending {
		t.Fatalf("claim of the taken fallback: %v", err)
	}
	gone := dead
	gone.Fallback = ledger.FallbackRef{Channel: "push", Provider: "webhook"}
	_, err = b.l.TakeFallback(ctx, gone, reason)
	refusal(t, err, ledger.ErrNotFound)
}

func testConcurrentTakesHaveOneWinner(t *testing.T, b bundle) {
	primary, _ := b.withFallback(t, "rem-fb3")
	primary, err := b.l.DeadLetter(context.Background(), primary, ledger.Failure{Class: failure.ClassRejected, Message: "410 gone"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, notHeld := 0, 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.l.TakeFallback(context.Background(), primary, fmt.Sprint("expired ", i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, ledger.ErrNotHeld):
				notHeld++
			default:
				t.Errorf("take: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || notHeld != 7 {
		t.Fatalf("%d takes won, %d refused as not held; want 1 and 7", wins, notHeld)
	}
}

func testATakeAfterCancelIsRefused(t *testing.T, b bundle) {
	ctx := context.Background()
	primary, held := b.withFallback(t, "rem-fb4")
	for _, d := range []ledger.Delivery{primary, held} {
		got, err := b.l.Cancel(ctx, d.Key(), "by the owner")
		if err != nil || got.Status != ledger.StatusCancelled || got.Index != nil {
			t.Fatalf("cancel %s: %v, %+v", d.Key(), err, got)
		}
	}
	// The primary as its cancel left it: its condition holds, the
	// fallback's does not.
	cancelled := b.get(t, primary)
	_, err := b.l.TakeFallback(ctx, cancelled, "expired")
	if re := refusal(t, err, ledger.ErrNotHeld); re.Current.Status != ledger.StatusCancelled {
		t.Errorf("take after cancel: current %q", re.Current.Status)
	}
	if got := b.get(t, primary); !got.FallbackTaken.IsZero() {
		t.Errorf("a refused take marked the primary taken at %v", got.FallbackTaken)
	}
	if _, ok := b.entry(t, held.Key()); ok {
		t.Error("the cancelled fallback is in the due index")
	}
}

func testALatePolicyIsKeptAndRescheduled(t *testing.T, b bundle) {
	ctx := context.Background()
	within := 3 * time.Hour
	r := ledger.ReminderItem{ID: "rem-late", AccountRef: "acct-1", DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour),
		Late: ledger.LateRule{Policy: ledger.LateSendLate, Within: within},
		Deliveries: []ledger.ReminderDelivery{{Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
			Fallback: &ledger.ReminderFallback{Channel: "sms", Provider: "webhook", RecipientRef: "r2", TemplateRef: "t2", Within: 90 * time.Minute}}}}
	if _, _, err := b.l.CreateReminder(ctx, r); err != nil {
		t.Fatal(err)
	}
	exp, onTime := r.Late.DeliveryTimes(r.ExpiresAt)
	if !exp.Equal(r.ExpiresAt.Add(within)) || !onTime.Equal(r.ExpiresAt) {
		t.Fatalf("DeliveryTimes = %v, %v", exp, onTime)
	}
	primary := ledger.Delivery{ReminderID: r.ID, Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
		DueAt: t0, ExpiresAt: exp, Late: ledger.LateSendLate, OnTimeUntil: onTime, Fallback: ledger.FallbackRef{Channel: "sms", Provider: "webhook"}}
	held := ledger.Delivery{ReminderID: r.ID, Channel: "sms", Provider: "webhook", RecipientRef: "r2", TemplateRef: "t2",
		DueAt: t0, ExpiresAt: r.ExpiresAt, Status: ledger.StatusHeld, FallbackOf: ledger.FallbackRef{Channel: "email", Provider: "webhook"},
		FallbackWithin: 90 * time.Minute, TTL: b.l.Expiry(exp)}
	for _, d := range []ledger.Delivery{primary, held} {
		if err := b.l.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	s, err := b.l.ReadReminder(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Reminder
	if got == nil || got.Late != r.Late || got.Deliveries[0].Fallback == nil || *got.Deliveries[0].Fallback != *r.Deliveries[0].Fallback {
		t.Fatalf("reminder item read back: %+v", got)
	}
	if keys := got.Keys(); len(keys) != 2 || keys[1] != held.Key() {
		t.Errorf("Keys() = %v", keys)
	}
	p, h := s.Deliveries[0], s.Deliveries[1]
	if p.Late != ledger.LateSendLate || !p.OnTimeUntil.Equal(onTime) || p.LateRule() != r.Late || h.Status != ledger.StatusHeld || !h.TTL.Equal(p.TTL) {
		t.Fatalf("deliveries read back: %+v\n%+v", p, h)
	}
	to := ledger.Move{DueAt: t0.Add(48 * time.Hour), ExpiresAt: t0.Add(72 * time.Hour), Note: "moved"}
	if err := b.l.MoveReminder(ctx, ledger.MovePlan{ID: r.ID, Reminder: got, Live: []ledger.Delivery{p, h}, To: to}); err != nil {
		t.Fatal(err)
	}
	p, h = b.get(t, p), b.get(t, h)
	if p.Status != ledger.StatusPending || !p.ExpiresAt.Equal(to.ExpiresAt.Add(within)) || !p.OnTimeUntil.Equal(to.ExpiresAt) {
		t.Errorf("moved primary: %s expires %v on time until %v", p.Status, p.ExpiresAt, p.OnTimeUntil)
	}
	if h.Status != ledger.StatusHeld || h.Index != nil || !h.DueAt.Equal(to.DueAt) || !h.ExpiresAt.Equal(to.ExpiresAt) || h.TTL.Before(p.TTL) {
		t.Errorf("moved fallback: %s index %v due %v expires %v ttl %v (primary's %v)", h.Status, h.Index, h.DueAt, h.ExpiresAt, h.TTL, p.TTL)
	}
	if _, ok := b.entry(t, h.Key()); ok {
		t.Error("the moved fallback is in the due index")
	}
	// Sent after OnTimeUntil is sent late.
	b.clk.Advance(72*time.Hour + time.Minute)
	c, err := b.claim("tok-1", p)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := b.l.Complete(ctx, c, "r-1")
	if err != nil || !sent.SentLate() {
		t.Errorf("sent at %v, on time until %v: SentLate %v (%v)", sent.SentAt, sent.OnTimeUntil, sent.SentLate(), err)
	}
}

// testATakeNeedsThePrimaryAsSeen: a take for a primary no longer as the
// stream saw it fail (revived since, by a DLQ copy's claim; a stream
// record processed late) is refused with ErrPrimaryChanged, and neither
// the fallback nor the primary changes. Taken while as seen, the primary
// is marked, and a DLQ copy's claim (a console redrive) never sends it.
func testATakeNeedsThePrimaryAsSeen(t *testing.T, b bundle) {
	ctx := context.Background()
	primary, held := b.withFallback(t, "rem-fb5")
	c, err := b.claim("tok-1", primary)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: failure.ClassRejected, Message: "410 gone"})
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Minute)
	revived, err := b.l.Claim(ctx, ledger.Claim{Key: dead.Key(), Token: "tok-2", LeaseUntil: b.clk.Now().Add(time.Minute), DueBy: b.clk.Now(), Revive: true})
	if err != nil || revived.Status != ledger.StatusSending {
		t.Fatalf("the DLQ copy's claim: %v, %+v", err, revived)
	}
	reason, _ := dead.FallbackDue()
	_, err = b.l.TakeFallback(ctx, dead, reason) // the dead image, processed late
	if re := refusal(t, err, ledger.ErrPrimaryChanged); re.Current.Status != ledger.StatusSending || re.Key != dead.Key() {
		t.Errorf("late take: refused for %s, current %q", re.Key, re.Current.Status)
	}
	if got := b.get(t, held); got.Status != ledger.StatusHeld || got.Index != nil {
		t.Errorf("the fallback after a refused take: %s, index %v", got.Status, got.Index)
	}
	if got := b.get(t, primary); !got.FallbackTaken.IsZero() || got.Status != ledger.StatusSending {
		t.Errorf("the primary after a refused take: %s, fallback taken %v", got.Status, got.FallbackTaken)
	}

	// Dead again, and taken as seen: no DLQ copy sends it after.
	dead, err = b.l.DeadLetter(ctx, revived, ledger.Failure{Class: failure.ClassRejected, Message: "410 gone"})
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Minute)
	if _, err := b.l.TakeFallback(ctx, dead, reason); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Minute)
	_, err = b.l.Claim(ctx, ledger.Claim{Key: dead.Key(), Token: "tok-3", LeaseUntil: b.clk.Now().Add(time.Minute), DueBy: b.clk.Now(), Revive: true})
	if re := refusal(t, err, ledger.ErrFallbackTaken); re.Current.Status != ledger.StatusDead || re.Current.FallbackTaken.IsZero() {
		t.Errorf("a DLQ copy's claim of a primary whose fallback was taken: current %q, fallback taken %v", re.Current.Status, re.Current.FallbackTaken)
	}
	if got := b.get(t, primary); got.Status != ledger.StatusDead || got.Attempts != 2 {
		t.Errorf("after the refused claim: %s, %d attempts", got.Status, got.Attempts)
	}
	if l, ok := b.l.(reviveStore); ok {
		// Revived from the ledger: as read after the take, and as read
		// before it (the condition, not the read, refuses).
		for _, read := range []ledger.Delivery{b.get(t, primary), dead} {
			_, err := l.Revive(ctx, read, byOps)
			refusal(t, err, ledger.ErrFallbackTaken)
		}
		page, err := l.ReadDead(ctx, ledger.DeadQuery{Read: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Deliveries {
			if d.Key() == dead.Key() && (d.FallbackTaken.IsZero() || d.Fallback.IsZero()) {
				t.Errorf("ReadDead leaves out the fallback and its take: %+v", d)
			}
		}
	}
}

// testATakenFallbackKeepsItsOwnExpiry: a reschedule moves a taken fallback
// (pending) to the new dueAt but leaves its expiry, its take's time plus
// its bound, where the take put it; a move to a dueAt past that expiry
// restarts the bound from the new dueAt. A held one takes the reminder's.
func testATakenFallbackKeepsItsOwnExpiry(t *testing.T, b bundle) {
	ctx := context.Background()
	primary, _ := b.withFallback(t, "rem-fb6")
	dead, err := b.l.DeadLetter(ctx, primary, ledger.Failure{Class: failure.ClassRejected, Message: "410 gone"})
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Minute)
	taken, err := b.l.TakeFallback(ctx, dead, "dead (rejected)")
	if err != nil {
		t.Fatal(err)
	}
	own := taken.ExpiresAt // the take + 2h
	for _, tc := range []struct {
		due  time.Time
		want time.Time
	}{
		{b.clk.Now().Add(30 * time.Minute), own},                    // before its expiry: kept
		{own.Add(time.Hour), own.Add(time.Hour).Add(2 * time.Hour)}, // past it: the bound from the new dueAt
	} {
		read := b.get(t, taken)
		to := ledger.Move{DueAt: tc.due, ExpiresAt: t0.Add(72 * time.Hour), Note: "moved"}
		if err := b.l.MoveReminder(ctx, ledger.MovePlan{ID: "rem-fb6", Live: []ledger.Delivery{read}, Kept: []ledger.Delivery{b.get(t, dead)}, To: to}); err != nil {
			t.Fatal(err)
		}
		got := b.get(t, taken)
		if got.Status != ledger.StatusPending || !got.DueAt.Equal(tc.due) || !got.ExpiresAt.Equal(tc.want) || got.TTL.Before(b.l.Expiry(tc.want)) {
			t.Errorf("moved to %v: %s, due %v, expires %v (want %v), TTL %v", tc.due, got.Status, got.DueAt, got.ExpiresAt, tc.want, got.TTL)
		}
	}
}
