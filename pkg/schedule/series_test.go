package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// seriesJSON is a weekly series of SMS reminders at 09:30 on Sundays in
// Berlin, from 2026-12-06, with the extra fields.
func seriesJSON(id, recur, dueLocal, extra string) []byte {
	return []byte(`{"id":"` + id + `","accountRef":"acct-1","dueLocal":"` + dueLocal + `","timeZone":"Europe/Berlin","recur":"` + recur + `"` + extra +
		`,"deliveries":[{"channel":"sms","provider":"webhook","recipientRef":"acct-1/contact-2","templateRef":"weekly"}]}`)
}

// createSeries creates series id (rule, from dueLocal in Berlin) through
// the store.
func (b bundle) createSeries(t *testing.T, id, rule, dueLocal string) {
	t.Helper()
	if _, err := b.store.Create(b.ctx, b.parse(t, string(seriesJSON(id, rule, dueLocal, "")))); err != nil {
		t.Fatal(err)
	}
}

func occurrenceKey(id string) message.DeliveryKey {
	return message.DeliveryKey{ReminderID: id, Channel: "sms", Provider: "webhook"}
}

// TestASeriesCreatesItsOccurrencesAheadEachOnce: a weekly series creates
// the occurrences due within 35 days when it is created, each a reminder
// with a deterministic id at 09:30 Berlin time (CET, then CEST after the
// spring change), and more as time passes; extending again, or creating
// the series again, creates nothing twice.
func TestASeriesCreatesItsOccurrencesAheadEachOnce(t *testing.T) {
	t.Parallel()
	b := setup(t) // now: 2026-11-30T09:00Z
	r := b.parse(t, string(seriesJSON("weekly-1", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30", "")))
	if r.Recur != "FREQ=WEEKLY;BYDAY=SU" {
		t.Fatalf("recur = %q", r.Recur)
	}
	if out, err := b.store.Create(b.ctx, r); out != schedule.Created || err != nil {
		t.Fatalf("create: %s, %v", out, err)
	}
	want := []string{"weekly-1.20261206T0930", "weekly-1.20261213T0930", "weekly-1.20261220T0930", "weekly-1.20261227T0930",
		"weekly-1.20270103T0930"}
	for _, id := range want {
		d, err := b.ledger.Get(b.ctx, occurrenceKey(id))
		if err != nil || d.Status != ledger.StatusPending {
			t.Fatalf("occurrence %s: %+v, %v", id, d, err)
		}
	}
	if _, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-1.20270110T0930")); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the occurrence 41 days ahead: %v; want it not created yet", err)
	}
	v, err := b.store.Show(b.ctx, "weekly-1.20261213T0930")
	if err != nil || v.Reminder.Series != "weekly-1" || ledger.Format(v.Reminder.DueAt) != "2026-12-13T08:30:00.000Z" ||
		v.Reminder.DueLocal != "2026-12-13T09:30" || v.Reminder.TimeZone != "Europe/Berlin" {
		t.Fatalf("an occurrence: %+v, %v", v.Reminder, err)
	}
	// Again: nothing new.
	if out, err := b.store.Create(b.ctx, r); out != schedule.Unchanged || err != nil {
		t.Fatalf("the same series again: %s, %v", out, err)
	}
	ext, err := b.store.Extend(b.ctx, "weekly-1")
	if err != nil || len(ext.Created) != 0 || !ext.Next.Equal(time.Date(2026, 12, 6, 8, 30, 0, 0, time.UTC)) {
		t.Fatalf("extend at once: %+v, %v; want nothing, next at the 10 January occurrence − 35 days", ext, err)
	}
	// Into spring: 09:30 CEST is 07:30Z.
	b.clk.Advance(120 * 24 * time.Hour)
	ext, err = b.store.Extend(b.ctx, "weekly-1")
	if err != nil {
		t.Fatal(err)
	}
	v, err = b.store.Show(b.ctx, "weekly-1.20270404T0930")
	if err != nil || ledger.Format(v.Reminder.DueAt) != "2027-04-04T07:30:00.000Z" {
		t.Fatalf("after the spring change: %+v, %v", v.Reminder, err)
	}
	if ext.Missed == 0 {
		t.Errorf("extended 120 days late: %+v; want the expired occurrences counted as missed", ext)
	}
}

// TestASeriesKeepsABoundedNumberAhead: a daily series keeps at most
// SeriesCount (10) occurrences created and not yet due.
func TestASeriesKeepsABoundedNumberAhead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.parse(t, string(seriesJSON("daily-1", "FREQ=DAILY", "2026-12-01T08:00", "")))
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	created := func() int {
		n := 0
		for d := range 40 {
			id := "daily-1." + time.Date(2026, 12, 1+d, 0, 0, 0, 0, time.UTC).Format("20060102") + "T0800"
			if _, err := b.ledger.Get(b.ctx, occurrenceKey(id)); err == nil {
				n++
			}
		}
		return n
	}
	if n := created(); n != 10 {
		t.Fatalf("%d created; want 10", n)
	}
	b.clk.Advance(24 * time.Hour) // the first is due: one more
	ext, err := b.store.Extend(b.ctx, "daily-1")
	if err != nil || len(ext.Created) != 1 || created() != 11 {
		t.Fatalf("a day on: %+v, %v, %d created", ext, err, created())
	}
}

