package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/message"
)

// Factory makes an empty ledger for one test, on the fake clock, keeping
// historyLimit history entries.
type Factory func(t *testing.T, clk *clock.Fake, historyLimit int) Store

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// Run is the conformance suite: the state machine, its refusals and the
// history bound, each as a parallel subtest on a fresh ledger.
func Run(t *testing.T, newStore Factory) {
	for _, tc := range []struct {
		name string
		test func(*testing.T, bundle)
	}{
		{"ClaimReturnsEverythingTheConsumerNeeds", testClaimReturnsEverythingTheConsumerNeeds},
		{"SecondClaimIsRefusedWhileLeasedAndAllowedAfter", testSecondClaimIsRefusedWhileLeasedAndAllowedAfter},
		{"CompleteThenDuplicateIsRecognisedFromAllOld", testCompleteThenDuplicateIsRecognisedFromAllOld},
		{"RetryThenClaimAgain", testRetryThenClaimAgain},
		{"NotDueAndExpiredAreRefusedWithTheItem", testNotDueAndExpiredAreRefusedWithTheItem},
		{"DeadLetterAndRedriveClaim", testDeadLetterAndRedriveClaim},
		{"DeadLetterRefusesADeliveryInFlightElsewhere", testDeadLetterRefusesADeliveryInFlightElsewhere},
		{"UnknownDeliveryIsNotFound", testUnknownDeliveryIsNotFound},
		{"CreateIsConditional", testCreateIsConditional},
		{"ReleaseReturnsToTheCalendar", testReleaseReturnsToTheCalendar},
		{"HistoryIsBounded", testHistoryIsBounded},
		{"ConcurrentClaimsHaveOneWinner", testConcurrentClaimsHaveOneWinner},
		{"DueAndExpiryBoundaries", testDueAndExpiryBoundaries},
		{"ExpireWaitsForAForeignLease", testExpireWaitsForAForeignLease},
		{"CancelEndsAnUnsentDeliveryOnly", testCancelEndsAnUnsentDeliveryOnly},
		{"RequeueNeedsTheDeliveryAsRead", testRequeueNeedsTheDeliveryAsRead},
		{"NoDeliveryExpiresBeforeItsReminder", testNoDeliveryExpiresBeforeItsReminder},
		{"ReceiptIsClipped", testReceiptIsClipped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(t0)
			tc.test(t, bundle{l: newStore(t, clk, 6), clk: clk})
		})
	}
}

type bundle struct {
	l   Store
	clk *clock.Fake
}

func (b bundle) create(t *testing.T, id string) ledger.Delivery {
	t.Helper()
	d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", RecipientRef: "acct-1/contact-2", TemplateRef: "renewal-v3",
		DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour), Status: ledger.StatusQueued}
	if err := b.l.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}

func (b bundle) claim(token string, d ledger.Delivery) (ledger.Delivery, error) {
	now := b.clk.Now()
	return b.l.Claim(context.Background(), ledger.Claim{Key: d.Key(), Token: token, LeaseUntil: now.Add(time.Minute), DueBy: now.Add(time.Second)})
}

func (b bundle) revive(token string, d ledger.Delivery) (ledger.Delivery, error) {
	now := b.clk.Now()
	return b.l.Claim(context.Background(), ledger.Claim{Key: d.Key(), Token: token, LeaseUntil: now.Add(time.Minute), DueBy: now.Add(time.Second), Revive: true})
}

// createExpiring creates a queued delivery due at t0 that expires at
// expiresAt.
func (b bundle) createExpiring(t *testing.T, id string, expiresAt time.Time) ledger.Delivery {
	t.Helper()
	d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
		DueAt: t0, ExpiresAt: expiresAt, Status: ledger.StatusQueued}
	if err := b.l.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}

func refusal(t *testing.T, err error, want error) *ledger.RefusedError {
	t.Helper()
	var re *ledger.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, want) {
		t.Fatalf("error = %v, want a refusal for %v", err, want)
	}
	return re
}

func testClaimReturnsEverythingTheConsumerNeeds(t *testing.T, b bundle) {
	d := b.create(t, "rem-1")
	got, err := b.claim("tok-a", d)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ledger.StatusSending || got.ClaimToken != "tok-a" || got.Attempts != 1 ||
		got.RecipientRef != "acct-1/contact-2" || got.TemplateRef != "renewal-v3" || !got.DueAt.Equal(t0) || !got.LeaseUntil.Equal(t0.Add(time.Minute)) {
		t.Fatalf("claimed delivery = %+v", got)
	}
	if n := len(got.History); n != 2 || got.History[1].Status != ledger.StatusSending {
		t.Fatalf("history = %+v, want created then sending", got.History)
	}
}

