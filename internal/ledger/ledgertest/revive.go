package ledgertest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
)

// reviveStore is what the revive cases need besides Store: the operator's
// revive from the ledger (nudge ledger revive).
type reviveStore interface {
	Store
	ReadDead(ctx context.Context, q ledger.DeadQuery) (ledger.DeadPage, error)
	Revive(ctx context.Context, d ledger.Delivery, r ledger.Revival) (ledger.Delivery, error)
}

var (
	_ reviveStore = (*ledger.Ledger)(nil)
	_ reviveStore = (*ledger.Memory)(nil)
)

var byOps = ledger.Revival{By: "ops@example", Reason: "provider fixed (INC-42)"}

// dead creates a delivery, claims it and dead-letters it, as the consumer
// does after a provider 400, and returns it as the ledger now has it.
func (b bundle) dead(t *testing.T, id string, expiresAt time.Time) ledger.Delivery {
	t.Helper()
	d := b.createExpiring(t, id, expiresAt)
	c, err := b.claim("tok-"+id, d)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := b.l.DeadLetter(context.Background(), c, ledger.Failure{Class: "rejected", Message: "provider answered 400"})
	if err != nil {
		t.Fatal(err)
	}
	return dead
}

// testReviveFromTheLedger: a dead delivery, its DLQ copy perhaps aged out,
// is revived from the ledger alone, found by a bounded, paged read; only as
// read, only before its expiresAt, with who and why; and it is sent once
// whatever its DLQ copies do.
func testReviveFromTheLedger(t *testing.T, b bundle) {
	l, ok := b.l.(reviveStore)
	if !ok {
		t.Fatalf("%T has no ReadDead and Revive", b.l)
	}
	// Sequential: the cases share the ledger and its clock.
	t.Run("ReadDeadIsBoundedAndPaged", func(t *testing.T) { testReadDeadIsBoundedAndPaged(t, b, l) })
	t.Run("BackToTheCalendarAheadOfTheCursor", func(t *testing.T) { testReviveBackToTheCalendar(t, b, l) })
	t.Run("OnlyAsReadAndOnce", func(t *testing.T) { testReviveOnlyAsRead(t, b, l) })
	t.Run("NeverPastExpiresAt", func(t *testing.T) { testReviveNeverPastExpiresAt(t, b, l) })
	t.Run("NamesWhoAndWhy", func(t *testing.T) { testReviveNamesWhoAndWhy(t, b, l) })
	t.Run("ADLQCopyAfterTheReviveSendsNothingMore", func(t *testing.T) { testReviveAndADLQCopy(t, b, l) })
}

