package schedule_test

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// windowJSON is a reminder due at dueLocal in New York with one SMS
// delivery whose window is window (JSON, or "" for none), and extra
// reminder fields.
func windowJSON(dueLocal, window, extra string) []byte {
	w := ""
	if window != "" {
		w = `,"window":` + window
	}
	return []byte(`{"id":"rem-win","accountRef":"acct-1","dueLocal":"` + dueLocal + `","timeZone":"America/New_York"` + extra +
		`,"deliveries":[{"channel":"sms","provider":"webhook","recipientRef":"acct-1/contact-2","templateRef":"appointment"` + w + `}]}`)
}

// TestADeliveryOutsideItsWindowIsDueWhenItOpens: due at 03:00 in New York
// with a 08:00–21:00 window, the delivery is due at 08:00 their time (the
// reminder keeps 03:00); on the day clocks spring forward and fall back;
// and on a Friday night with a weekday window, on Monday morning.
func TestADeliveryOutsideItsWindowIsDueWhenItOpens(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		due, window, want string
		extra             string
	}{
		{"2027-06-01T03:00", `{"from":"08:00","to":"21:00"}`, "2027-06-01T12:00:00.000Z", ""},
		{"2027-06-01T09:30", `{"from":"08:00","to":"21:00"}`, "2027-06-01T13:30:00.000Z", ""}, // inside: as due
		{"2027-03-14T01:00", `{"from":"08:00","to":"21:00"}`, "2027-03-14T12:00:00.000Z", ""}, // spring forward: EDT by 08:00
		{"2027-11-07T01:30", `{"from":"08:00","to":"21:00"}`, "2027-11-07T13:00:00.000Z", ""}, // fall back: EST by 08:00
		{"2027-03-14T01:00", `{"from":"02:30","to":"05:00"}`, "2027-03-14T07:00:00.000Z", ""}, // opens in the gap: at 03:00 EDT
		{"2027-06-04T22:00", `{"from":"08:00","to":"21:00","days":["mon","tue","wed","thu","fri"]}`, "2027-06-07T12:00:00.000Z",
			`,"expiresLocal":"2027-06-08T00:00"`},
		{"2027-06-01T23:00", `{"from":"22:00","to":"06:00"}`, "2027-06-02T03:00:00.000Z", ""},                            // overnight, open
		{"2027-06-01T08:00", `{"from":"09:00","to":"17:00","timeZone":"Europe/Berlin"}`, "2027-06-01T12:00:00.000Z", ""}, // the window's own zone
	} {
		b := setup(t)
		r, err := b.store.Validator().ParseJSON(windowJSON(c.due, c.window, c.extra))
		if err != nil {
			t.Fatalf("%s %s: %v", c.due, c.window, err)
		}
		if _, err := b.store.Create(b.ctx, r); err != nil {
			t.Fatal(err)
		}
		d, err := b.ledger.Get(b.ctx, r.Key(r.Deliveries[0]))
		if err != nil || ledger.Format(d.DueAt) != c.want || d.Window != r.Deliveries[0].Window.String() {
			t.Errorf("%s %s: the delivery is due %s (window %q), %v; want %s", c.due, c.window, ledger.Format(d.DueAt), d.Window, err, c.want)
		}
		v, err := b.store.Show(b.ctx, r.ID)
		if err != nil || !v.Reminder.DueAt.Equal(r.DueAt) || v.Reminder.Deliveries[0].Window != r.Deliveries[0].Window {
			t.Errorf("%s %s: read back %+v, %v", c.due, c.window, v.Reminder, err)
		}
		if out, err := b.store.Create(b.ctx, r); out != schedule.Unchanged || err != nil {
			t.Errorf("the same again: %s, %v", out, err)
		}
	}
}