func testSecondClaimIsRefusedWhileLeasedAndAllowedAfter(t *testing.T, b bundle) {
	d := b.create(t, "rem-2")
	if _, err := b.claim("tok-a", d); err != nil {
		t.Fatal(err)
	}
	_, err := b.claim("tok-b", d)
	re := refusal(t, err, ledger.ErrLeased)
	if re.Current.ClaimToken != "tok-a" {
		t.Fatalf("refusal carries %+v, want the current holder", re.Current)
	}
	b.clk.Advance(61 * time.Second) // lease lapsed: the first consumer died
	got, err := b.claim("tok-b", d)
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempts != 2 || got.ClaimToken != "tok-b" {
		t.Fatalf("re-claim = %+v", got)
	}
	// The first holder can no longer complete.
	stale := got
	stale.ClaimToken = "tok-a"
	_, err = b.l.Complete(context.Background(), stale, "r-1")
	refusal(t, err, ledger.ErrLeaseLost)
}

func testCompleteThenDuplicateIsRecognisedFromAllOld(t *testing.T, b bundle) {
	d := b.create(t, "rem-3")
	c, err := b.claim("tok-a", d)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := b.l.Complete(context.Background(), c, "provider-receipt-9")
	if err != nil {
		t.Fatal(err)
	}
	if sent.Status != ledger.StatusSent || sent.Receipt != "provider-receipt-9" || sent.ClaimToken != "" || !sent.SentAt.Equal(t0) {
		t.Fatalf("sent = %+v", sent)
	}
	_, err = b.claim("tok-b", d)
	re := refusal(t, err, ledger.ErrAlreadySent)
	if re.Current.Receipt != "provider-receipt-9" {
		t.Fatalf("duplicate refusal carries %+v", re.Current)
	}
	// Completing twice with the same claim is also a recognised duplicate.
	_, err = b.l.Complete(context.Background(), c, "provider-receipt-9")
	refusal(t, err, ledger.ErrAlreadySent)
}