// testReadDeadIsBoundedAndPaged: ReadDead reads at most Read items a call,
// returns only the dead deliveries, without their address, and a chain of
// Next tokens reaches every one of them once.
func testReadDeadIsBoundedAndPaged(t *testing.T, b bundle, l reviveStore) {
	ctx := context.Background()
	want := map[message.DeliveryKey]bool{}
	for _, id := range []string{"rem-rd-1", "rem-rd-2", "rem-rd-3", "rem-rd-4", "rem-rd-5"} {
		want[b.dead(t, id, t0.Add(24*time.Hour)).Key()] = true
	}
	b.create(t, "rem-rd-live")
	sent := b.create(t, "rem-rd-sent")
	c, _ := b.claim("tok", sent)
	if _, err := b.l.Complete(ctx, c, "r"); err != nil {
		t.Fatal(err)
	}
	withAddress := ledger.Delivery{ReminderID: "rem-rd-addr", Channel: "email", Provider: "ses", RecipientRef: "r", TemplateRef: "t",
		Address: "someone@example.com", TemplateData: map[string]string{"name": "Someone"}, DueAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := b.l.Create(ctx, withAddress); err != nil {
		t.Fatal(err)
	}
	c, _ = b.claim("tok", withAddress)
	if _, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "rejected", Message: "x"}); err != nil {
		t.Fatal(err)
	}
	want[withAddress.Key()] = true

	found := map[message.DeliveryKey]int{}
	after, pages := "", 0
	for {
		page, err := l.ReadDead(ctx, ledger.DeadQuery{Read: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if page.Scanned > 2 || len(page.Deliveries) > 2 {
			t.Fatalf("a read bounded to 2 items read %d and returned %d", page.Scanned, len(page.Deliveries))
		}
		for _, d := range page.Deliveries {
			if d.Status != ledger.StatusDead {
				t.Errorf("ReadDead returned %s, %s", d.Key(), d.Status)
			}
			if d.Address != "" || d.TemplateData != nil {
				t.Errorf("ReadDead returned %s's address or template data: %q %v", d.Key(), d.Address, d.TemplateData)
			}
			if d.LastErrorClass == "" || d.UpdatedAt.IsZero() || d.ExpiresAt.IsZero() || len(d.History) == 0 {
				t.Errorf("ReadDead returned %s without what its review and revive need: %+v", d.Key(), d)
			}
			if strings.HasPrefix(d.ReminderID, "rem-rd-") {
				found[d.Key()]++
			}
		}
		if page.Next == "" {
			break
		}
		if pages > 50 {
			t.Fatal("the pages never end")
		}
		after = page.Next
	}
	if pages < 4 {
		t.Errorf("%d pages of 2 items each read at least 9 deliveries", pages)
	}
	for k := range want {
		if found[k] != 1 {
			t.Errorf("%s found %d times over the pages, want once", k, found[k])
		}
	}
	if len(found) != len(want) {
		t.Errorf("found %v, want the dead ones only: %v", found, want)
	}
	whole, err := l.ReadDead(ctx, ledger.DeadQuery{Read: 1000})
	if err != nil || whole.Next != "" {
		t.Fatalf("a read of the whole table: next %q, %v", whole.Next, err)
	}
	for _, q := range []ledger.DeadQuery{{Read: 0}, {Read: ledger.MaxDeadRead + 1}, {Read: 5, After: "not-a-token"}} {
		if _, err := l.ReadDead(ctx, q); err == nil {
			t.Errorf("ReadDead(%+v) accepted", q)
		}
	}
	if _, err := l.ReadDead(ctx, ledger.DeadQuery{Read: 5, After: "bm90LWpzb24"}); !errors.Is(err, ledger.ErrBadPageToken) {
		t.Errorf("a token that is not the ledger's: %v, want ErrBadPageToken", err)
	}
}

// testReviveBackToTheCalendar: a revived delivery is pending, in the due
// index at a publish time after the enqueue's cursor (which has passed its
// dueAt long ago), its attempt budget restarted, its TTL never lowered, and
// the next copy of its message claims it as usual.
func testReviveBackToTheCalendar(t *testing.T, b bundle, l reviveStore) {
	ctx := context.Background()
	dead := b.dead(t, "rem-rv-cal", t0.Add(30*24*time.Hour))
	b.clk.Advance(20 * 24 * time.Hour) // the DLQ copy aged out six days ago
	now := b.clk.Now()
	// The enqueue's cursors trail now by its settle: every shard's has
	// passed the delivery's old place and its dueAt.
	cursorAt := ledger.Format(now.Add(-15*time.Second)) + "#~"
	for shard := range 2 {
		cur, err := b.l.Cursor(ctx, shard)
		if err != nil {
			t.Fatal(err)
		}
		if moved, err := b.l.MoveCursor(ctx, shard, cur.Pos, cursorAt, nil); err != nil || !moved {
			t.Fatalf("move cursor %d: %v %v", shard, moved, err)
		}
	}
	got, err := l.Revive(ctx, dead, byOps)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ledger.StatusPending || got.Attempts != dead.Attempts || got.BudgetFrom != dead.Attempts || got.BudgetUsed() != 0 {
		t.Fatalf("revived = status %s, attempts %d, budget from %d; want pending, %d, %d", got.Status, got.Attempts, got.BudgetFrom, dead.Attempts, dead.Attempts)
	}
	if got.TTL.Before(dead.TTL) || got.TTL.IsZero() {
		t.Errorf("TTL %v, was %v: a revive never lowers it", got.TTL, dead.TTL)
	}
	last := got.History[len(got.History)-1]
	if last.Status != ledger.StatusPending || last.Attempt != dead.Attempts || last.Note != "revived by ops@example: provider fixed (INC-42)" {
		t.Errorf("history entry %+v", last)
	}
	e, ok := b.entry(t, dead.Key())
	if !ok || !e.PublishAt.Equal(now) || !e.DueAt.Equal(dead.DueAt) {
		t.Fatalf("index entry %+v (%v), want published now, %v", e, ok, now)
	}
	if got.Index == nil || got.Index.Sort != e.Sort {
		t.Errorf("the revived delivery's index position %+v, the index's %+v", got.Index, e)
	}
	handed := false
	for shard := range 2 {
		es, err := b.l.DueAfter(ctx, shard, cursorAt, now, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range es {
			handed = handed || x.Key == dead.Key()
		}
	}
	if !handed {
		t.Fatalf("the revived entry %q is not after the enqueue's cursor %q: the enqueue would never hand it off", e.Sort, cursorAt)
	}
	c, err := b.claim("tok-next", dead)
	if err != nil || c.Attempts != dead.Attempts+1 || c.BudgetUsed() != 1 {
		t.Fatalf("the next copy's claim: %+v, %v", c, err)
	}
}

// testReviveOnlyAsRead: of two operators reviving the same delivery at
// once, one does; a revive from a read older than the delivery's last
// dead-lettering is refused; a delivery not dead as read is not written.
func testReviveOnlyAsRead(t *testing.T, b bundle, l reviveStore) {
	ctx := context.Background()
	dead := b.dead(t, "rem-rv-twice", b.clk.Now().Add(24*time.Hour))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.Revive(ctx, dead, ledger.Revival{By: "ops-" + string(rune('a'+i)), Reason: "provider fixed"})
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("two revives at once: %v and %v; want one to succeed", errs[0], errs[1])
	}
	for _, err := range errs {
		if err != nil {
			refusal(t, err, ledger.ErrNotDead)
		}
	}
	// Revived, claimed, dead again: the first read is stale.
	c, err := b.claim("tok-2", dead)
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Second)
	again, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "rejected", Message: "provider answered 400"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Revive(ctx, dead, byOps)
	re := refusal(t, err, ledger.ErrChanged)
	if re.Current.Status != ledger.StatusDead || re.Current.Attempts != 2 {
		t.Errorf("the refusal's item %+v", re.Current)
	}
	if got, err := b.l.Get(ctx, dead.Key()); err != nil || got.Status != ledger.StatusDead || got.Index != nil {
		t.Fatalf("after the stale revive: %+v, %v", got, err)
	}
	// Read as not dead: refused without a write.
	live := b.create(t, "rem-rv-live")
	_, err = l.Revive(ctx, live, byOps)
	refusal(t, err, ledger.ErrNotDead)
	if got, _ := b.l.Get(ctx, live.Key()); got.Status != ledger.StatusQueued {
		t.Errorf("a live delivery became %s", got.Status)
	}
	// As read now, it is revived.
	if got, err := l.Revive(ctx, again, byOps); err != nil || got.Status != ledger.StatusPending || got.BudgetFrom != 2 {
		t.Fatalf("revive as read: %+v, %v", got, err)
	}
}

