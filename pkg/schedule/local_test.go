package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// localJSON is a reminder given in local times: fields is the JSON of its
// time fields.
func localJSON(fields string) []byte {
	return []byte(`{"id":"rem-tz","accountRef":"acct-1",` + fields +
		`,"deliveries":[{"channel":"sms","provider":"webhook","recipientRef":"acct-1/contact-2","templateRef":"appointment"}]}`)
}

// TestALocalDueTimeFollowsRFC5545AcrossDaylightSavingChanges: due times on
// the recipient's wall clock, in both directions of the change, in zones
// with whole-hour, 30-minute (Lord Howe's change; St John's offset) and
// 45-minute (Chatham) offsets. A skipped time is moved forward by the gap;
// a repeated time is the first, and dueAt beside it may pick the second.
func TestALocalDueTimeFollowsRFC5545AcrossDaylightSavingChanges(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		zone, local, dueAt, want string
	}{
		{"Europe/Berlin", "2027-03-28T02:30", "", "2027-03-28T01:30:00.000Z"},                     // skipped: 03:30 CEST
		{"Europe/Berlin", "2027-10-31T02:30", "", "2027-10-31T00:30:00.000Z"},                     // repeated: the CEST one
		{"Europe/Berlin", "2027-10-31T02:30", "2027-10-31T01:30:00Z", "2027-10-31T01:30:00.000Z"}, // the CET one, picked
		{"Europe/Berlin", "2027-07-01T09:00", "", "2027-07-01T07:00:00.000Z"},
		{"America/New_York", "2027-03-14T02:30", "", "2027-03-14T07:30:00.000Z"},
		{"America/New_York", "2027-11-07T01:30", "", "2027-11-07T05:30:00.000Z"},
		{"America/New_York", "2027-11-07T01:30", "2027-11-07T06:30:00Z", "2027-11-07T06:30:00.000Z"},
		{"Australia/Lord_Howe", "2027-10-03T02:15", "", "2027-10-02T15:45:00.000Z"}, // a 30-minute gap
		{"Australia/Lord_Howe", "2027-04-04T01:45", "", "2027-04-03T14:45:00.000Z"}, // a 30-minute repeat
		{"Pacific/Chatham", "2027-09-26T03:00", "", "2027-09-25T14:15:00.000Z"},
		{"Pacific/Chatham", "2027-04-04T03:00", "", "2027-04-03T13:15:00.000Z"},
		{"America/St_Johns", "2027-03-14T02:30", "", "2027-03-14T06:00:00.000Z"},
		{"Asia/Kathmandu", "2027-01-15T09:00", "", "2027-01-15T03:15:00.000Z"},
	} {
		t.Run(c.zone+" "+c.local+" "+c.dueAt, func(t *testing.T) {
			fields := fmt.Sprintf(`"dueLocal":%q,"timeZone":%q`, c.local, c.zone)
			if c.dueAt != "" {
				fields += fmt.Sprintf(`,"dueAt":%q`, c.dueAt)
			}
			r, err := validator().ParseJSON(localJSON(fields))
			if err != nil {
				t.Fatal(err)
			}
			if got := ledger.Format(r.DueAt); got != c.want || r.TimeZone != c.zone || r.DueLocal != c.local {
				t.Errorf("dueAt %s, local %+v; want %s", got, r.Local, c.want)
			}
			if !r.ExpiresAt.Equal(r.DueAt.Add(24 * time.Hour)) {
				t.Errorf("expiresAt %v; want the default, dueAt + 24h", r.ExpiresAt)
			}
		})
	}
}