func testRetryThenClaimAgain(t *testing.T, b bundle) {
	d := b.create(t, "rem-4")
	c, _ := b.claim("tok-a", d)
	r, err := b.l.Retry(context.Background(), c, ledger.Failure{Class: "server", Message: "provider answered 503", NextAttemptAt: t0.Add(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != ledger.StatusRetrying || r.LastErrorClass != "server" || r.ClaimToken != "" || !r.NextAttemptAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("retrying = %+v", r)
	}
	if _, err := b.claim("tok-b", d); err != nil {
		t.Fatalf("claim after retry: %v", err)
	}
}

func testNotDueAndExpiredAreRefusedWithTheItem(t *testing.T, b bundle) {
	ctx := context.Background()
	future := ledger.Delivery{ReminderID: "rem-5", Channel: "sms", Provider: "webhook", DueAt: t0.Add(10 * time.Minute), ExpiresAt: t0.Add(time.Hour), Status: ledger.StatusQueued}
	if err := b.l.Create(ctx, future); err != nil {
		t.Fatal(err)
	}
	_, err := b.claim("tok", future)
	re := refusal(t, err, ledger.ErrNotDue)
	if !re.Current.DueAt.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("not-due refusal carries dueAt %v", re.Current.DueAt)
	}
	b.clk.Advance(2 * time.Hour)
	_, err = b.claim("tok", future)
	re = refusal(t, err, ledger.ErrExpired)
	exp, err := b.l.Expire(ctx, re.Current)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Status != ledger.StatusExpired {
		t.Fatalf("expired = %+v", exp)
	}
	_, err = b.claim("tok", future)
	refusal(t, err, ledger.ErrFinished)
}

func testDeadLetterAndRedriveClaim(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-6")
	c, _ := b.claim("tok-a", d)
	dead, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "rejected", Message: "provider answered 400: unknown recipient"})
	if err != nil {
		t.Fatal(err)
	}
	if dead.Status != ledger.StatusDead || dead.LastError == "" {
		t.Fatalf("dead = %+v", dead)
	}
	// Dead-lettering again is refused as finished.
	_, err = b.l.DeadLetter(ctx, d, ledger.Failure{Class: "decode", Message: "x"})
	refusal(t, err, ledger.ErrFinished)
	// A plain copy of its message (a late duplicate) may not claim it...
	_, err = b.claim("tok-dup", d)
	refusal(t, err, ledger.ErrFinished)
	// ...a message redriven from the DLQ may, and the attempt budget
	// restarts: the attempt before the redrive no longer counts.
	revived, err := b.revive("tok-r", d)
	if err != nil {
		t.Fatalf("redrive claim: %v", err)
	}
	if revived.Status != ledger.StatusSending || revived.Attempts != 2 || revived.BudgetFrom != 1 || revived.BudgetUsed() != 1 {
		t.Fatalf("revived = status %s, attempts %d, budget from %d; want sending, 2, 1", revived.Status, revived.Attempts, revived.BudgetFrom)
	}
	// A retry of the redriven message claims the live delivery as usual:
	// the budget does not restart again.
	if _, err := b.l.Retry(ctx, revived, ledger.Failure{Class: "server", Message: "503", NextAttemptAt: b.clk.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	again, err := b.revive("tok-r2", d)
	if err != nil {
		t.Fatalf("claim by the redriven message's retry: %v", err)
	}
	if again.Attempts != 3 || again.BudgetFrom != 1 || again.BudgetUsed() != 2 {
		t.Fatalf("retried = attempts %d, budget from %d; want 3, 1", again.Attempts, again.BudgetFrom)
	}
	// A revive of a delivery that was sent meanwhile is a duplicate.
	if _, err := b.l.Complete(ctx, again, "r-1"); err != nil {
		t.Fatal(err)
	}
	_, err = b.revive("tok-r3", d)
	refusal(t, err, ledger.ErrAlreadySent)
}

func testDeadLetterRefusesADeliveryInFlightElsewhere(t *testing.T, b bundle) {
	d := b.create(t, "rem-7")
	if _, err := b.claim("tok-a", d); err != nil {
		t.Fatal(err)
	}
	_, err := b.l.DeadLetter(context.Background(), d, ledger.Failure{Class: "decode", Message: "x"})
	refusal(t, err, ledger.ErrLeased)
}

func testUnknownDeliveryIsNotFound(t *testing.T, b bundle) {
	_, err := b.l.Claim(context.Background(), ledger.Claim{Key: message.DeliveryKey{ReminderID: "nope", Channel: "email", Provider: "webhook"}, Token: "t", LeaseUntil: t0, DueBy: t0})
	refusal(t, err, ledger.ErrNotFound)
}

func testCreateIsConditional(t *testing.T, b bundle) {
	d := b.create(t, "rem-8")
	refusal(t, b.l.Create(context.Background(), d), ledger.ErrExists)
}

func testReleaseReturnsToTheCalendar(t *testing.T, b bundle) {
	d := b.create(t, "rem-9")
	_, err := b.l.Release(context.Background(), d.Key(), d.DueAt.Add(time.Hour), "a message with another dueAt")
	refusal(t, err, ledger.ErrNotReleasable)
	got, err := b.l.Release(context.Background(), d.Key(), d.DueAt, "due in 2h")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ledger.StatusPending || got.History[len(got.History)-1].Note != "due in 2h" {
		t.Fatalf("released = %+v", got)
	}
	c, _ := b.claim("tok", d)
	if _, err := b.l.Complete(context.Background(), c, "r"); err != nil {
		t.Fatal(err)
	}
	_, err = b.l.Release(context.Background(), d.Key(), d.DueAt, "x")
	refusal(t, err, ledger.ErrAlreadySent)
}

func testCancelEndsAnUnsentDeliveryOnly(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-c1")
	got, err := b.l.Cancel(ctx, d.Key(), "by operator")
	if err != nil || got.Status != ledger.StatusCancelled {
		t.Fatalf("cancel = %+v, %v", got, err)
	}
	refusal(t, func() error { _, err := b.l.Cancel(ctx, d.Key(), "again"); return err }(), ledger.ErrFinished)
	_, err = b.claim("tok", d)
	refusal(t, err, ledger.ErrFinished)

	inFlight := b.create(t, "rem-c2")
	if _, err := b.claim("tok", inFlight); err != nil {
		t.Fatal(err)
	}
	re := refusal(t, func() error { _, err := b.l.Cancel(ctx, inFlight.Key(), "x"); return err }(), ledger.ErrLeased)
	if re.Current.LeaseUntil.IsZero() {
		t.Fatalf("refusal lacks the lease: %+v", re.Current)
	}

	sent := b.create(t, "rem-c3")
	c, _ := b.claim("tok", sent)
	if _, err := b.l.Complete(ctx, c, "r"); err != nil {
		t.Fatal(err)
	}
	refusal(t, func() error { _, err := b.l.Cancel(ctx, sent.Key(), "x"); return err }(), ledger.ErrAlreadySent)
	refusal(t, func() error {
		_, err := b.l.Cancel(ctx, ledger.Delivery{ReminderID: "nope", Channel: "email", Provider: "webhook"}.Key(), "x")
		return err
	}(), ledger.ErrNotFound)
}

func testRequeueNeedsTheDeliveryAsRead(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-q1")
	read, err := b.l.Get(ctx, d.Key())
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Second)
	got, err := b.l.Requeue(ctx, read, "repair")
	if err != nil || got.Status != ledger.StatusQueued || !got.UpdatedAt.Equal(b.clk.Now()) {
		t.Fatalf("requeue = %+v, %v", got, err)
	}
	// A second run that read the same version loses.
	re := refusal(t, func() error { _, err := b.l.Requeue(ctx, read, "repair"); return err }(), ledger.ErrChanged)
	if re.Current.Status != ledger.StatusQueued {
		t.Fatalf("refusal current = %+v", re.Current)
	}
	c, _ := b.claim("tok", d)
	if _, err := b.l.Complete(ctx, c, "r"); err != nil {
		t.Fatal(err)
	}
	refusal(t, func() error { _, err := b.l.Requeue(ctx, got, "repair"); return err }(), ledger.ErrAlreadySent)
}