// testReviveNeverPastExpiresAt: a dead delivery whose reminder's
// expiresAt has passed stays dead.
func testReviveNeverPastExpiresAt(t *testing.T, b bundle, l reviveStore) {
	ctx := context.Background()
	now := b.clk.Now()
	dead := b.dead(t, "rem-rv-expired", now.Add(time.Hour))
	b.clk.Advance(time.Hour) // now == expiresAt
	_, err := l.Revive(ctx, dead, byOps)
	re := refusal(t, err, ledger.ErrExpired)
	if re.Current.Status != ledger.StatusDead {
		t.Errorf("the refusal's item is %s", re.Current.Status)
	}
	if got, _ := b.l.Get(ctx, dead.Key()); got.Status != ledger.StatusDead || got.Index != nil {
		t.Errorf("an expired delivery became %s (index %+v)", got.Status, got.Index)
	}
}

// testReviveNamesWhoAndWhy: a revive without who or why, or whose note
// the history could not keep whole, writes nothing.
func testReviveNamesWhoAndWhy(t *testing.T, b bundle, l reviveStore) {
	ctx := context.Background()
	dead := b.dead(t, "rem-rv-why", b.clk.Now().Add(24*time.Hour))
	for _, r := range []ledger.Revival{{By: "ops@example"}, {Reason: "provider fixed"}, {By: "ops@example", Reason: "  "},
		{By: "ops@example", Reason: strings.Repeat("x", ledger.MaxNote)}} {
		if _, err := l.Revive(ctx, dead, r); err == nil || errors.As(err, new(*ledger.RefusedError)) {
			t.Errorf("Revive(%+v): %v, want a refusal to write", r, err)
		}
	}
	if got, _ := b.l.Get(ctx, dead.Key()); got.Status != ledger.StatusDead || !got.UpdatedAt.Equal(dead.UpdatedAt) {
		t.Errorf("a refused revive wrote: %+v", got)
	}
}

