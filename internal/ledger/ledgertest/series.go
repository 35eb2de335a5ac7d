package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	at := func(next int) ledger.Start {
		return ledger.Start{DueAt: item.DueAt, DueLocal: item.Local.DueLocal, Next: next}
	}
	if err := b.l.AdvanceSeries(ctx, "ser-1", at(2), 3, t0.Add(time.Hour)); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("advance from a Next it is not at: %v", err)
	}
	if err := b.l.AdvanceSeries(ctx, "ser-1", at(1), 4, t0.Add(48*time.Hour)); err != nil {
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
	// A restart: from the Next read, to a new first occurrence.
	newLocal := ledger.Local{TimeZone: "Europe/Berlin", DueLocal: "2026-12-07T12:00"}
	before, err := b.l.ReadReminder(ctx, "ser-1")
	if err != nil || before.Series == nil {
		t.Fatalf("read: %+v, %v", before, err)
	}
	start := ledger.Start{DueAt: before.Series.Item.DueAt, DueLocal: before.Series.Item.Local.DueLocal, Next: 4}
	moved := start
	moved.Next = 3
	if err := b.l.RestartSeries(ctx, "ser-1", moved, t0.Add(25*time.Hour), t0.Add(49*time.Hour), newLocal, t0); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("restart from a Next it is not at: %v", err)
	}
	moved = start
	moved.DueAt = start.DueAt.Add(time.Hour)
	if err := b.l.RestartSeries(ctx, "ser-1", moved, t0.Add(25*time.Hour), t0.Add(49*time.Hour), newLocal, t0); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("restart from a start it is not at: %v", err)
	}
	if err := b.l.RestartSeries(ctx, "ser-1", start, t0.Add(25*time.Hour), t0.Add(49*time.Hour), newLocal, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	restarted, err := b.l.ReadReminder(ctx, "ser-1")
	if err != nil || restarted.Series == nil || restarted.Series.Next != 1 || !restarted.Series.Item.DueAt.Equal(t0.Add(25*time.Hour)) ||
		!restarted.Series.Item.ExpiresAt.Equal(t0.Add(49*time.Hour)) || restarted.Series.Item.Local != newLocal ||
		restarted.Series.Addresses["email#ses"] != "ana@example.com" || restarted.Series.Item.Recur != "FREQ=WEEKLY" {
		t.Fatalf("restarted: %+v, %v", restarted.Series, err)
	}
	// The start it left is kept, and the restart unsettled until its
	// cancels are done: no other restart meanwhile.
	if st := restarted.Series.Starts; len(st) != 1 || !st[0].DueAt.Equal(start.DueAt) || st[0].DueLocal != start.DueLocal || st[0].Next != 4 ||
		st[0].Restarts != 0 || !st[0].LeftAt.Equal(t0.Add(time.Minute)) || !restarted.Series.Unsettled || restarted.Series.CurrentStart().Restarts != 1 {
		t.Fatalf("the start before the restart: %+v, unsettled %v", st, restarted.Series.Unsettled)
	}
	again := ledger.Start{DueAt: t0.Add(25 * time.Hour), DueLocal: newLocal.DueLocal, Next: 1, Restarts: 1}
	if err := b.l.RestartSeries(ctx, "ser-1", again, t0.Add(26*time.Hour), t0.Add(50*time.Hour), newLocal, t0); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("a restart of an unsettled restart: %v", err)
	}
	if err := b.l.SettleRestart(ctx, "ser-1", 0); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("a settle of a restart not read: %v", err)
	}
	if err := b.l.SettleRestart(ctx, "ser-1", 1); err != nil {
		t.Fatal(err)
	}
	if st, err := b.l.ReadReminder(ctx, "ser-1"); err != nil || st.Series.Unsettled || len(st.Series.Starts) != 1 {
		t.Fatalf("settled: %+v, %v", st.Series, err)
	}
	if ids := due(t0.Add(time.Minute)); len(ids) != 1 {
		t.Fatalf("due at its restart's extension: %v", ids)
	}
	// An extension that read the series before its restart does not
	// advance it, though its Next is the one it read.
	if err := b.l.AdvanceSeries(ctx, "ser-1", at(1), 4, t0.Add(48*time.Hour)); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("advance from the start before the restart: %v", err)
	}
	restartedAt := func(next int) ledger.Start {
		return ledger.Start{DueAt: t0.Add(25 * time.Hour), DueLocal: newLocal.DueLocal, Next: next, Restarts: 1}
	}
	// Nor one that read it at the same Next and DueAt but fewer restarts
	// (a restart back to the same time).
	unrestarted := restartedAt(1)
	unrestarted.Restarts = 0
	if err := b.l.AdvanceSeries(ctx, "ser-1", unrestarted, 4, t0.Add(48*time.Hour)); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("advance from the same start with a restart in between: %v", err)
	}
	if err := b.l.AdvanceSeries(ctx, "ser-1", restartedAt(1), 4, t0.Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	cancelled, err := b.l.CancelSeries(ctx, "ser-1")
	if err != nil || cancelled.CancelledAt.IsZero() || cancelled.Next != 4 {
		t.Fatalf("cancel: %+v, %v", cancelled, err)
	}
	if ids := due(t0.Add(1000 * time.Hour)); len(ids) != 0 {
		t.Fatalf("due once cancelled: %v", ids)
	}
	if err := b.l.AdvanceSeries(ctx, "ser-1", restartedAt(4), 5, t0.Add(time.Hour)); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("advance a cancelled series: %v", err)
	}
	if _, err := b.l.CancelSeries(ctx, "ser-none"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("cancel an unknown series: %v", err)
	}
}