// TestLocalTimesThatCannotBeUsedAreRefusedWithAFix: each names its field
// and the fix.
func TestLocalTimesThatCannotBeUsedAreRefusedWithAFix(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fields, field, says string
	}{
		{`"dueLocal":"2027-03-28T09:30"`, "timeZone", "dueLocal needs it"},
		{`"dueAt":"2027-03-28T09:30:00Z","expiresLocal":"2027-03-29T09:30"`, "timeZone", "expiresLocal needs it"},
		{`"dueLocal":"2027-03-28T09:30","timeZone":"Mars/Olympus"`, "timeZone", "not a time zone"},
		{`"dueLocal":"2027-03-28T09:30","timeZone":"europe/berlin"`, "timeZone", "Europe/Berlin?"},
		{`"dueLocal":"2027-03-28T09:30","timeZone":"EST"`, "timeZone", "not a region zone"},
		{`"dueLocal":"2027-03-28T09:30","timeZone":"Local"`, "timeZone", "whichever zone"},
		{`"dueLocal":"2027-03-28T09:30","timeZone":"Etc/GMT+5"`, "timeZone", "inverted sign"},
		{`"timeZone":"Europe/Berlin"`, "dueLocal", "is missing"},
		{`"dueLocal":"2027-03-28T09:30+01:00","timeZone":"Europe/Berlin"`, "dueLocal", "has an offset"},
		{`"dueLocal":"2027-03-28T09:30Z","timeZone":"Europe/Berlin"`, "dueLocal", "has an offset"},
		{`"dueLocal":"2027-02-29T09:30","timeZone":"Europe/Berlin"`, "dueLocal", "exists on a calendar"},
		{`"dueLocal":"tomorrow","timeZone":"Europe/Berlin"`, "dueLocal", "not a local date and time"},
		{`"dueLocal":"2027-03-28T09:30","dueAt":"2027-03-28T09:30:00Z","timeZone":"Europe/Berlin"`, "dueAt", "is not dueLocal"},
		{`"dueLocal":"2027-03-28T09:30","expiresLocal":"2027-03-28T09:00","timeZone":"Europe/Berlin"`, "expiresLocal", "is not after dueAt"},
		{`"dueLocal":"2026-11-01T09:30","timeZone":"Europe/Berlin"`, "expiresAt", "has passed"},
		{`"dueLocal":"2036-11-01T09:30","timeZone":"Europe/Berlin"`, "dueLocal", "more than 5 years ahead"},
	} {
		_, err := validator().ParseJSON(localJSON(c.fields))
		var ve *schedule.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(err.Error(), c.says) || ve.Fix == "" {
			t.Errorf("%s: %v; want field %s saying %q, with a fix", c.fields, err, c.field, c.says)
		}
	}
}