// testReviveAndADLQCopy: the delivery's DLQ copy (its message with the
// consumer's dead-letter attributes, nudge-attempts = the attempt that
// died) is still there when the operator revives it from the ledger; the
// console or the CLI redrives it too. The ledger's conditional claim lets
// one attempt at a time take the delivery and refuses every copy once it
// is sent, and a copy of a dead-lettering older than the delivery's last
// revives nothing.
func testReviveAndADLQCopy(t *testing.T, b bundle, l reviveStore) {
	ctx := context.Background()
	copyOf := func(tok string, d ledger.Delivery, attempts int) (ledger.Delivery, error) {
		now := b.clk.Now()
		return b.l.Claim(ctx, ledger.Claim{Key: d.Key(), Token: tok, LeaseUntil: now.Add(time.Minute), DueBy: now.Add(time.Second),
			Revive: true, ReviveAttempts: attempts})
	}

	// The DLQ copy arrives first: it claims the revived delivery as a live
	// one; the enqueue's message finds it leased, then sent.
	dead := b.dead(t, "rem-rv-copy-1", b.clk.Now().Add(24*time.Hour))
	if _, err := l.Revive(ctx, dead, byOps); err != nil {
		t.Fatal(err)
	}
	c, err := copyOf("tok-dlq", dead, dead.Attempts)
	if err != nil || c.Attempts != 2 || c.BudgetFrom != 1 {
		t.Fatalf("the DLQ copy's claim of the revived delivery: %+v, %v", c, err)
	}
	_, err = b.claim("tok-enqueue", dead)
	refusal(t, err, ledger.ErrLeased)
	if _, err := b.l.Complete(ctx, c, "prov-1"); err != nil {
		t.Fatal(err)
	}
	_, err = b.claim("tok-enqueue", dead)
	refusal(t, err, ledger.ErrAlreadySent)
	_, err = copyOf("tok-dlq-2", dead, dead.Attempts)
	refusal(t, err, ledger.ErrAlreadySent)

	// The enqueue's message first, and the delivery dies again: its old
	// DLQ copy (attempt 1's) revives nothing; the new one (attempt 2's) is
	// the operator's to redrive, once.
	dead = b.dead(t, "rem-rv-copy-2", b.clk.Now().Add(24*time.Hour))
	if _, err := l.Revive(ctx, dead, byOps); err != nil {
		t.Fatal(err)
	}
	c, err = b.claim("tok-enqueue", dead)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.DeadLetter(ctx, c, ledger.Failure{Class: "rejected", Message: "provider answered 400"}); err != nil {
		t.Fatal(err)
	}
	_, err = copyOf("tok-old-copy", dead, 1)
	refusal(t, err, ledger.ErrFinished)
	if c, err := copyOf("tok-new-copy", dead, 2); err != nil || c.Attempts != 3 {
		t.Fatalf("the second dead-lettering's copy: %+v, %v", c, err)
	}

	// The console's copy claims the dead delivery while the operator
	// reviews: the revive, from the read before, writes nothing.
	dead = b.dead(t, "rem-rv-copy-3", b.clk.Now().Add(24*time.Hour))
	c, err = copyOf("tok-console", dead, dead.Attempts)
	if err != nil || c.Status != ledger.StatusSending {
		t.Fatalf("the console copy's revive: %+v, %v", c, err)
	}
	_, err = l.Revive(ctx, dead, byOps)
	refusal(t, err, ledger.ErrNotDead)
	if got, _ := b.l.Get(ctx, dead.Key()); got.Status != ledger.StatusSending || got.ClaimToken != "tok-console" || got.Index != nil {
		t.Fatalf("the refused revive changed the claimed delivery: %+v", got)
	}
}