func testHistoryIsBounded(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-10")
	var last ledger.Delivery
	for i := 0; i < 6; i++ {
		c, err := b.claim(fmt.Sprint("tok-", i), d)
		if err != nil {
			t.Fatal(err)
		}
		if last, err = b.l.Retry(ctx, c, ledger.Failure{Class: "server", Message: "503", NextAttemptAt: t0}); err != nil {
			t.Fatal(err)
		}
		if len(last.History) > 7 { // the limit, plus the claim's own append
			t.Fatalf("history grew to %d entries", len(last.History))
		}
	}
	if got := last.History[len(last.History)-1]; got.Status != ledger.StatusRetrying {
		t.Fatalf("last entry = %+v", got)
	}
	if last.History[0].Status == ledger.StatusQueued {
		t.Fatal("oldest entries were not dropped")
	}
}

func testConcurrentClaimsHaveOneWinner(t *testing.T, b bundle) {
	d := b.create(t, "rem-11")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, leased := 0, 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.claim(fmt.Sprint("tok-", i), d)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, ledger.ErrLeased):
				leased++
			default:
				t.Errorf("claim: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || leased != 7 {
		t.Fatalf("%d wins, %d refused as leased; want 1 and 7", wins, leased)
	}
}

func testDueAndExpiryBoundaries(t *testing.T, b bundle) {
	ctx := context.Background()
	d := ledger.Delivery{ReminderID: "rem-edge", Channel: "email", Provider: "webhook", DueAt: t0.Add(time.Minute), ExpiresAt: t0.Add(2 * time.Minute), Status: ledger.StatusQueued}
	if err := b.l.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	claim := func(dueBy time.Time) error {
		_, err := b.l.Claim(ctx, ledger.Claim{Key: d.Key(), Token: "t", LeaseUntil: b.clk.Now().Add(time.Second), DueBy: dueBy})
		return err
	}
	refusal(t, claim(d.DueAt.Add(-time.Millisecond)), ledger.ErrNotDue)
	b.clk.Advance(2 * time.Minute) // now == expiresAt: expired
	refusal(t, claim(d.DueAt), ledger.ErrExpired)
	b.clk.Advance(-time.Millisecond) // one millisecond before expiry, dueBy == dueAt: claimable
	if err := claim(d.DueAt); err != nil {
		t.Fatalf("claim at the boundaries: %v", err)
	}
}