// TestCancellingASeriesOrAnOccurrence: cancelling an occurrence not
// created yet creates it cancelled (its extension then leaves it so);
// cancelling the series cancels what it created and creates nothing more.
func TestCancellingASeriesOrAnOccurrence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.parse(t, string(seriesJSON("weekly-2", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30", "")))
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	res, err := b.store.Cancel(b.ctx, "weekly-2.20270117T0930", "away that week")
	if err != nil || len(res) != 1 || !res[0].Cancelled {
		t.Fatalf("cancel an occurrence not created yet: %+v, %v", res, err)
	}
	if _, err := b.store.Cancel(b.ctx, "weekly-2.20270118T0930", ""); !errors.Is(err, schedule.ErrNoReminder) {
		t.Fatalf("a date the series does not have: %v", err)
	}
	b.clk.Advance(20 * 24 * time.Hour)
	if _, err := b.store.Extend(b.ctx, "weekly-2"); err != nil {
		t.Fatal(err)
	}
	if d, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-2.20270117T0930")); err != nil || d.Status != ledger.StatusCancelled {
		t.Fatalf("the cancelled occurrence after its extension: %+v, %v", d, err)
	}
	res, err = b.store.Cancel(b.ctx, "weekly-2", "contract ended")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range res {
		keys = append(keys, c.Key.ReminderID)
	}
	if !slices.Contains(keys, "weekly-2.20261227T0930") || !slices.Contains(keys, "weekly-2.20270124T0930") {
		t.Fatalf("cancelled %v; want every live occurrence", keys)
	}
	b.clk.Advance(60 * 24 * time.Hour)
	if ext, err := b.store.Extend(b.ctx, "weekly-2"); err != nil || len(ext.Created) != 0 {
		t.Fatalf("extend a cancelled series: %+v, %v", ext, err)
	}
}

// TestASeriesThatCannotBeIsRefused: each names its field and a fix.
func TestASeriesThatCannotBeIsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		json        []byte
		field, says string
	}{
		{[]byte(strings.Replace(string(seriesJSON("s-1", "FREQ=WEEKLY", "2026-12-06T09:30", "")), `,"timeZone":"Europe/Berlin"`, ``, 1)), "timeZone",
			"dueLocal needs it"},
		{seriesJSON("s-1", "FREQ=HOURLY", "2026-12-06T09:30", ""), "recur", ""},
		{seriesJSON("s-1", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "2026-12-06T09:30", ""), "recur", ""},
		{seriesJSON("s-1", "FREQ=MONTHLY;BYDAY=-1FR", "2026-12-06T09:30", ""), "dueLocal", "its first is 2026-12-25T09:30"},
		{seriesJSON(strings.Repeat("s", 113), "FREQ=WEEKLY", "2026-12-06T09:30", ""), "id", "a series' id is at most 112"},
	} {
		_, err := validator().ParseJSON(c.json)
		var ve *schedule.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(err.Error(), c.says) || ve.Fix == "" {
			t.Errorf("%s: %v; want field %s saying %q, with a fix", c.json, err, c.field, c.says)
		}
	}
}