// TestAWindowThatCannotBeMetIsRefused: a window with no zone on a
// reminder with none, a bad window, and one that first opens after the
// reminder expires are refused at intake, with a fix; a late policy that
// reaches the opening makes it good.
func TestAWindowThatCannotBeMetIsRefused(t *testing.T) {
	t.Parallel()
	noZone := []byte(`{"id":"rem-w","accountRef":"acct-1","dueAt":"2027-06-01T07:00:00Z","deliveries":[{"channel":"sms","provider":"webhook",` +
		`"recipientRef":"acct-1/contact-2","templateRef":"t","window":{"from":"08:00","to":"21:00"}}]}`)
	for _, c := range []struct {
		json       []byte
		field, say string
	}{
		{noZone, "deliveries[0].window.timeZone", "the reminder has no timeZone"},
		{windowJSON("2027-06-01T03:00", `{"from":"08:00","to":"08:00"}`, ""), "deliveries[0].window", ""},
		{windowJSON("2027-06-01T03:00", `{"from":"8am","to":"21:00"}`, ""), "deliveries[0].window", ""},
		{windowJSON("2027-06-01T03:00", `{"from":"08:00","to":"21:00","days":["someday"]}`, ""), "deliveries[0].window", ""},
		{windowJSON("2027-06-01T03:00", `{"from":"08:00","to":"21:00"}`, `,"expiresLocal":"2027-06-01T07:00"`), "deliveries[0].window",
			"could never be sent"},
	} {
		_, err := validator().ParseJSON(c.json)
		var ve *schedule.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(err.Error(), c.say) || ve.Fix == "" {
			t.Errorf("%s: %v; want field %s saying %q, with a fix", c.json, err, c.field, c.say)
		}
	}
	if _, err := validator().ParseJSON(windowJSON("2027-06-01T03:00", `{"from":"08:00","to":"21:00"}`,
		`,"expiresLocal":"2027-06-01T07:00","late":{"policy":"send-late","within":"2h"}`)); err != nil {
		t.Errorf("sent late within the window: %v", err)
	}
}

// TestTheStagesWindowIsTheDefaultForAChannel: a delivery that names no
// window takes its channel's default in the reminder's zone; a reminder
// without a zone, and another channel, have none.
func TestTheStagesWindowIsTheDefaultForAChannel(t *testing.T) {
	t.Parallel()
	def, err := schedule.ParseDefaultWindow("08:00-21:00 mon-sat")
	if err != nil {
		t.Fatal(err)
	}
	v := validator()
	v.Windows = map[string]schedule.DefaultWindow{"sms": def}
	r, err := v.ParseJSON(windowJSON("2027-06-01T03:00", "", ""))
	if err != nil || r.Deliveries[0].Window.String() != "08:00-21:00 America/New_York mon-sat" {
		t.Fatalf("the default: %+v, %v", r.Deliveries, err)
	}
	r, err = v.ParseJSON([]byte(strings.Replace(string(windowJSON("2027-06-01T03:00", "", "")), `"sms"`, `"push"`, 1)))
	if err != nil || !r.Deliveries[0].Window.IsZero() {
		t.Errorf("another channel: %+v, %v", r.Deliveries, err)
	}
	r, err = v.ParseJSON([]byte(`{"id":"rem-w","accountRef":"acct-1","dueAt":"2027-06-01T07:00:00Z","deliveries":[{"channel":"sms",` +
		`"provider":"webhook","recipientRef":"acct-1/contact-2","templateRef":"t"}]}`))
	if err != nil || !r.Deliveries[0].Window.IsZero() {
		t.Errorf("a reminder with no zone: %+v, %v", r.Deliveries, err)
	}
	for _, bad := range []string{"8-21", "08:00-21:00 Europe/Berlin", "21:00-21:00"} {
		if _, err := schedule.ParseDefaultWindow(bad); err == nil {
			t.Errorf("ParseDefaultWindow(%q) took it", bad)
		}
	}
}