func testExpireWaitsForAForeignLease(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.create(t, "rem-lease")
	c, err := b.claim("mine", d)
	if err != nil {
		t.Fatal(err)
	}
	other := c
	other.ClaimToken = "theirs"
	_, err = b.l.Expire(ctx, other)
	refusal(t, err, ledger.ErrLeased)
	_, err = b.l.Retry(ctx, other, ledger.Failure{Class: "server", Message: "x", NextAttemptAt: t0})
	refusal(t, err, ledger.ErrLeaseLost)
	b.clk.Advance(61 * time.Second) // the lease lapsed
	if got, err := b.l.Expire(ctx, other); err != nil || got.Status != ledger.StatusExpired {
		t.Fatalf("expire after the lease: %+v, %v", got, err)
	}
}

// testNoDeliveryExpiresBeforeItsReminder: a delivery item is kept 90 days
// (the default retention) after its reminder's expiresAt, from its
// creation, whichever transition ends it and whether the writer knew
// expiresAt (a cancel by key does not). Otherwise an old import run again
// after the item expired, with expiresAt still ahead, would create the
// delivery anew and send it a second time.
func testNoDeliveryExpiresBeforeItsReminder(t *testing.T, b bundle) {
	ctx := context.Background()
	far := t0.Add(400 * 24 * time.Hour)
	want := func(what string, got ledger.Delivery, expiresAt time.Time) {
		t.Helper()
		stored, err := b.l.Get(ctx, got.Key())
		if err != nil {
			t.Fatal(err)
		}
		at := expiresAt.Add(ledger.DefaultRetention)
		if !stored.TTL.Equal(at) || !got.TTL.Equal(stored.TTL) {
			t.Errorf("%s: TTL %v (returned %v), want %v", what, stored.TTL, got.TTL, at)
		}
	}
	// Live: set at creation.
	live, err := b.l.Get(ctx, b.createExpiring(t, "rem-ttl-0", far).Key())
	if err != nil {
		t.Fatal(err)
	}
	want("live", live, far)
	// Sent, expiring in a day, and in 400 days.
	soon := b.create(t, "rem-ttl-1")
	c, _ := b.claim("tok", soon)
	sent, err := b.l.Complete(ctx, c, "r")
	if err != nil {
		t.Fatal(err)
	}
	want("sent, expiring in a day", sent, soon.ExpiresAt)
	c, _ = b.claim("tok", b.createExpiring(t, "rem-ttl-2", far))
	sent, err = b.l.Complete(ctx, c, "r")
	if err != nil {
		t.Fatal(err)
	}
	want("sent, expiring in 400 days", sent, far)
	// Dead-lettered after a claim, and by key as the consumer does for a
	// provider it lacks.
	c, _ = b.claim("tok", b.createExpiring(t, "rem-ttl-3", far))
	dead, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "rejected", Message: "400"})
	if err != nil {
		t.Fatal(err)
	}
	want("dead-lettered", dead, far)
	byKey := b.createExpiring(t, "rem-ttl-4", far)
	dead, err = b.l.DeadLetter(ctx, ledger.Delivery{ReminderID: byKey.ReminderID, Channel: byKey.Channel, Provider: byKey.Provider}, ledger.Failure{Class: "config", Message: "no provider"})
	if err != nil {
		t.Fatal(err)
	}
	want("dead-lettered by key", dead, far)
	// Cancelled by key.
	cancelled, err := b.l.Cancel(ctx, b.createExpiring(t, "rem-ttl-5", far).Key(), "by operator")
	if err != nil {
		t.Fatal(err)
	}
	want("cancelled by key", cancelled, far)
	// Expired an hour after its expiresAt: still counted from expiresAt.
	late := b.createExpiring(t, "rem-ttl-6", t0.Add(time.Hour))
	b.clk.Advance(2 * time.Hour)
	exp, err := b.l.Expire(ctx, late)
	if err != nil {
		t.Fatal(err)
	}
	want("expired", exp, late.ExpiresAt)
}

// testReceiptIsClipped: a provider's receipt is an identifier; one of 64 KiB
// is kept to MaxReceipt bytes, so the item stays under 1 KB.
func testReceiptIsClipped(t *testing.T, b bundle) {
	c, _ := b.claim("tok", b.create(t, "rem-receipt"))
	sent, err := b.l.Complete(context.Background(), c, strings.Repeat("é", 32<<10))
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Receipt) > ledger.MaxReceipt || !utf8.ValidString(sent.Receipt) || !strings.HasPrefix(sent.Receipt, "éé") || !strings.HasSuffix(sent.Receipt, "…") {
		t.Fatalf("receipt of %d bytes stored as %d bytes (valid UTF-8: %v)", 64<<10, len(sent.Receipt), utf8.ValidString(sent.Receipt))
	}
}