// testAnIDIsAReminderOrASeriesNeverBoth: a series is refused under a
// reminder's id (ErrReminderID) and a reminder under a series' id
// (ErrSeriesID), whichever came first; the same kind again is the stored
// one, as ever; the series' claim of its id is never read as a reminder.
func testAnIDIsAReminderOrASeriesNeverBoth(t *testing.T, b bundle) {
	ctx := context.Background()
	item := func(id string) ledger.ReminderItem {
		return ledger.ReminderItem{ID: id, AccountRef: "acct-x", DueAt: t0.Add(time.Hour), ExpiresAt: t0.Add(25 * time.Hour),
			Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "c-1", TemplateRef: "t"}}}
	}
	series := func(id string) ledger.Series {
		it := item(id)
		it.Recur = "FREQ=DAILY"
		return ledger.Series{Item: it, Next: 1, ExtendAt: t0}
	}
	// A reminder first.
	if _, exists, err := b.l.CreateReminder(ctx, item("id-rem")); err != nil || exists {
		t.Fatalf("the reminder: %v, %v", exists, err)
	}
	if _, exists, err := b.l.CreateSeries(ctx, series("id-rem")); !errors.Is(err, ledger.ErrReminderID) || exists {
		t.Fatalf("a series under a reminder's id: %v, %v; want ErrReminderID", exists, err)
	}
	if st, err := b.l.ReadReminder(ctx, "id-rem"); err != nil || st.Series != nil || st.Reminder == nil {
		t.Fatalf("the reminder's id holds %+v, %v", st, err)
	}
	// A series first.
	if _, exists, err := b.l.CreateSeries(ctx, series("id-ser")); err != nil || exists {
		t.Fatalf("the series: %v, %v", exists, err)
	}
	if _, exists, err := b.l.CreateReminder(ctx, item("id-ser")); !errors.Is(err, ledger.ErrSeriesID) || exists {
		t.Fatalf("a reminder under a series' id: %v, %v; want ErrSeriesID", exists, err)
	}
	if got, exists, err := b.l.CreateSeries(ctx, series("id-ser")); err != nil || !exists || got.Item.Recur != "FREQ=DAILY" {
		t.Fatalf("the series again: %+v, %v, %v", got, exists, err)
	}
	st, err := b.l.ReadReminder(ctx, "id-ser")
	if err != nil || st.Series == nil || st.Reminder != nil || st.ReminderErr != nil {
		t.Fatalf("the series' id holds %+v, %v", st, err)
	}
	if page, err := b.l.ListAccount(ctx, "acct-x", 10, ""); err != nil || len(page.Reminders) != 2 {
		t.Fatalf("the account lists %+v, %v; want the reminder and the series", page, err)
	}
	if _, err := b.l.CancelSeries(ctx, "id-ser"); err != nil {
		t.Fatal(err)
	}
	if err := b.l.RestartSeries(ctx, "id-ser", ledger.Start{DueAt: t0.Add(time.Hour), Next: 1}, t0.Add(2*time.Hour), t0.Add(3*time.Hour), ledger.Local{}, t0); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("restart of a cancelled series: %v", err)
	}
	if _, _, err := b.l.CreateReminder(ctx, item("id-ser")); !errors.Is(err, ledger.ErrSeriesID) {
		t.Fatalf("a reminder under a cancelled series' id: %v; want ErrSeriesID", err)
	}
}

