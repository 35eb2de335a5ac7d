package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
)

// testASeriesIsWrittenOnceAdvancedOnceAndCancelled: a series item is
// written once (a second create returns it, addresses and all); it reads
// back with its partition, is due for extension at its time in its own
// index partition (not a delivery shard's), advances only from the Next
// its caller read, leaves the index when ended or cancelled, and is listed
// with its account as a series.
func testASeriesIsWrittenOnceAdvancedOnceAndCancelled(t *testing.T, b bundle) {
	ctx := context.Background()
	item := ledger.ReminderItem{ID: "ser-1", AccountRef: "acct-s", DueAt: t0.Add(time.Hour), ExpiresAt: t0.Add(25 * time.Hour),
		Deliveries: []ledger.ReminderDelivery{{Channel: "email", Provider: "ses", RecipientRef: "c-1", TemplateRef: "t"}},
		Recur:      "FREQ=WEEKLY", Local: ledger.Local{TimeZone: "Europe/Berlin", DueLocal: "2026-11-30T11:00"}, CreatedBy: "role/app"}
	s := ledger.Series{Item: item, Addresses: map[string]string{"email#ses": "ana@example.com"}, Next: 1, ExtendAt: t0}
	if _, exists, err := b.l.CreateSeries(ctx, s); err != nil || exists {
		t.Fatalf("create: %v, %v", exists, err)
	}
	got, exists, err := b.l.CreateSeries(ctx, ledger.Series{Item: item, Next: 1, ExtendAt: t0})
	if err != nil || !exists || got.Addresses["email#ses"] != "ana@example.com" || got.Item.Recur != "FREQ=WEEKLY" || got.Next != 1 ||
		got.Item.Local != item.Local || got.Item.CreatedBy != "role/app" {
		t.Fatalf("a second create: %+v, %v, %v", got, exists, err)
	}
	stored, err := b.l.ReadReminder(ctx, "ser-1")
	if err != nil || stored.Series == nil || stored.Reminder != nil || stored.Empty() || !stored.Series.ExtendAt.Equal(t0) {
		t.Fatalf("read back: %+v, %v", stored, err)
	}
	due := func(by time.Time) []string {
		var ids []string
		for shard := range 2 {
			got, err := b.l.DueSeries(ctx, shard, by, 10)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, got...)
		}
		return ids
	}
	if ids := due(t0.Add(-time.Second)); len(ids) != 0 {
		t.Fatalf("due before its time: %v", ids)
	}
	if ids := due(t0); len(ids) != 1 || ids[0] != "ser-1" {
		t.Fatalf("due at its time: %v", ids)
	}
	for shard := range 2 { // no delivery cursor sees it
		if es := b.indexOf(t, shard, t0.Add(365*24*time.Hour)); len(es) != 0 {
			t.Fatalf("the delivery shard %d holds %+v", shard, es)
		}
	}
	if err := b.l.AdvanceSeries(ctx, "ser-1", 2, 3, t0.Add(time.Hour)); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("advance from a Next it is not at: %v", err)
	}
	if err := b.l.AdvanceSeries(ctx, "ser-1", 1, 4, t0.Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ids := due(t0.Add(47 * time.Hour)); len(ids) != 0 {
		t.Fatalf("due before its new time: %v", ids)
	}
	if ids := due(t0.Add(48 * time.Hour)); len(ids) != 1 {
		t.Fatalf("due at its new time: %v", ids)
	}
	page, err := b.l.ListAccount(ctx, "acct-s", 10, "")
	if err != nil || len(page.Reminders) != 1 || !page.Reminders[0].IsSeries || page.Reminders[0].ID != "ser-1" {
		t.Fatalf("the account's listing: %+v, %v", page, err)
	}
	mine, err := b.l.ListAccountCreatedBy(ctx, "acct-s", "role/app", 10, "")
	if err != nil || len(mine.Reminders) != 1 || !mine.Reminders[0].IsSeries {
		t.Fatalf("its creator's listing: %+v, %v", mine, err)
	}
	cancelled, err := b.l.CancelSeries(ctx, "ser-1")
	if err != nil || cancelled.CancelledAt.IsZero() || cancelled.Next != 4 {
		t.Fatalf("cancel: %+v, %v", cancelled, err)
	}
	if ids := due(t0.Add(1000 * time.Hour)); len(ids) != 0 {
		t.Fatalf("due once cancelled: %v", ids)
	}
	if err := b.l.AdvanceSeries(ctx, "ser-1", 4, 5, t0.Add(time.Hour)); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("advance a cancelled series: %v", err)
	}
	if _, err := b.l.CancelSeries(ctx, "ser-none"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("cancel an unknown series: %v", err)
	}
}