// TestReschedulingAnOccurrence: one not created yet is created and moved;
// its extension later leaves it where it was moved. A series itself is
// not rescheduled: the refusal says what to do.
func TestReschedulingAnOccurrence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.parse(t, string(seriesJSON("weekly-3", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30", "")))
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	res, err := b.store.Reschedule(b.ctx, "weekly-3.20270124T0930", schedule.Times{DueLocal: "2027-01-23T18:00"}, "")
	if err != nil || len(res.Deliveries) != 1 || !res.Deliveries[0].Moved {
		t.Fatalf("reschedule an occurrence not created yet: %+v, %v", res, err)
	}
	b.clk.Advance(30 * 24 * time.Hour)
	if _, err := b.store.Extend(b.ctx, "weekly-3"); err != nil {
		t.Fatal(err)
	}
	d, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-3.20270124T0930"))
	if err != nil || ledger.Format(d.DueAt) != "2027-01-23T17:00:00.000Z" || d.Status != ledger.StatusPending {
		t.Fatalf("the moved occurrence after its extension: %+v, %v", d, err)
	}
}

// TestReschedulingASeries: a series restarts from its new first
// occurrence: the occurrences created and not yet due at the old times are
// cancelled, the new ones created; one the new start gives too stands; the
// same reschedule again changes nothing; a start the rule does not give,
// another zone, or a time past is refused with the fix.
func TestReschedulingASeries(t *testing.T) {
	t.Parallel()
	b := setup(t) // now: 2026-11-30T09:00Z
	r := b.parse(t, string(seriesJSON("weekly-4", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30", "")))
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	res, err := b.store.Reschedule(b.ctx, "weekly-4", schedule.Times{DueLocal: "2026-12-13T11:00"}, "later on Sundays")
	if err != nil || res.Refused() || res.Local.DueLocal != "2026-12-13T11:00" || ledger.Format(res.DueAt) != "2026-12-13T10:00:00.000Z" {
		t.Fatalf("reschedule the series: %+v, %v", res, err)
	}
	cancelled, created := 0, 0
	for _, d := range res.Deliveries {
		switch {
		case d.Moved && d.Status == schedule.StatusCancelled:
			cancelled++
		case d.Moved && d.Status == schedule.StatusPending:
			created++
		}
	}
	if cancelled != 5 || created != 4 {
		t.Fatalf("%d cancelled, %d created: %+v; want the 5 at 09:30 cancelled, 4 at 11:00 created", cancelled, created, res.Deliveries)
	}
	if d, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-4.20261206T0930")); err != nil || d.Status != ledger.StatusCancelled {
		t.Fatalf("an occurrence at the old time: %+v, %v", d, err)
	}
	if d, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-4.20261220T1100")); err != nil || d.Status != ledger.StatusPending ||
		ledger.Format(d.DueAt) != "2026-12-20T10:00:00.000Z" {
		t.Fatalf("an occurrence at the new time: %+v, %v", d, err)
	}
	v, err := b.store.Show(b.ctx, "weekly-4")
	if err != nil || v.Reminder.DueLocal != "2026-12-13T11:00" || v.Series == nil || v.Series.Next == nil || v.Series.Next.ID != "weekly-4.20261213T1100" {
		t.Fatalf("the series after: %+v %+v, %v", v.Reminder, v.Series, err)
	}
	again, err := b.store.Reschedule(b.ctx, "weekly-4", schedule.Times{DueLocal: "2026-12-13T11:00"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range again.Deliveries {
		if !d.Unchanged {
			t.Fatalf("the same reschedule again: %+v", again.Deliveries)
		}
	}
	// A start the old one gives too: those occurrences stand.
	r = b.parse(t, string(seriesJSON("weekly-5", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30", "")))
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	res, err = b.store.Reschedule(b.ctx, "weekly-5", schedule.Times{DueLocal: "2026-12-13T09:30"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Deliveries {
		if first := d.Key.ReminderID == "weekly-5.20261206T0930"; first != (d.Status == schedule.StatusCancelled) || !first && !d.Unchanged {
			t.Fatalf("restarted a week on: %+v", res.Deliveries)
		}
	}
	var ve *schedule.ValidationError
	for _, c := range []struct {
		to    schedule.Times
		field string
	}{
		{schedule.Times{DueLocal: "2026-12-14T11:00"}, "dueLocal"}, // a Monday
		{schedule.Times{DueLocal: "2026-12-13T11:00", TimeZone: "Europe/Paris"}, "timeZone"},
		{schedule.Times{DueAt: "2026-11-30T08:30:00Z"}, "dueAt"}, // half an hour ago
	} {
		if _, err := b.store.Reschedule(b.ctx, "weekly-4", c.to, ""); !errors.As(err, &ve) || ve.Field != c.field || ve.Fix == "" {
			t.Errorf("reschedule to %+v: %v; want field %s refused with a fix", c.to, err, c.field)
		}
	}
}

// TestAnOccurrenceThatCouldNeverBeSentIsSkippedNotStalled: a daily series
// whose window opens on weekdays only, with a few hours to expire: the
// weekend's occurrences could never be sent, so they are counted missed
// and skipped, and the series goes on to Monday's.
func TestAnOccurrenceThatCouldNeverBeSentIsSkippedNotStalled(t *testing.T) {
	t.Parallel()
	b := setup(t) // Monday 2026-11-30
	js := strings.Replace(string(seriesJSON("wk-1", "FREQ=DAILY", "2026-12-01T09:00", `,"expiresLocal":"2026-12-01T13:00"`)),
		`"templateRef":"weekly"`, `"templateRef":"weekly","window":{"from":"08:00","to":"17:00","days":["mon","tue","wed","thu","fri"]}`, 1)
	r := b.parse(t, js)
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id     string
		exists bool
	}{{"wk-1.20261204T0900", true}, {"wk-1.20261205T0900", false}, {"wk-1.20261206T0900", false}, {"wk-1.20261207T0900", true}} {
		if _, err := b.ledger.Get(b.ctx, occurrenceKey(c.id)); (err == nil) != c.exists {
			t.Errorf("%s: %v; want it created %v", c.id, err, c.exists)
		}
	}
}

// TestAnIDIsAReminderOrASeries: a reminder under a series' id is refused as
// a conflict naming recur, saying what holds the id and that the fix is
// another id (the id taken, to a caller who cannot see the series), and a
// series under a reminder's id too; nothing of the refused one is written.
func TestAnIDIsAReminderOrASeries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	series := b.parse(t, string(seriesJSON("both-1", "FREQ=WEEKLY", "2026-12-06T09:30", "")))
	if _, err := b.store.Create(b.ctx, series); err != nil {
		t.Fatal(err)
	}
	plain := b.parse(t, strings.Replace(string(seriesJSON("both-1", "", "2026-12-06T09:30", "")), `,"recur":""`, ``, 1))
	var cf *schedule.ConflictError
	if _, err := b.store.Create(b.ctx, plain); !errors.As(err, &cf) || cf.Field != "recur" || !strings.Contains(cf.Stored, "a series") ||
		cf.Holder != schedule.KindSeries || !strings.Contains(err.Error(), `choose another id for the reminder ("both-1" stays a series`) {
		t.Fatalf("a reminder under a series' id: %v; want a conflict naming recur, the series and the fix", err)
	}
	if _, err := b.store.CreateAs(b.ctx, schedule.Caller{Principal: "role/other"}, plain); !errors.Is(err, schedule.ErrTaken) {
		t.Fatalf("another caller's reminder under a series' id: %v; want the id taken", err)
	}
	plain.ID = "both-2"
	if _, err := b.store.Create(b.ctx, plain); err != nil {
		t.Fatal(err)
	}
	series.ID = "both-2"
	if _, err := b.store.Create(b.ctx, series); !errors.As(err, &cf) || cf.Field != "recur" || !strings.Contains(cf.Stored, "a reminder") ||
		cf.Holder != schedule.KindReminder || !strings.Contains(err.Error(), `choose another id for the series ("both-2" stays a reminder`) {
		t.Fatalf("a series under a reminder's id: %v; want a conflict naming recur, the reminder and the fix", err)
	}
	if st, err := b.ledger.ReadReminder(b.ctx, "both-2"); err != nil || st.Series != nil || st.Reminder == nil {
		t.Fatalf("both-2 holds %+v, %v", st, err)
	}
}

// TestAnOccurrenceWhoseIDIsASeriesIsSkipped: a series created (on
// purpose) under the id one of another series' occurrences will have
// keeps it; when the other series is extended that far, the occurrence is
// counted missed and skipped, and the next is created: in memory and on
// DynamoDB Local, where the series holds its id with its claim.
func TestAnOccurrenceWhoseIDIsASeriesIsSkipped(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		setup func(t *testing.T) bundle
	}{
		{"memory", setup},
		{"dynamodb-local", func(t *testing.T) bundle { return setupLocal(t, standintest.DynamoDB(t)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := c.setup(t) // now: 2026-11-30T09:00Z; the weekly series' occurrences up to 3 January are created at once
			if _, err := b.store.Create(b.ctx, b.parse(t, string(seriesJSON("weekly-x", "FREQ=WEEKLY", "2026-12-06T09:30", "")))); err != nil {
				t.Fatal(err)
			}
			squatted := "weekly-x.20270110T0930"
			if _, err := b.store.Create(b.ctx, b.parse(t, string(seriesJSON(squatted, "FREQ=DAILY", "2026-12-06T09:30", "")))); err != nil {
				t.Fatal(err)
			}
			b.clk.Advance(14 * 24 * time.Hour)
			ext, err := b.store.Extend(b.ctx, "weekly-x")
			if err != nil || !slices.Equal(ext.Created, []string{"weekly-x.20270117T0930"}) || ext.Missed != 1 {
				t.Fatalf("extend over the squatted occurrence: %+v, %v; want it missed, and the next created", ext, err)
			}
			st, err := b.ledger.ReadReminder(b.ctx, squatted)
			if err != nil || st.Reminder != nil || st.Series == nil || st.Series.Item.Recur != "FREQ=DAILY" {
				t.Fatalf("the squatted id holds %+v, %v; want the daily series alone", st, err)
			}
		})
	}
}

// racingLedger runs hook once, before the first AdvanceSeries of series
// id: what another caller did while an extension created; or, with fail
// set, fails that AdvanceSeries once (the extension stopped before its
// record).
type racingLedger struct {
	*ledger.Memory
	id    string
	hook  func()
	fail  error
	reads int // ReadReminder calls
	// createHook runs once, before the first CreateOccurrence of series id.
	createHook func()
}

func (r *racingLedger) CreateOccurrence(ctx context.Context, it ledger.ReminderItem, at ledger.Start) (ledger.ReminderItem, bool, error) {
	if hook := r.createHook; hook != nil && it.Series == r.id {
		r.createHook = nil
		hook()
	}
	return r.Memory.CreateOccurrence(ctx, it, at)
}

func (r *racingLedger) ReadReminder(ctx context.Context, id string) (ledger.Stored, error) {
	r.reads++
	return r.Memory.ReadReminder(ctx, id)
}

func (r *racingLedger) AdvanceSeries(ctx context.Context, id string, from ledger.Start, next int, extendAt time.Time) error {
	if hook := r.hook; hook != nil && id == r.id {
		r.hook = nil
		hook()
	}
	if err := r.fail; err != nil && id == r.id {
		r.fail = nil
		return err
	}
	return r.Memory.AdvanceSeries(ctx, id, from, next, extendAt)
}

func newRacing(t *testing.T, id string) (bundle, *racingLedger) {
	t.Helper()
	clk := clock.NewFake(now)
	l, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	r := &racingLedger{Memory: l, id: id}
	return newBundle(t, clk, r, ""), r
}

// TestARescheduleThatStopsAfterItsRestartIsFinishedByTheExtension: the
// series item moved (ledger.RestartSeries) and then the reschedule stopped,
// before it cancelled the occurrences of the old start: the series' next
// extension cancels them first, so none goes at the old time; the purge's
// list holds the occurrences of both starts.
func TestARescheduleThatStopsAfterItsRestartIsFinishedByTheExtension(t *testing.T) {
	t.Parallel()
	b, l := newRacing(t, "")
	b.createSeries(t, "weekly-6", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30")
	st, err := l.ReadReminder(b.ctx, "weekly-6")
	if err != nil || st.Series == nil {
		t.Fatalf("%+v, %v", st, err)
	}
	sr := st.Series
	from := ledger.Start{DueAt: sr.Item.DueAt, DueLocal: sr.Item.Local.DueLocal, Next: sr.Next}
	due := time.Date(2026, 12, 13, 10, 0, 0, 0, time.UTC) // 11:00 in Berlin
	local := sr.Item.Local
	local.DueLocal = "2026-12-13T11:00"
	if err := l.RestartSeries(b.ctx, "weekly-6", from, due, due.Add(sr.Item.ExpiresAt.Sub(sr.Item.DueAt)), local, now); err != nil {
		t.Fatal(err)
	}
	if d, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-6.20261206T0930")); err != nil || d.Status != ledger.StatusPending {
		t.Fatalf("before the extension: %+v, %v", d, err)
	}
	if _, err := b.store.Extend(b.ctx, "weekly-6"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   string
		want ledger.Status
	}{{"weekly-6.20261206T0930", ledger.StatusCancelled}, {"weekly-6.20261227T0930", ledger.StatusCancelled},
		{"weekly-6.20261213T1100", ledger.StatusPending}, {"weekly-6.20261227T1100", ledger.StatusPending}} {
		if d, err := b.ledger.Get(b.ctx, occurrenceKey(c.id)); err != nil || d.Status != c.want {
			t.Errorf("%s: %+v, %v; want %s", c.id, d.Status, err, c.want)
		}
	}
	st, err = l.ReadReminder(b.ctx, "weekly-6")
	if err != nil || st.Series.Unsettled || len(st.Series.Starts) != 1 {
		t.Fatalf("after the extension: %+v, %v; want the restart settled", st.Series, err)
	}
	ids, err := schedule.CreatedOccurrences(*st.Series, schedule.DefaultSeriesAhead)
	if err != nil || !slices.Contains(ids, "weekly-6.20261206T0930") || !slices.Contains(ids, "weekly-6.20261213T1100") {
		t.Fatalf("the purge's list: %v, %v; want both starts' occurrences", ids, err)
	}
}

// TestAnExtensionRacingARescheduleLeavesNothingAtTheOldTime: an extension
// reads the series, creates its next occurrence at the old time, and a
// reschedule restarts the series before the extension records it (so the
// reschedule does not know that occurrence): the extension, finding the
// series restarted, cancels it.
func TestAnExtensionRacingARescheduleLeavesNothingAtTheOldTime(t *testing.T) {
	t.Parallel()
	b, l := newRacing(t, "weekly-7")
	b.createSeries(t, "weekly-7", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30")
	b.clk.Advance(7 * 24 * time.Hour) // 2026-12-07: the extension reaches 2027-01-10
	l.hook = func() {
		if _, err := b.store.Reschedule(b.ctx, "weekly-7", schedule.Times{DueLocal: "2026-12-13T11:00"}, ""); err != nil {
			t.Errorf("the reschedule: %v", err)
		}
	}
	ext, err := b.store.Extend(b.ctx, "weekly-7")
	if err != nil || !slices.Contains(ext.Created, "weekly-7.20270110T0930") {
		t.Fatalf("the extension: %+v, %v; want it to create the occurrence of 2027-01-10 at the old time", ext, err)
	}
	if d, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-7.20270110T0930")); err != nil || d.Status != ledger.StatusCancelled {
		t.Fatalf("the occurrence created at the old time: %+v, %v; want it cancelled", d.Status, err)
	}
	if d, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-7.20270110T1100")); err != nil || d.Status != ledger.StatusPending {
		t.Fatalf("the occurrence at the new time: %+v, %v", d.Status, err)
	}
}

// TestTheSameRescheduleAgainRestartsNothing: the same reschedule sent
// again (a retry) finds the series where it was asked to be, and restarts
// nothing: a restart would create again, from its first, every occurrence
// since purged (nudge reminder purge of one occurrence).
func TestTheSameRescheduleAgainRestartsNothing(t *testing.T) {
	t.Parallel()
	b, l := newRacing(t, "")
	b.createSeries(t, "weekly-8", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30")
	to := schedule.Times{DueLocal: "2026-12-13T11:00"}
	for range 2 {
		if _, err := b.store.Reschedule(b.ctx, "weekly-8", to, ""); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := l.ReadReminder(b.ctx, "weekly-8"); err != nil || len(st.Series.Starts) != 1 || st.Series.Next == 1 {
		t.Fatalf("the series: %+v, %v; want one restart, extended", st.Series, err)
	}
}

// TestOccurrencesARestartKeptAreTheSeries: a daily series from 10
// December has created ten (10–19 December); restarted from 1 December at
// the same time of day it keeps them (the new start gives the same ids),
// though its own extension reaches 10 December only. They are still the
// series': a second reschedule cancels them, and so does a cancel of the
// series; none is left to go at a time the series no longer has.
func TestOccurrencesARestartKeptAreTheSeries(t *testing.T) {
	t.Parallel()
	for _, then := range []string{"reschedule", "cancel"} {
		b := setup(t) // now: 2026-11-30T09:00Z
		id := "daily-" + then
		if _, err := b.store.Create(b.ctx, b.parse(t, string(seriesJSON(id, "FREQ=DAILY", "2026-12-10T09:30", "")))); err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.Reschedule(b.ctx, id, schedule.Times{DueLocal: "2026-12-01T09:30"}, ""); err != nil {
			t.Fatal(err)
		}
		if d, err := b.ledger.Get(b.ctx, occurrenceKey(id+".20261215T0930")); err != nil || d.Status != ledger.StatusPending {
			t.Fatalf("%s: kept by the restart: %+v, %v", then, d.Status, err)
		}
		switch then {
		case "reschedule":
			if _, err := b.store.Reschedule(b.ctx, id, schedule.Times{DueLocal: "2026-12-02T10:00"}, ""); err != nil {
				t.Fatal(err)
			}
		case "cancel":
			if _, err := b.store.Cancel(b.ctx, id, ""); err != nil {
				t.Fatal(err)
			}
		}
		for _, day := range []string{"20261202", "20261210", "20261215", "20261219"} {
			if d, err := b.ledger.Get(b.ctx, occurrenceKey(id+"."+day+"T0930")); err != nil || d.Status != ledger.StatusCancelled {
				t.Errorf("%s: %s 09:30: %+v, %v; want it cancelled", then, day, d.Status, err)
			}
		}
	}
}

// TestAnExtensionThatStoppedBeforeItsRecordLeavesNothingAtTheOldTime: an
// extension creates the next occurrence and stops before it records it
// (AdvanceSeries fails); the series is rescheduled; the reschedule, not
// knowing it was created, cancels it all the same: a start's occurrences
// within an extension's reach of when it was left are looked for.
func TestAnExtensionThatStoppedBeforeItsRecordLeavesNothingAtTheOldTime(t *testing.T) {
	t.Parallel()
	b, l := newRacing(t, "weekly-9")
	b.createSeries(t, "weekly-9", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30")
	b.clk.Advance(7 * 24 * time.Hour)
	l.fail = errors.New("the function timed out")
	if ext, err := b.store.Extend(b.ctx, "weekly-9"); err == nil || !slices.Contains(ext.Created, "weekly-9.20270110T0930") {
		t.Fatalf("the extension: %+v, %v; want 2027-01-10 created and its record failed", ext, err)
	}
	if _, err := b.store.Reschedule(b.ctx, "weekly-9", schedule.Times{DueLocal: "2026-12-13T11:00"}, ""); err != nil {
		t.Fatal(err)
	}
	if d, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-9.20270110T0930")); err != nil || d.Status != ledger.StatusCancelled {
		t.Fatalf("the occurrence the stopped extension created: %+v, %v; want it cancelled", d.Status, err)
	}
	st, err := l.ReadReminder(b.ctx, "weekly-9")
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := schedule.CreatedOccurrences(*st.Series, schedule.DefaultSeriesAhead); err != nil || !slices.Contains(ids, "weekly-9.20270110T0930") {
		t.Fatalf("the purge's list: %v, %v; want the stopped extension's occurrence in it", ids, err)
	}
}

// TestMovingASeriesBackToATimeItLeftIsRefused: weekly at 09:30, moved to
// 11:00 (the 09:30 occurrences cancelled), then back to 09:30: those
// occurrences stand cancelled and would never be sent, so the reschedule is
// refused, naming one, with the fix; a start whose occurrences the earlier
// one never created is taken.
func TestMovingASeriesBackToATimeItLeftIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createSeries(t, "weekly-10", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30")
	if _, err := b.store.Reschedule(b.ctx, "weekly-10", schedule.Times{DueLocal: "2026-12-13T11:00"}, ""); err != nil {
		t.Fatal(err)
	}
	var ve *schedule.ValidationError
	_, err := b.store.Reschedule(b.ctx, "weekly-10", schedule.Times{DueLocal: "2026-12-13T09:30"}, "")
	if !errors.As(err, &ve) || ve.Field != "dueLocal" || !strings.Contains(ve.Problem, "weekly-10.20261213T0930") || ve.Fix == "" {
		t.Fatalf("back to 09:30: %v; want it refused naming the cancelled occurrence", err)
	}
	if _, err := b.store.Reschedule(b.ctx, "weekly-10", schedule.Times{DueLocal: "2026-12-13T09:45"}, ""); err != nil {
		t.Fatalf("to 09:45: %v", err)
	}
	// Daily at 09:30 (1–10 December created), to 11:00, then back to
	// 09:30 from the 20th: within the old start's reach, but none of those
	// was created, so none was cancelled.
	b.createSeries(t, "daily-10", "FREQ=DAILY", "2026-12-01T09:30")
	if _, err := b.store.Reschedule(b.ctx, "daily-10", schedule.Times{DueLocal: "2026-12-02T11:00"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Reschedule(b.ctx, "daily-10", schedule.Times{DueLocal: "2026-12-20T09:30"}, ""); err != nil {
		t.Fatalf("back to 09:30 past what was created: %v", err)
	}
}

// TestARescheduleSentAgainAfterItsTimeFinishesTheFirst: a reschedule
// moved the series and stopped before its cancels; sent again once its new
// start has passed, it finishes them and answers, rather than refusing the
// time as past.
func TestARescheduleSentAgainAfterItsTimeFinishesTheFirst(t *testing.T) {
	t.Parallel()
	b, l := newRacing(t, "")
	b.createSeries(t, "weekly-11", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30")
	st, err := l.ReadReminder(b.ctx, "weekly-11")
	if err != nil {
		t.Fatal(err)
	}
	sr := st.Series
	due := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC) // 11:00 in Berlin
	local := sr.Item.Local
	local.DueLocal = "2026-12-06T11:00"
	if err := l.RestartSeries(b.ctx, "weekly-11", sr.CurrentStart(), due, due.Add(sr.Item.ExpiresAt.Sub(sr.Item.DueAt)), local, now); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(due.Add(time.Minute).Sub(b.clk.Now()))
	if _, err := b.store.Reschedule(b.ctx, "weekly-11", schedule.Times{DueLocal: "2026-12-06T11:00"}, ""); err != nil {
		t.Fatalf("the same reschedule again, after its time: %v", err)
	}
	if d, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-11.20261213T0930")); err != nil || d.Status != ledger.StatusCancelled {
		t.Fatalf("an occurrence at the old time: %+v, %v; want it cancelled", d.Status, err)
	}
}

// TestASeriesRescheduledOftenReadsABoundedNumber: a daily series moved 30
// times, each to another time of day. Each reschedule's answer lists what
// it changed (not what earlier ones cancelled, as refused), and it reads
// about what one start may have created (its ten ahead, and as many again
// an extension may have created unrecorded, twice over), not every earlier
// start's: each restart cancelled those.
func TestASeriesRescheduledOftenReadsABoundedNumber(t *testing.T) {
	t.Parallel()
	b, l := newRacing(t, "")
	b.createSeries(t, "daily-many", "FREQ=DAILY", "2026-12-01T09:00")
	for i := 1; i <= 30; i++ {
		l.reads = 0
		res, err := b.store.Reschedule(b.ctx, "daily-many", schedule.Times{DueLocal: fmt.Sprintf("2026-12-02T09:%02d", i)}, "")
		if err != nil {
			t.Fatalf("reschedule %d: %v", i, err)
		}
		cancelled := 0
		for _, d := range res.Deliveries {
			if d.Refused != nil {
				t.Fatalf("reschedule %d: %+v refused", i, d)
			}
			if d.Status == schedule.StatusCancelled {
				cancelled++
			}
		}
		if cancelled != 10 {
			t.Fatalf("reschedule %d cancelled %d; want the ten the last start created", i, cancelled)
		}
		if l.reads > 80 {
			t.Fatalf("reschedule %d read %d reminders; want about what one start may have created", i, l.reads)
		}
	}
}

// TestACancelOfASeriesListsWhatItCancelled: an occurrence cancelled by
// hand, then the series: the series' answer lists the others cancelled,
// and not that one as refused (it changed nothing of it).
func TestACancelOfASeriesListsWhatItCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createSeries(t, "weekly-12", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30")
	if _, err := b.store.Cancel(b.ctx, "weekly-12.20261213T0930", ""); err != nil {
		t.Fatal(err)
	}
	res, err := b.store.Cancel(b.ctx, "weekly-12", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Refused != nil || !r.Cancelled {
			t.Errorf("%+v: want only what this cancel cancelled", r)
		}
	}
	if len(res) != 4 {
		t.Errorf("%d results: %+v; want the four others", len(res), res)
	}
}

// TestAnOccurrenceCreatedFarAheadIsTheSeries: an occurrence six months
// out, rescheduled by its id (so created then, far ahead of the series'
// extension), is cancelled with the series, and in the purge's list.
func TestAnOccurrenceCreatedFarAheadIsTheSeries(t *testing.T) {
	t.Parallel()
	b, l := newRacing(t, "")
	b.createSeries(t, "daily-far", "FREQ=DAILY", "2026-12-01T09:30")
	if _, err := b.store.Reschedule(b.ctx, "daily-far.20270601T0930", schedule.Times{DueLocal: "2027-06-01T12:00"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Cancel(b.ctx, "daily-far", ""); err != nil {
		t.Fatal(err)
	}
	if d, err := b.ledger.Get(b.ctx, occurrenceKey("daily-far.20270601T0930")); err != nil || d.Status != ledger.StatusCancelled {
		t.Fatalf("the occurrence created far ahead, after the series' cancel: %+v, %v; want it cancelled", d.Status, err)
	}
	st, err := l.ReadReminder(b.ctx, "daily-far")
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := schedule.CreatedOccurrences(*st.Series, schedule.DefaultSeriesAhead); err != nil || !slices.Contains(ids, "daily-far.20270601T0930") {
		t.Fatalf("the purge's list: %v, %v", ids, err)
	}
}

// TestAnExtensionCreatesNothingOnceTheSeriesMoved: an extension reads the
// series; a reschedule moves it and settles before the extension creates
// anything (so it finds nothing to cancel); the extension's create is then
// refused (ledger.CreateOccurrence holds on the series' start), and nothing
// is created at the old time, even had the extension stopped right after.
func TestAnExtensionCreatesNothingOnceTheSeriesMoved(t *testing.T) {
	t.Parallel()
	b, l := newRacing(t, "weekly-13")
	b.createSeries(t, "weekly-13", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30")
	b.clk.Advance(7 * 24 * time.Hour)
	l.createHook = func() {
		if _, err := b.store.Reschedule(b.ctx, "weekly-13", schedule.Times{DueLocal: "2026-12-13T11:00"}, ""); err != nil {
			t.Errorf("the reschedule: %v", err)
		}
	}
	ext, err := b.store.Extend(b.ctx, "weekly-13")
	if err != nil || len(ext.Created) != 0 {
		t.Fatalf("the extension: %+v, %v; want nothing created", ext, err)
	}
	if _, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-13.20270110T0930")); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("an occurrence at the old time: %v; want none", err)
	}
	if d, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-13.20270110T1100")); err != nil || d.Status != ledger.StatusPending {
		t.Fatalf("the occurrence at the new time: %+v, %v", d.Status, err)
	}
}

// TestAnOccurrenceCreatedAheadWhileItsSeriesMovesIsReadAgain: a cancel of
// one occurrence not created yet meets a reschedule of the series: its
// create is refused (the series moved), the series is read again, and the
// occurrence, which the new start no longer gives, is not found, as for
// any id the series does not give (not a "changed, try again").
func TestAnOccurrenceCreatedAheadWhileItsSeriesMovesIsReadAgain(t *testing.T) {
	t.Parallel()
	b, l := newRacing(t, "weekly-14")
	b.createSeries(t, "weekly-14", "FREQ=WEEKLY;BYDAY=SU", "2026-12-06T09:30")
	l.createHook = func() {
		if _, err := b.store.Reschedule(b.ctx, "weekly-14", schedule.Times{DueLocal: "2026-12-13T11:00"}, ""); err != nil {
			t.Errorf("the reschedule: %v", err)
		}
	}
	if _, err := b.store.Cancel(b.ctx, "weekly-14.20270307T0930", ""); !errors.Is(err, schedule.ErrNoReminder) {
		t.Fatalf("the cancel of an occurrence the series no longer gives: %v; want ErrNoReminder", err)
	}
	if _, err := b.ledger.Get(b.ctx, occurrenceKey("weekly-14.20270307T0930")); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the occurrence at the old time: %v; want none", err)
	}
}