// testAReminderAndASeriesCreatedAtOnceOneWins: a reminder and a series
// created at the same time under one id: exactly one is created, the other
// refused with the kind that won (ErrSeriesID or ErrReminderID), and the
// id holds the winner alone.
func testAReminderAndASeriesCreatedAtOnceOneWins(t *testing.T, b bundle) {
	ctx := context.Background()
	for i := range 12 {
		id := fmt.Sprintf("race-%d", i)
		it := ledger.ReminderItem{ID: id, AccountRef: "acct-r", DueAt: t0.Add(time.Hour), ExpiresAt: t0.Add(25 * time.Hour),
			Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "c-1", TemplateRef: "t"}}}
		sit := it
		sit.Recur = "FREQ=DAILY"
		var remErr, serErr error
		var remExists, serExists bool
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _, remExists, remErr = b.l.CreateReminder(ctx, it) }()
		go func() {
			defer wg.Done()
			_, serExists, serErr = b.l.CreateSeries(ctx, ledger.Series{Item: sit, Next: 1, ExtendAt: t0})
		}()
		wg.Wait()
		if remExists || serExists {
			t.Fatalf("%s: a first create says exists: reminder %v, series %v", id, remExists, serExists)
		}
		st, err := b.l.ReadReminder(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case remErr == nil && errors.Is(serErr, ledger.ErrReminderID):
			if st.Reminder == nil || st.Series != nil {
				t.Fatalf("%s: the reminder won; the id holds %+v", id, st)
			}
		case serErr == nil && errors.Is(remErr, ledger.ErrSeriesID):
			if st.Series == nil || st.Reminder != nil {
				t.Fatalf("%s: the series won; the id holds %+v", id, st)
			}
		default:
			t.Fatalf("%s: reminder %v, series %v; want one created and the other refused with the winner's kind (id holds reminder %v, series %v)",
				id, remErr, serErr, st.Reminder != nil, st.Series != nil)
		}
	}
}