// TestAZonedReminderIsIdempotentAndReschedulesInItsZone: the same local
// reminder again is unchanged, another zone is a conflict; a reschedule by
// local time reads it in the reminder's zone and records the new local
// times, in memory and in DynamoDB Local.
func TestAZonedReminderIsIdempotentAndReschedulesInItsZone(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "dynamodb"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clk := clock.NewFake(now)
			var l schedule.Ledger
			if name == "memory" {
				m, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				l = m
			} else {
				db := standintest.DynamoDB(t)
				d, err := ledger.New(db, ledger.Config{Table: standintest.Table(t, db), Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				l = d
			}
			store, err := schedule.New(schedule.Config{Ledger: l, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			parse := func(fields string) schedule.Reminder {
				r, err := store.Validator().ParseJSON(localJSON(fields))
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			r := parse(`"dueLocal":"2027-03-28T02:30","expiresLocal":"2027-03-28T20:00:00","timeZone":"Europe/Berlin"`)
			for _, want := range []schedule.Outcome{schedule.Created, schedule.Unchanged} {
				if out, err := store.Create(ctx, r); out != want || err != nil {
					t.Fatalf("create: %s, %v; want %s", out, err, want)
				}
			}
			// The same instants in another zone are another reminder.
			other := parse(`"dueLocal":"2027-03-28T04:30","expiresLocal":"2027-03-28T21:00","timeZone":"Europe/Helsinki"`)
			var ce *schedule.ConflictError
			if _, err := store.Create(ctx, other); !errors.As(err, &ce) || ce.Field != "local times" {
				t.Fatalf("the same instants in another zone: %v; want a conflict naming the local times", err)
			}
			v, err := store.Show(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := schedule.Local{TimeZone: "Europe/Berlin", DueLocal: "2027-03-28T02:30", ExpiresLocal: "2027-03-28T20:00"}
			if v.Reminder.Local != want {
				t.Fatalf("read back %+v; want %+v", v.Reminder.Local, want)
			}
			// Fall back: the first 02:30 by default, in the stored zone.
			res, err := store.Reschedule(ctx, r.ID, schedule.Times{DueLocal: "2027-10-31T02:30"}, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := ledger.Format(res.DueAt); got != "2027-10-31T00:30:00.000Z" || res.Local.TimeZone != "Europe/Berlin" ||
				res.Local.DueLocal != "2027-10-31T02:30" || res.Local.ExpiresLocal != "" {
				t.Fatalf("rescheduled to %s, %+v", got, res.Local)
			}
			if v, err = store.Show(ctx, r.ID); err != nil || v.Reminder.Local != res.Local || !v.Reminder.DueAt.Equal(res.DueAt) {
				t.Fatalf("read back after the reschedule: %+v, %v", v.Reminder, err)
			}
			for _, d := range v.Deliveries {
				if !d.DueAt.Equal(res.DueAt) {
					t.Errorf("%s due %v; want %v", d.Key(), d.DueAt, res.DueAt)
				}
			}
			// By dueAt alone: the zone stays, the local due time goes.
			if res, err = store.Reschedule(ctx, r.ID, schedule.Times{DueAt: "2027-11-02T08:00:00Z"}, ""); err != nil ||
				res.Local != (schedule.Local{TimeZone: "Europe/Berlin"}) {
				t.Fatalf("by dueAt: %+v, %v", res.Local, err)
			}
			if v, err = store.Show(ctx, r.ID); err != nil || v.Reminder.Local != res.Local {
				t.Fatalf("read back after the reschedule by dueAt: %+v, %v", v.Reminder, err)
			}
			if got := schedule.LocalView(v.Reminder.DueAt, "Europe/Berlin", ""); got != "2027-11-02 09:00:00 CET Europe/Berlin" {
				t.Errorf("LocalView = %q", got)
			}
		})
	}
}

// TestLocalViewSaysWhatBecameOfASkippedOrRepeatedTime.
func TestLocalViewSaysWhatBecameOfASkippedOrRepeatedTime(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time { u, _ := time.Parse(time.RFC3339, s); return u }
	for _, c := range []struct {
		at, given, want string
	}{
		{"2027-03-28T01:30:00Z", "2027-03-28T02:30", "2027-03-28 03:30:00 CEST Europe/Berlin (given 2027-03-28T02:30, which clocks skip that day: moved forward by the gap)"},
		{"2027-10-31T00:30:00Z", "2027-10-31T02:30", "2027-10-31 02:30:00 CEST Europe/Berlin (given 2027-10-31T02:30, which clocks show twice that day: the first)"},
		{"2027-10-31T01:30:00Z", "2027-10-31T02:30", "2027-10-31 02:30:00 CET Europe/Berlin (given 2027-10-31T02:30, which clocks show twice that day: the second)"},
		{"2027-07-01T07:00:00Z", "2027-07-01T09:00", "2027-07-01 09:00:00 CEST Europe/Berlin"},
	} {
		if got := schedule.LocalView(at(c.at), "Europe/Berlin", c.given); got != c.want {
			t.Errorf("LocalView(%s, %s) =\n %q\nwant\n %q", c.at, c.given, got, c.want)
		}
	}
}

// TestAnImportTakesLocalTimes: CSV columns timeZone, dueLocal and
// expiresLocal instead of dueAt; the rows of one reminder must agree on
// them; a header with neither dueAt nor dueLocal is refused.
func TestAnImportTakesLocalTimes(t *testing.T) {
	t.Parallel()
	const file = "id,accountRef,dueLocal,expiresLocal,timeZone,channel,provider,recipientRef,templateRef\n" +
		"tz-1,acct-1,2027-11-07T01:30,,America/New_York,sms,webhook,c-1,t\n" +
		"tz-1,acct-1,2027-11-07T01:30,,America/New_York,email,webhook,c-1,t\n" +
		"tz-2,acct-1,2027-09-26T03:00,2027-09-26T21:00,Pacific/Chatham,sms,webhook,c-2,t\n" +
		"tz-3,acct-1,2027-09-26T03:00,,,sms,webhook,c-3,t\n" +
		"tz-4,acct-1,2027-03-14T09:00,,America/New_York,sms,webhook,c-4,t\n" +
		"tz-4,acct-1,2027-03-14T09:00,,America/Chicago,email,webhook,c-4,t\n"
	rows, err := schedule.ReadRows(strings.NewReader(file), schedule.CSV, validator())
	if err != nil || len(rows) != 4 {
		t.Fatalf("rows %+v, %v", rows, err)
	}
	if r := rows[0].Reminder; rows[0].Err != nil || ledger.Format(r.DueAt) != "2027-11-07T05:30:00.000Z" || len(r.Deliveries) != 2 {
		t.Errorf("tz-1: %+v, %v", r, rows[0].Err)
	}
	if r := rows[1].Reminder; rows[1].Err != nil || ledger.Format(r.ExpiresAt) != "2027-09-26T07:15:00.000Z" || r.ExpiresLocal != "2027-09-26T21:00" {
		t.Errorf("tz-2: %+v, %v", r, rows[1].Err)
	}
	var ve *schedule.ValidationError
	if !errors.As(rows[2].Err, &ve) || ve.Field != "timeZone" {
		t.Errorf("tz-3 without a zone: %v", rows[2].Err)
	}
	if rows[3].Err == nil || !strings.Contains(rows[3].Err.Error(), "timeZone") {
		t.Errorf("tz-4 whose rows disagree on the zone: %v", rows[3].Err)
	}
	if _, err := schedule.ReadRows(strings.NewReader("id,accountRef,timeZone,channel,provider,recipientRef,templateRef\n"), schedule.CSV,
		validator()); err == nil || !strings.Contains(err.Error(), `"dueLocal"`) {
		t.Errorf("a header with neither dueAt nor dueLocal: %v", err)
	}
}
