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
)

// creatorStore is what the creator cases need besides Store: an account's
// listing of one creator's reminders, which the intake's callers see.
type creatorStore interface {
	Store
	ListAccountCreatedBy(ctx context.Context, account, creator string, limit int, next string) (ledger.AccountPage, error)
}

var (
	_ creatorStore = (*ledger.Ledger)(nil)
	_ creatorStore = (*ledger.Memory)(nil)
)

const (
	billing = "arn:aws:sts::123456789012:assumed-role/billing"
	booking = "arn:aws:sts::123456789012:assumed-role/booking"
)

// testAReminderKeepsItsCreatorAndListsByIt: the creator is written once,
// with the reminder item (a second create of the id, by another, finds the
// first's creator), kept by a reschedule; an account's listing for one
// creator holds that creator's reminders alone, in order, over pages that
// may come back short or empty while others' reminders are interleaved,
// and ends.
func testAReminderKeepsItsCreatorAndListsByIt(t *testing.T, b bundle) {
	l, ok := b.l.(creatorStore)
	if !ok {
		t.Fatalf("%T has no ListAccountCreatedBy", b.l)
	}
	ctx := context.Background()
	mk := func(id, account, creator string, due time.Duration) {
		t.Helper()
		r := ledger.ReminderItem{ID: id, AccountRef: account, DueAt: t0.Add(due), ExpiresAt: t0.Add(due + time.Hour), CreatedBy: creator,
			Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"}}}
		if _, _, err := l.CreateReminder(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	// Written once, read back, kept by a move.
	mk("rem-c1", "acct-c", billing, time.Hour)
	again := ledger.ReminderItem{ID: "rem-c1", AccountRef: "acct-c", DueAt: t0.Add(time.Hour), ExpiresAt: t0.Add(2 * time.Hour), CreatedBy: booking,
		Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"}}}
	stored, exists, err := l.CreateReminder(ctx, again)
	if err != nil || !exists || stored.CreatedBy != billing {
		t.Fatalf("a second create of rem-c1 by another: exists %v, creator %q, %v; want the first's, %q", exists, stored.CreatedBy, err, billing)
	}
	read, err := l.ReadReminder(ctx, "rem-c1")
	if err != nil || read.Reminder == nil || read.Reminder.CreatedBy != billing {
		t.Fatalf("rem-c1 read back: %+v, %v", read.Reminder, err)
	}
	to := ledger.Move{DueAt: t0.Add(30 * time.Hour), ExpiresAt: t0.Add(31 * time.Hour)}
	if err := l.MoveReminder(ctx, ledger.MovePlan{ID: "rem-c1", Reminder: read.Reminder, To: to}); err != nil {
		t.Fatal(err)
	}
	if read, err := l.ReadReminder(ctx, "rem-c1"); err != nil || read.Reminder.CreatedBy != billing {
		t.Fatalf("rem-c1 after a move: %+v, %v", read.Reminder, err)
	}

	// Interleaved: billing's, booking's and reminders with no creator (the
	// CLI's, or written before creators were recorded), in one account.
	var want []string
	for i := range 12 {
		due := time.Duration(24-i) * time.Hour // latest due first: i's order
		switch id := fmt.Sprintf("rem-i%02d", i); i % 3 {
		case 0:
			mk(id, "acct-i", billing, due)
			want = append(want, id)
		case 1:
			mk(id, "acct-i", booking, due)
		default:
			mk(id, "acct-i", "", due)
		}
	}
	mk("rem-other-account", "acct-j", billing, time.Hour)
	list := func(account, creator string, limit int) (ids []string, pages, empty int) {
		t.Helper()
		next := ""
		for ; ; pages++ {
			if pages > 50 {
				t.Fatal("the listing does not end")
			}
			page, err := l.ListAccountCreatedBy(ctx, account, creator, limit, next)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Reminders) > limit {
				t.Fatalf("a page of %d; the limit is %d", len(page.Reminders), limit)
			}
			if len(page.Reminders) == 0 && page.Next != "" {
				empty++
			}
			for _, r := range page.Reminders {
				if r.AccountRef != account || r.CreatedBy != creator || r.Metadata != nil || len(r.Deliveries) != 1 {
					t.Errorf("listed %+v", r)
				}
				ids = append(ids, r.ID)
			}
			if next = page.Next; next == "" {
				return ids, pages + 1, empty
			}
		}
	}
	for _, limit := range []int{1, 2, 3, 4, 5, 100} {
		if got, _, _ := list("acct-i", billing, limit); !slices.Equal(got, want) {
			t.Errorf("billing's in acct-i, pages of %d: %v; want %v", limit, got, want)
		}
	}
	if got, _, _ := list("acct-i", "arn:aws:sts::123456789012:assumed-role/nobody", 10); len(got) != 0 {
		t.Errorf("a creator with no reminders lists %v", got)
	}
	// The listing of every creator's still holds them all.
	all, next := 0, ""
	for {
		page, err := l.ListAccount(ctx, "acct-i", 5, next)
		if err != nil {
			t.Fatal(err)
		}
		all += len(page.Reminders)
		if next = page.Next; next == "" {
			break
		}
	}
	if all != 12 {
		t.Errorf("the account's whole listing has %d reminders; want 12", all)
	}

	// Far more of others' than one call reads: a call comes back empty
	// with a next token, and following it reaches billing's.
	for i := range 320 {
		mk(fmt.Sprintf("rem-many-%03d", i), "acct-many", booking, time.Duration(1000-i)*time.Minute)
	}
	mk("rem-many-mine", "acct-many", billing, time.Minute) // due first: listed last
	got, pages, empty := list("acct-many", billing, 1)
	if !slices.Equal(got, []string{"rem-many-mine"}) || empty == 0 || pages < 2 {
		t.Errorf("billing's one among 320 of booking's: %v in %d pages (%d empty); want it, after an empty page with a next token", got, pages, empty)
	}

	// Refusals.
	if _, err := l.ListAccountCreatedBy(ctx, "acct-i", "", 10, ""); err == nil {
		t.Error("a listing with no creator was served")
	}
	if _, err := l.ListAccountCreatedBy(ctx, "acct-i", strings.Repeat("x", ledger.MaxCreatorLen+1), 10, ""); err == nil {
		t.Error("a listing with an overlong creator was served")
	}
	for _, limit := range []int{0, ledger.MaxAccountPage + 1} {
		if _, err := l.ListAccountCreatedBy(ctx, "acct-i", billing, limit, ""); err == nil {
			t.Errorf("a page of %d was served", limit)
		}
	}
	if _, err := l.ListAccountCreatedBy(ctx, "acct-i", billing, 10, "x"); !errors.Is(err, ledger.ErrBadPageToken) {
		t.Errorf("a bad token: %v; want ErrBadPageToken", err)
	}
}