// testASeriesRestartsAtMostMaxRestartsTimes: each restart keeps the start
// it leaves, in order, and the one past MaxRestarts is refused
// (ErrTooManyRestarts), the series as it was.
func testASeriesRestartsAtMostMaxRestartsTimes(t *testing.T, b bundle) {
	ctx := context.Background()
	it := ledger.ReminderItem{ID: "ser-many", AccountRef: "acct-m", DueAt: t0.Add(time.Hour), ExpiresAt: t0.Add(2 * time.Hour), Recur: "FREQ=DAILY",
		Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "c-1", TemplateRef: "t"}}}
	if _, _, err := b.l.CreateSeries(ctx, ledger.Series{Item: it, Next: 1, ExtendAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := b.l.SettleRestart(ctx, "ser-many", 0); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("a settle of a series never restarted: %v", err)
	}
	// Occurrences created ahead are noted, each once, kept through the
	// restarts below.
	for _, oid := range []string{"ser-many.20300101T0900", "ser-many.20290101T0900", "ser-many.20300101T0900"} {
		if err := b.l.NoteEarly(ctx, "ser-many", oid); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.l.NoteEarly(ctx, "ser-none", "ser-none.20300101T0900"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("a note on no series: %v", err)
	}
	from := ledger.Start{DueAt: it.DueAt, Next: 1}
	for i := range ledger.MaxRestarts + 1 {
		due := t0.Add(time.Duration(i+2) * time.Hour)
		err := b.l.RestartSeries(ctx, "ser-many", from, due, due.Add(time.Hour), ledger.Local{}, t0)
		if i == ledger.MaxRestarts {
			if !errors.Is(err, ledger.ErrTooManyRestarts) {
				t.Fatalf("restart %d: %v; want ErrTooManyRestarts", i+1, err)
			}
			break
		}
		if err != nil {
			t.Fatalf("restart %d: %v", i+1, err)
		}
		if err := b.l.SettleRestart(ctx, "ser-many", i+1); err != nil {
			t.Fatalf("settle %d: %v", i+1, err)
		}
		from = ledger.Start{DueAt: due, Next: 1, Restarts: i + 1}
	}
	st, err := b.l.ReadReminder(ctx, "ser-many")
	if err != nil || len(st.Series.Starts) != ledger.MaxRestarts || !st.Series.Item.DueAt.Equal(from.DueAt) ||
		!st.Series.Starts[0].DueAt.Equal(it.DueAt) || !st.Series.Starts[ledger.MaxRestarts-1].DueAt.Equal(from.DueAt.Add(-time.Hour)) {
		t.Fatalf("after %d restarts: %+v, %v", ledger.MaxRestarts, st.Series, err)
	}
	if e := st.Series.Early; len(e) != 2 || e[0] != "ser-many.20290101T0900" || e[1] != "ser-many.20300101T0900" {
		t.Fatalf("the occurrences created ahead: %v", e)
	}
}

// testAnOccurrenceIsCreatedOnlyWhileItsSeriesIsThere: an occurrence is
// created from the series' start as read; from a start it has left (a
// restart, even back to the same time), or once the series is cancelled,
// it is refused with ErrSeriesMoved and nothing is written; one created
// already is the stored one, as for any reminder.
func testAnOccurrenceIsCreatedOnlyWhileItsSeriesIsThere(t *testing.T, b bundle) {
	ctx := context.Background()
	it := ledger.ReminderItem{ID: "ser-occ", AccountRef: "acct-o", DueAt: t0.Add(time.Hour), ExpiresAt: t0.Add(2 * time.Hour), Recur: "FREQ=DAILY",
		Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "c-1", TemplateRef: "t"}}}
	if _, _, err := b.l.CreateSeries(ctx, ledger.Series{Item: it, Next: 1, ExtendAt: t0}); err != nil {
		t.Fatal(err)
	}
	occ := func(id string) ledger.ReminderItem {
		o := it
		o.ID, o.Recur, o.Series = id, "", "ser-occ"
		return o
	}
	at := ledger.Start{DueAt: it.DueAt, Next: 1}
	if _, exists, err := b.l.CreateOccurrence(ctx, occ("ser-occ.1"), at); err != nil || exists {
		t.Fatalf("from the start as read: %v, %v", exists, err)
	}
	if got, exists, err := b.l.CreateOccurrence(ctx, occ("ser-occ.1"), at); err != nil || !exists || got.Series != "ser-occ" {
		t.Fatalf("again: %+v, %v, %v", got, exists, err)
	}
	// A restart back to the same time: the count of restarts tells.
	if err := b.l.RestartSeries(ctx, "ser-occ", at, it.DueAt, it.ExpiresAt, ledger.Local{}, t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.l.CreateOccurrence(ctx, occ("ser-occ.2"), at); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("from a start left: %v; want ErrSeriesMoved", err)
	}
	if st, err := b.l.ReadReminder(ctx, "ser-occ.2"); err != nil || !st.Empty() {
		t.Fatalf("the refused occurrence holds %+v, %v; want nothing", st, err)
	}
	now := at
	now.Restarts = 1
	if _, _, err := b.l.CreateOccurrence(ctx, occ("ser-occ.2"), now); err != nil {
		t.Fatalf("from the start now: %v", err)
	}
	if _, err := b.l.CancelSeries(ctx, "ser-occ"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.l.CreateOccurrence(ctx, occ("ser-occ.3"), now); !errors.Is(err, ledger.ErrSeriesMoved) {
		t.Fatalf("once cancelled: %v; want ErrSeriesMoved", err)
	}
	if _, _, err := b.l.CreateOccurrence(ctx, occ("ser-none.1"), now); err == nil {
		t.Fatal("an occurrence of a series not there was created")
	}
}
