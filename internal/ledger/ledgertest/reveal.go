package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
)

// The reveal of an address to an operator (RecordReveal), and the read of
// the recently changed deliveries (ReadRecent): both for the support
// console.

// createAddressed creates a queued e-mail delivery with an address.
func (b bundle) createAddressed(t *testing.T, id string) ledger.Delivery {
	t.Helper()
	d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "ses", RecipientRef: "acct-1/contact-2", TemplateRef: "renewal-v3",
		Address: "ana@example.com", TemplateData: map[string]string{"name": "Ana"}, DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour), Status: ledger.StatusQueued}
	if err := b.l.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}

// testARevealIsRecordedAndChangesNothingElse: a reveal adds an entry to
// the history (who and why, the status kept, marked Reveal) and returns
// the address; the status, the lease, the attempts, updatedAt and the due
// index stay as they were. A delivery being sent refuses it (ErrInFlight:
// its consumer's next write replaces the history from its claim's read);
// once its lease has lapsed it takes it, and the claim that takes over
// still completes it.
func testARevealIsRecordedAndChangesNothingElse(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.createAddressed(t, "rem-reveal-1")
	first, err := b.claim("tok-0", d)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.l.RecordReveal(ctx, d.Key(), ledger.Reveal{By: "ana", Reason: "ticket 4821"})
	refusal(t, err, ledger.ErrInFlight)
	if read, _ := b.l.Get(ctx, d.Key()); len(read.History) != len(first.History) {
		t.Fatalf("a refused reveal wrote %+v", read.History)
	}
	// The lease lapses (its consumer died): a reveal is recorded, and the
	// claim that takes over completes the delivery.
	b.clk.Advance(first.LeaseUntil.Sub(b.clk.Now()) + 2*time.Minute)
	got, err := b.l.RecordReveal(ctx, d.Key(), ledger.Reveal{By: "ana", Reason: "  ticket   4821: customer asks\n"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Address != "ana@example.com" {
		t.Fatalf("the reveal returns address %q", got.Address)
	}
	last := got.History[len(got.History)-1]
	if len(got.History) != len(first.History)+1 || !last.Reveal || last.Feedback || last.Status != ledger.StatusSending ||
		last.Note != "address revealed to ana: ticket 4821: customer asks" || last.At != ledger.Format(b.clk.Now()) {
		t.Fatalf("history %+v; want one reveal entry more, status sending, naming who and why", got.History)
	}
	if got.Status != first.Status || got.ClaimToken != first.ClaimToken || !got.LeaseUntil.Equal(first.LeaseUntil) || got.Attempts != first.Attempts ||
		!got.UpdatedAt.Equal(first.UpdatedAt) || !got.TTL.Equal(first.TTL) || (got.Index == nil) != (first.Index == nil) || got.LapsedLeaseTaken() {
		t.Fatalf("the reveal changed more than the history: %+v, was %+v", got, first)
	}
	if tr := got.Transitions(); len(tr) != len(first.History) || slices.ContainsFunc(tr, func(e ledger.Entry) bool { return e.Reveal }) {
		t.Fatalf("Transitions() = %+v, want the transitions alone", tr)
	}
	read, err := b.l.Get(ctx, d.Key())
	if err != nil || len(read.History) != len(got.History) || !read.History[len(read.History)-1].Reveal {
		t.Fatalf("read back %+v, %v", read.History, err)
	}
	c, err := b.claim("tok-1", read)
	if err != nil {
		t.Fatalf("the claim that takes over after a reveal: %v", err)
	}
	sent, err := b.l.Complete(ctx, c, "msg-1")
	if err != nil {
		t.Fatalf("the claim's complete after a reveal: %v", err)
	}
	if sent.Status != ledger.StatusSent || !slices.ContainsFunc(sent.History, func(e ledger.Entry) bool { return e.Reveal }) {
		t.Fatalf("after the complete: %s, history %+v", sent.Status, sent.History)
	}
	// A sent delivery takes one too, and keeps its status.
	again, err := b.l.RecordReveal(ctx, d.Key(), ledger.Reveal{By: "bo", Reason: "bounce check"})
	if err != nil || again.Status != ledger.StatusSent || !again.History[len(again.History)-1].Reveal || !again.UpdatedAt.Equal(sent.UpdatedAt) {
		t.Fatalf("a reveal of a sent delivery: %+v, %v", again, err)
	}
}

// testARevealNeedsAReasonAndAKnownDelivery: a reveal without who or why is
// refused without a write; one of a delivery that does not exist is
// ErrNotFound; a long reason is clipped to the history's note.
func testARevealNeedsAReasonAndAKnownDelivery(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.createAddressed(t, "rem-reveal-2")
	for _, r := range []ledger.Reveal{{By: "ana", Reason: " \n"}, {By: " ", Reason: "ticket 1"}} {
		if _, err := b.l.RecordReveal(ctx, d.Key(), r); err == nil {
			t.Fatalf("a reveal %+v was recorded", r)
		}
	}
	if read, _ := b.l.Get(ctx, d.Key()); slices.ContainsFunc(read.History, func(e ledger.Entry) bool { return e.Reveal }) {
		t.Fatalf("a refused reveal wrote %+v", read.History)
	}
	_, err := b.l.RecordReveal(ctx, message.DeliveryKey{ReminderID: "rem-none", Channel: "email", Provider: "ses"}, ledger.Reveal{By: "ana", Reason: "x y z"})
	refusal(t, err, ledger.ErrNotFound)
	got, err := b.l.RecordReveal(ctx, d.Key(), ledger.Reveal{By: "ana", Reason: strings.Repeat("why ", 100)})
	if err != nil {
		t.Fatal(err)
	}
	if n := got.History[len(got.History)-1].Note; len(n) > ledger.MaxNote || !strings.HasPrefix(n, "address revealed to ana: why why") {
		t.Fatalf("note %q (%d bytes); want it clipped to %d", n, len(n), ledger.MaxNote)
	}
}

// testRevealsKeepTheHistoryBounded: many reveals keep the history to its
// limit, the last two transitions and the last reveal kept.
func testRevealsKeepTheHistoryBounded(t *testing.T, b bundle) {
	ctx := context.Background()
	d := b.createAddressed(t, "rem-reveal-3")
	c, err := b.l.Get(ctx, d.Key())
	if err != nil {
		t.Fatal(err)
	}
	var got ledger.Delivery
	for i := range 12 {
		b.clk.Advance(time.Second)
		if got, err = b.l.RecordReveal(ctx, d.Key(), ledger.Reveal{By: "ana", Reason: fmt.Sprint("look ", i, " ", strings.Repeat("x", 80))}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got.History) > 6 || len(got.Transitions()) != len(c.History) || !strings.Contains(got.History[len(got.History)-1].Note, "look 11") {
		t.Fatalf("history %+v; want at most 6 entries, the transitions and the last reveal kept", got.History)
	}
	// A full history: a run of reveals costs it one entry, not all.
	full := b.createAddressed(t, "rem-reveal-4")
	for i := range 3 {
		b.clk.Advance(time.Minute)
		cl, err := b.claim(fmt.Sprint("tok-", i), full)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.l.Retry(ctx, cl, ledger.Failure{Class: "server", Message: "503", NextAttemptAt: b.clk.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := b.l.Get(ctx, full.Key())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		b.clk.Advance(time.Second)
		if got, err = b.l.RecordReveal(ctx, full.Key(), ledger.Reveal{By: "ana", Reason: fmt.Sprint("noise ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	kept := 0
	for _, e := range before.History {
		if slices.Contains(got.History, e) {
			kept++
		}
	}
	reveals := slices.DeleteFunc(slices.Clone(got.History), func(e ledger.Entry) bool { return !e.Reveal })
	if kept < len(before.History)-1 || len(reveals) != 1 || reveals[0].Note != "address revealed to ana: noise 8" {
		t.Fatalf("after 9 reveals the history kept %d of its %d entries, with reveals %+v; want all but one at most, and the last reveal",
			kept, len(before.History), reveals)
	}
}

// testReadRecentReadsWhatChangedSinceInBoundedPages: the deliveries whose
// last change is at or after Since come back, without their address or
// template data; the rest do not; a read bounded to fewer items than the
// table pages on with Next, each page reading at most its bound, and the
// pages together find the same.
func testReadRecentReadsWhatChangedSinceInBoundedPages(t *testing.T, b bundle) {
	ctx := context.Background()
	var old []ledger.Delivery
	for i := range 3 {
		old = append(old, b.createAddressed(t, fmt.Sprint("rem-recent-old-", i)))
	}
	b.clk.Advance(2 * time.Hour)
	since := b.clk.Now().Add(-time.Minute)
	want := map[string]bool{}
	for i := range 4 {
		d := b.createAddressed(t, fmt.Sprint("rem-recent-new-", i))
		want[d.Key().String()] = true
	}
	c, err := b.claim("tok-old", old[0]) // an old delivery changed now
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.l.Complete(ctx, c, "msg-1"); err != nil {
		t.Fatal(err)
	}
	want[old[0].Key().String()] = true

	page, err := b.l.ReadRecent(ctx, ledger.RecentQuery{Since: since, Read: 1000})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, d := range page.Deliveries {
		got[d.Key().String()] = true
		if d.Address != "" || d.TemplateData != nil || d.RecipientRef != "" || d.UpdatedAt.Before(since) || len(d.History) == 0 {
			t.Errorf("%s read as %+v; want no address, template data or reference, and its history", d.Key(), d)
		}
		if d.Key() == old[0].Key() && (d.Status != ledger.StatusSent || d.SentAt.IsZero() || !d.DueAt.Equal(t0)) {
			t.Errorf("the sent one reads %+v", d)
		}
	}
	if len(got) != len(want) || page.Next != "" || page.Scanned < 7 {
		t.Fatalf("read %v (%d scanned, next %q); want %v, read to the end", got, page.Scanned, page.Next, want)
	}

	paged, pages := map[string]bool{}, 0
	for q := (ledger.RecentQuery{Since: since, Read: 2}); ; pages++ {
		p, err := b.l.ReadRecent(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if p.Scanned > 2 {
			t.Fatalf("a page of 2 read %d items", p.Scanned)
		}
		for _, d := range p.Deliveries {
			if paged[d.Key().String()] {
				t.Fatalf("%s read twice", d.Key())
			}
			paged[d.Key().String()] = true
		}
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	if len(paged) != len(want) || pages < 3 {
		t.Fatalf("paged by 2: %v in %d pages; want %v", paged, pages, want)
	}
	if _, err := b.l.ReadRecent(ctx, ledger.RecentQuery{Since: since}); err == nil {
		t.Fatal("a read of 0 items was not refused")
	}
	if _, err := b.l.ReadRecent(ctx, ledger.RecentQuery{Since: since, Read: 1, After: "nonsense"}); !errors.Is(err, ledger.ErrBadPageToken) {
		t.Fatalf("a bad token: %v", err)
	}
}