// TestARescheduleMovesAWindowedDeliveryToTheOpening, in memory and in
// DynamoDB Local.
func TestARescheduleMovesAWindowedDeliveryToTheOpening(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "dynamodb"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clk := clock.NewFake(now)
			var l bundleLedger
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
			b := newBundle(t, clk, l, "")
			r := b.parse(t, string(windowJSON("2027-06-01T09:00", `{"from":"08:00","to":"21:00"}`, "")))
			if _, err := b.store.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
			// The delivery item keeps the recipient's zone, for its events.
			if d, err := b.ledger.Get(ctx, r.Key(r.Deliveries[0])); err != nil || d.TimeZone != "America/New_York" {
				t.Fatalf("created in zone %q, %v; want the reminder's", d.TimeZone, err)
			}
			res, err := b.store.Reschedule(ctx, r.ID, schedule.Times{DueLocal: "2027-06-02T22:30"}, "")
			if err != nil || len(res.Deliveries) != 1 || !res.Deliveries[0].Moved {
				t.Fatalf("reschedule: %+v, %v", res, err)
			}
			d, err := b.ledger.Get(ctx, r.Key(r.Deliveries[0]))
			if err != nil || ledger.Format(d.DueAt) != "2027-06-03T12:00:00.000Z" || d.TimeZone != "America/New_York" {
				t.Fatalf("moved to %v (zone %q), %v; want the window's next opening, 08:00 EDT on the 3rd", d.DueAt, d.TimeZone, err)
			}
			again, err := b.store.Reschedule(ctx, r.ID, schedule.Times{DueLocal: "2027-06-02T22:30"}, "")
			if err != nil || !again.Deliveries[0].Unchanged {
				t.Fatalf("the same reschedule again: %+v, %v", again, err)
			}
		})
	}
}

// TestARescheduleIntoAShutWindowIsRefused: moved to Saturday with a
// weekday window and two hours to expire, the delivery could never be
// sent: the reschedule is refused and nothing moves.
func TestARescheduleIntoAShutWindowIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.parse(t, string(windowJSON("2027-06-01T09:00", `{"from":"08:00","to":"17:00","days":["mon","tue","wed","thu","fri"]}`,
		`,"expiresLocal":"2027-06-01T11:00"`)))
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	var ve *schedule.ValidationError
	if _, err := b.store.Reschedule(b.ctx, r.ID, schedule.Times{DueLocal: "2027-06-05T10:00"}, ""); !errors.As(err, &ve) ||
		!strings.Contains(err.Error(), "could never be sent") {
		t.Fatalf("to a Saturday: %v", err)
	}
	if d, err := b.ledger.Get(b.ctx, r.Key(r.Deliveries[0])); err != nil || ledger.Format(d.DueAt) != "2027-06-01T13:00:00.000Z" {
		t.Fatalf("after the refusal: %+v, %v", d, err)
	}
	if _, err := b.store.Reschedule(b.ctx, r.ID, schedule.Times{DueLocal: "2027-06-07T10:00"}, ""); err != nil {
		t.Fatalf("to a Monday: %v", err)
	}
}

// TestAStagesWindowsReadByChannel: the stage's setting gives a window to
// each channel it names, reads back as written, and refuses what it cannot
// use, naming the part and the fix.
func TestAStagesWindowsReadByChannel(t *testing.T) {
	t.Parallel()
	got, err := schedule.ParseDefaultWindows(" sms=08:00-21:00 mon-sat ; email = 07:00-22:00;")
	if err != nil || len(got) != 2 || got["sms"].String() != "08:00-21:00 mon-sat" || got["email"].String() != "07:00-22:00" {
		t.Fatalf("%v, %v", got, err)
	}
	if s := schedule.FormatDefaultWindows(got); s != "email=07:00-22:00; sms=08:00-21:00 mon-sat" {
		t.Errorf("written as %q", s)
	}
	if again, err := schedule.ParseDefaultWindows(schedule.FormatDefaultWindows(got)); err != nil || len(again) != 2 || again["sms"] != got["sms"] {
		t.Errorf("read back as %v, %v", again, err)
	}
	if none, err := schedule.ParseDefaultWindows(" "); err != nil || none != nil {
		t.Errorf("empty: %v, %v", none, err)
	}
	for bad, want := range map[string]string{
		"sms":                             "is not channel=window",
		"fax=08:00-21:00":                 `"fax" is not a known channel`,
		"sms=08:00-21:00;sms=09:00-17:00": "given twice",
		"sms=8-21":                        "sms: send window",
		"=08:00-21:00":                    "is not channel=window",
		"sms=08:00-21:00, email=07:00":    "separate them by ;",
		"sms=08:00-21:00 Europe/Berlin":   `"Europe/Berlin" is a time zone; a stage's window is in each reminder's timeZone; leave the zone out`,
	} {
		if _, err := schedule.ParseDefaultWindows(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %q", bad, err, want)
		}
	}
}

// TestAnImportTakesWindows: the CSV column window gives each row's
// delivery its send window, in the reminder's zone or one of its own; an
// empty one none; one that cannot be read fails its row, naming the
// column and the fix. --window reads the same (ParseWindowSpec).
func TestAnImportTakesWindows(t *testing.T) {
	t.Parallel()
	const file = "id,accountRef,dueLocal,timeZone,channel,provider,recipientRef,templateRef,window\n" +
		"w-1,acct-1,2027-06-01T07:00,America/New_York,sms,webhook,c-1,t,08:00-21:00 mon-sat\n" +
		"w-1,acct-1,2027-06-01T07:00,America/New_York,email,webhook,c-1,t,\n" +
		"w-2,acct-1,2027-06-01T07:00,America/New_York,sms,webhook,c-2,t,09:00-17:00 Europe/Berlin mon-fri\n" +
		"w-3,acct-1,2027-06-01T07:00,America/New_York,sms,webhook,c-3,t,8am-9pm\n"
	rows, err := schedule.ReadRows(strings.NewReader(file), schedule.CSV, validator())
	if err != nil || len(rows) != 3 {
		t.Fatalf("rows %+v, %v", rows, err)
	}
	if r := rows[0].Reminder; rows[0].Err != nil || r.Deliveries[0].Window.String() != "08:00-21:00 America/New_York mon-sat" ||
		!r.Deliveries[1].Window.IsZero() || ledger.Format(r.Deliveries[0].Window.Next(r.DueAt)) != "2027-06-01T12:00:00.000Z" {
		t.Errorf("w-1: %+v, %v", r.Deliveries, rows[0].Err)
	}
	if r := rows[1].Reminder; rows[1].Err != nil || r.Deliveries[0].Window.String() != "09:00-17:00 Europe/Berlin mon-fri" {
		t.Errorf("w-2: %+v, %v", r.Deliveries, rows[1].Err)
	}
	var ve *schedule.ValidationError
	if !errors.As(rows[2].Err, &ve) || ve.Field != "window" || ve.Fix == "" {
		t.Errorf("w-3: %#v", rows[2].Err)
	}
	for spec, want := range map[string]string{"": "", " 22:00-06:00 ": "22:00-06:00 UTC", "10:00-12:00 sat,sun": "10:00-12:00 UTC sat,sun",
		"10:00-12:00 UTC": "10:00-12:00 UTC", "07:00-09:00 Asia/Kathmandu mon": "07:00-09:00 Asia/Kathmandu mon",
		"07:00-09:00 mon-wed Asia/Kathmandu": "07:00-09:00 Asia/Kathmandu mon-wed"} {
		in, err := schedule.ParseWindowSpec(spec)
		got := ""
		if in != nil {
			w, perr := localtime.ParseWindow(in.From, in.To, cmp.Or(in.TimeZone, "UTC"), in.Days)
			got, err = w.String(), errors.Join(err, perr)
		}
		if err != nil || got != want {
			t.Errorf("ParseWindowSpec(%q) = %q, %v; want %q", spec, got, err, want)
		}
	}
}

// TestAWindowSpecThatCannotBeReadSaysWhatToWrite: --window's and the
// import's errors quote what was given, name the part that is wrong and
// the form to write, and never a zone the caller did not give.
func TestAWindowSpecThatCannotBeReadSaysWhatToWrite(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"08:00":                                "\"08:00\" is not a window's hours; write the hours like 08:00-21:00",
		"8am-9pm":                              `"8am" is not a time of day`,
		"08:00-21:00 mon, fri":                 "has more than hours and days (no spaces within the days)",
		"08:00-21:00 mon-fri America/New_Yrok": `"America/New_Yrok" is not a time zone`,
		"08:00-21:00 UTC Europe/Berlin":        `"Europe/Berlin" is a second time zone`,
		"08:00-21:00 someday":                  `"someday" is not a day of the week`,
	} {
		_, err := schedule.ParseWindowSpec(spec)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), ":00 UTC") != strings.Contains(spec, ":00 UTC") {
			t.Errorf("ParseWindowSpec(%q): %v; want %q", spec, err, want)
		}
	}
}
