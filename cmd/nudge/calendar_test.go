package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// TestCalendarCommands runs schedule, import and cancel as a user would,
// against DynamoDB Local.
// Not parallel: TestInvoke points this process's environment at a stack
// of its own while it runs.
func TestCalendarCommands(t *testing.T) {
	db := standintest.DynamoDB(t)
	table := standintest.Table(t, db)
	due := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	run := func(cmd string, stdin string, args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := run(append([]string{cmd, "--table", table}, args...), strings.NewReader(stdin), &out, &errs)
		return code, out.String(), errs.String()
	}
	flags := []string{"--id", "rem-cli-1", "--account", "acct-1", "--due", due, "--recipient", "acct-1/contact-1", "--template", "renewal-v3", "--meta", "plan=pro"}
	// The CLI spreads deliveries over the stack's shard count, which the
	// enqueue records in the table on its first run; before that it says so.
	if code, _, errs := run("schedule", "", flags...); code != 1 || !strings.Contains(errs, "the enqueue records the stack's on its first run") {
		t.Fatalf("schedule before the enqueue ran: %d %q", code, errs)
	}
	enqueueLedger, err := ledger.New(db, ledger.Config{Table: table, Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := enqueueLedger.StoredShards(context.Background()); err != nil || n != 3 {
		t.Fatalf("the enqueue's first read of the registry: %d, %v", n, err)
	}
	// The refused run wrote the reminder item before it met the missing
	// registry; this one writes its delivery: completed.
	if code, out, errs := run("schedule", "", flags...); code != 0 || !strings.HasPrefix(out, "completed rem-cli-1: 1 deliveries") {
		t.Fatalf("schedule: %d %q %q", code, out, errs)
	}
	if code, out, _ := run("schedule", "", flags...); code != 0 || !strings.HasPrefix(out, "unchanged rem-cli-1") {
		t.Fatalf("schedule again: %d %q", code, out)
	}
	changed := append(append([]string{}, flags...), "--template", "renewal-v4")
	if code, _, errs := run("schedule", "", changed...); code != 1 || !strings.Contains(errs, "already exists with deliveries") {
		t.Fatalf("conflicting schedule: %d %q", code, errs)
	}
	if code, _, errs := run("schedule", "", "--id", "rem-cli-2", "--account", "a", "--due", "tomorrow", "--recipient", "r", "--template", "t"); code != 1 || !strings.Contains(errs, `dueAt "tomorrow" is not an RFC 3339 time`) {
		t.Fatalf("invalid schedule: %d %q", code, errs)
	}
	js := `{"id":"rem-cli-3","accountRef":"acct-3","dueAt":"` + due + `","deliveries":[{"channel":"sms","provider":"webhook","recipientRef":"acct-3/phone","templateRef":"t"}]}`
	if code, out, errs := run("schedule", js, "--json", "-"); code != 0 || !strings.HasPrefix(out, "created rem-cli-3") {
		t.Fatalf("schedule --json -: %d %q %q", code, out, errs)
	}

	file := filepath.Join(t.TempDir(), "reminders.jsonl")
	lines := strings.Join([]string{
		`{"id":"imp-1","accountRef":"a","dueAt":"` + due + `","deliveries":[{"channel":"email","provider":"webhook","recipientRef":"r","templateRef":"t"}]}`,
		`{"id":"imp-2","accountRef":"a","dueAt":"soon","deliveries":[{"channel":"email","provider":"webhook","recipientRef":"r","templateRef":"t"}]}`,
		``,
		`{"id":"rem-cli-3","accountRef":"other","dueAt":"` + due + `","deliveries":[{"channel":"sms","provider":"webhook","recipientRef":"acct-3/phone","templateRef":"t"}]}`,
		js,
	}, "\n")
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run("import", "", file)
	if code != 1 || !strings.Contains(out, "4 rows") || !strings.Contains(out, "1 created, 1 unchanged, 1 conflicting, 1 invalid, 0 failed") ||
		!strings.Contains(out, "line 2: invalid:") || !strings.Contains(out, "line 4: conflicting:") || !strings.Contains(errs, "import: 4/4 rows done") {
		t.Fatalf("import: %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := run("import", "", "reminders.txt"); code != 2 || !strings.Contains(errs, "--format") {
		t.Fatalf("import of an unknown format: %d %q", code, errs)
	}

	later := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	if code, out, errs := run("reschedule", "", "--due", later.Format(time.RFC3339), "rem-cli-3"); code != 0 ||
		out != "rem-cli-3:sms:webhook: moved to "+ledger.Format(later)+" (expires "+ledger.Format(later.Add(24*time.Hour))+")\n" {
		t.Fatalf("reschedule: %d %q %q", code, out, errs)
	}
	if code, out, _ := run("reschedule", "", "--due", later.Format(time.RFC3339), "rem-cli-3"); code != 0 || !strings.Contains(out, "already at") {
		t.Fatalf("reschedule again: %d %q", code, out)
	}
	if code, _, errs := run("reschedule", "", "--due", "next week", "rem-cli-3"); code != 1 || !strings.Contains(errs, `dueAt "next week" is not an RFC 3339 time`) {
		t.Fatalf("reschedule to no time: %d %q", code, errs)
	}
	if code, _, errs := run("reschedule", "", "rem-cli-3"); code != 2 || !strings.Contains(errs, "--due") {
		t.Fatalf("reschedule without --due: %d %q", code, errs)
	}
	if code, out, _ := run("cancel", "", "rem-cli-1"); code != 0 || out != "rem-cli-1:email:webhook: cancelled\n" {
		t.Fatalf("cancel: %d %q", code, out)
	}
	if code, out, _ := run("cancel", "", "rem-cli-1"); code != 0 || !strings.Contains(out, "already ended (cancelled)") {
		t.Fatalf("cancel again: %d %q", code, out)
	}
	if code, _, errs := run("cancel", "", "rem-nope"); code != 1 || !strings.Contains(errs, "no such reminder") {
		t.Fatalf("cancel unknown: %d %q", code, errs)
	}
	if code, out, _ := run("reschedule", "", "--due", later.Format(time.RFC3339), "rem-cli-1"); code != 1 || !strings.Contains(out, "not moved: it already ended (cancelled)") {
		t.Fatalf("reschedule of a cancelled reminder: %d %q", code, out)
	}
}

// runCLI is the command line's run, for tests whose helper shadows it.
var runCLI = run

// TestCalendarCommandsInTheRecipientsTime: schedule by local time, zone and
// rule from the CLI, against DynamoDB Local; cancel one occurrence, then
// the series.
func TestCalendarCommandsInTheRecipientsTime(t *testing.T) {
	db := standintest.DynamoDB(t)
	table := standintest.Table(t, db)
	if _, err := func() (int, error) {
		l, err := ledger.New(db, ledger.Config{Table: table, Shards: 2})
		if err != nil {
			return 0, err
		}
		return l.StoredShards(context.Background())
	}(); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string, args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := run(append([]string{cmd, "--table", table}, args...), strings.NewReader(""), &out, &errs)
		return code, out.String(), errs.String()
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no zone database on this machine for the test's own arithmetic:", err)
	}
	first := time.Now().Add(72 * time.Hour).In(berlin).Truncate(time.Minute) // the wall clock: the ledger refuses times past
	local := first.Format("2006-01-02T15:04")
	code, out, errs := run("schedule", "--id", "ser-cli", "--account", "acct-1", "--due-local", local, "--tz", "Europe/Berlin",
		"--rrule", "FREQ=WEEKLY", "--channel", "sms", "--provider", "webhook", "--recipient", "acct-1/c", "--template", "t")
	if code != 0 || !strings.HasPrefix(out, "created ser-cli") || !strings.Contains(out, "series: FREQ=WEEKLY") || !strings.Contains(out, "local: due ") {
		t.Fatalf("schedule a series: %d %q %q", code, out, errs)
	}
	// The series restarts a week on, an hour later: the first occurrence
	// at the old time is cancelled, the new ones created.
	restart := first.AddDate(0, 0, 7).Add(time.Hour)
	if code, out, errs := run("reschedule", "--due-local", restart.Format("2006-01-02T15:04"), "ser-cli"); code != 0 ||
		!strings.Contains(out, "ser-cli."+first.Format("20060102T1504")+":sms:webhook: cancelled: the series restarts") ||
		!strings.Contains(out, "ser-cli."+restart.Format("20060102T1504")+":sms:webhook: created") {
		t.Fatalf("reschedule the series: %d %q %q", code, out, errs)
	}
	before := "ser-cli." + first.Format("20060102T1504") // the first start's first occurrence
	first = restart
	second := "ser-cli." + first.AddDate(0, 0, 7).Format("20060102T1504")
	if code, out, errs := run("cancel", second); code != 0 || !strings.Contains(out, second+":sms:webhook") {
		t.Fatalf("cancel an occurrence: %d %q %q", code, out, errs)
	}
	if code, out, errs := run("cancel", "ser-cli"); code != 0 || !strings.Contains(out, "ser-cli."+first.Format("20060102T1504")+":sms:webhook") {
		t.Fatalf("cancel the series: %d %q %q", code, out, errs)
	}
	// A purge of a rescheduled series deletes the occurrences of both its
	// starts.
	var rout, rerrs bytes.Buffer
	if code := runCLI([]string{"reminder", "purge", "--table", table, "--yes", "ser-cli"}, strings.NewReader(""), &rout, &rerrs); code != 0 ||
		!strings.Contains(rout.String(), "  "+before+"\n") || !strings.Contains(rout.String(), "  "+second+"\n") {
		t.Fatalf("purge the rescheduled series: %d %q %q; want %s (before the reschedule) and %s purged", code, rout.String(), rerrs.String(), before, second)
	}
	// A purge of a series cancels it and deletes its occurrences with it.
	if code, out, errs := run("schedule", "--id", "ser-purge", "--account", "acct-1", "--due-local", local, "--tz", "Europe/Berlin",
		"--rrule", "FREQ=WEEKLY", "--channel", "sms", "--provider", "webhook", "--recipient", "acct-1/c", "--template", "t"); code != 0 {
		t.Fatalf("schedule a series to purge: %d %q %q", code, out, errs)
	}
	var pout, perrs bytes.Buffer
	if code := runCLI([]string{"reminder", "purge", "--table", table, "--yes", "ser-purge"}, strings.NewReader(""), &pout, &perrs); code != 0 ||
		!strings.Contains(pout.String(), "purged series ser-purge and 5 occurrences") {
		t.Fatalf("purge the series: %d %q %q", code, pout.String(), perrs.String())
	}
	wall, _ := time.Parse("2006-01-02T15:04", local)
	if code, out, _ := run("cancel", "ser-purge."+wall.Format("20060102T1504")); code == 0 {
		t.Fatalf("an occurrence of the purged series is still there: %q", out)
	}
	if code, _, errs := run("schedule", "--id", "ser-bad", "--account", "acct-1", "--due-local", local, "--tz", "Europe/Berlin",
		"--rrule", "FREQ=MONTHLY;BYDAY=-6FR", "--channel", "sms", "--provider", "webhook", "--recipient", "r", "--template", "t"); code != 1 ||
		!strings.Contains(errs, "recur") {
		t.Fatalf("a bad rule: %d %q", code, errs)
	}
}

// TestSendWindowsFromTheCLI: --window names a delivery's send window (in
// --tz, or a zone of its own), the stage's windows as its enqueue recorded
// them apply to a delivery that names none, reminder show lists each, and
// a window that cannot be read is a usage error naming --window; against
// DynamoDB Local.
func TestSendWindowsFromTheCLI(t *testing.T) {
	db := standintest.DynamoDB(t)
	table := standintest.Table(t, db)
	l, err := ledger.New(db, ledger.Config{Table: table, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.StoredShards(context.Background()); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string, args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := run(append([]string{cmd, "--table", table}, args...), strings.NewReader(""), &out, &errs)
		return code, out.String(), errs.String()
	}
	// Three days on (the ledger refuses times past), at 09:00 in Kathmandu.
	due := time.Now().UTC().Add(72 * time.Hour).Truncate(24 * time.Hour).Add(3*time.Hour + 15*time.Minute) // the wall clock: as above
	sched := func(id string, extra ...string) (int, string, string) {
		return run("schedule", append([]string{"--id", id, "--account", "acct-1", "--due", due.Format(time.RFC3339), "--tz", "Asia/Kathmandu",
			"--channel", "sms", "--provider", "webhook", "--recipient", "acct-1/c", "--template", "t"}, extra...)...)
	}
	// It expires a week on: whatever day it falls on, a Monday-to-Saturday
	// window opens before then.
	code, out, errs := sched("rem-win-1", "--window", "10:30-18:00 mon-sat", "--expires", due.Add(7*24*time.Hour).Format(time.RFC3339))
	if code != 0 || !strings.Contains(out, "sms:webhook: sent only within 10:30-18:00 Asia/Kathmandu mon-sat") {
		t.Fatalf("schedule with --window: %d %q %q", code, out, errs)
	}
	if code, out, errs := run("reminder", "show", "rem-win-1"); code != 0 || !strings.Contains(out, "SEND WINDOWS") ||
		!strings.Contains(out, "rem-win-1:sms:webhook  10:30-18:00 Asia/Kathmandu mon-sat") {
		t.Fatalf("reminder show: %d %q %q", code, out, errs)
	}
	if code, out, errs := sched("rem-win-2", "--window", "08:00-21:00 America/New_York"); code != 0 || !strings.Contains(out, "08:00-21:00 America/New_York") {
		t.Fatalf("schedule with a window in its own zone: %d %q %q", code, out, errs)
	}
	if code, _, errs := sched("rem-win-3", "--window", "8am-9pm"); code != 2 || !strings.Contains(errs, "--window") {
		t.Fatalf("an unreadable --window: %d %q", code, errs)
	}
	// The stage's windows, as its enqueue records them.
	if err := l.RecordStage(context.Background(), ledger.StageFacts{Providers: []string{"webhook"},
		Env: map[string]string{deployment.EnvSendWindows: "sms=11:00-17:00"}}); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := sched("rem-win-4"); code != 0 || !strings.Contains(out, "sent only within 11:00-17:00 Asia/Kathmandu") {
		t.Fatalf("schedule under the stage's window: %d %q %q", code, out, errs)
	}
	// The zone after the days reads as before them.
	code, out, errs = sched("rem-win-5", "--window", "09:00-17:00 mon-fri Europe/Berlin", "--expires", due.Add(7*24*time.Hour).Format(time.RFC3339))
	if code != 0 || !strings.Contains(out, "sent only within 09:00-17:00 Europe/Berlin mon-fri") {
		t.Fatalf("schedule with the zone after the days: %d %q %q", code, out, errs)
	}
	// An import: a row's window column, and the stage's for a row with none.
	file := filepath.Join(t.TempDir(), "windows.csv")
	csv := "id,accountRef,dueAt,timeZone,channel,provider,recipientRef,templateRef,window\n" +
		"rem-win-6,acct-1," + due.Format(time.RFC3339) + ",Asia/Kathmandu,sms,webhook,acct-1/c,t,08:00-21:00\n" +
		"rem-win-7,acct-1," + due.Format(time.RFC3339) + ",Asia/Kathmandu,sms,webhook,acct-1/c,t,\n"
	if err := os.WriteFile(file, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := run("import", file); code != 0 || !strings.Contains(out, "2 created") {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	for id, want := range map[string]string{"rem-win-6": "08:00-21:00 Asia/Kathmandu", "rem-win-7": "11:00-17:00 Asia/Kathmandu"} {
		if code, out, errs := run("reminder", "show", id); code != 0 || !strings.Contains(out, id+":sms:webhook  "+want+"\n") {
			t.Errorf("reminder show %s: %d %q %q; want its window %s", id, code, out, errs, want)
		}
	}
}

// TestAWindowTheCLICannotUseIsAUsageError: --window that cannot be read,
// or given with --json (whose deliveries name their own), is refused with
// exit 2 naming --window and what to write, before the table is opened.
func TestAWindowTheCLICannotUseIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--window", "8am-9pm"}, `--window: send window "8am-9pm": "8am" is not a time of day`},
		{[]string{"--window", "21:00"}, "write the hours like 08:00-21:00"},
		{[]string{"--window", "08:00-21:00 mon-fri America/New_Yrok"}, `"America/New_Yrok" is not a time zone`},
		{[]string{"--window", "08:00-21:00", "--json", "-"}, `with --json, give each delivery its "window" in the JSON`},
	} {
		var out, errs bytes.Buffer
		args := append([]string{"schedule", "--table", "no-such-table", "--id", "rem-1", "--account", "acct-1", "--due", "2030-01-01T09:00:00Z",
			"--recipient", "r", "--template", "t"}, c.args...)
		if code := run(args, strings.NewReader(""), &out, &errs); code != exitUsage || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 saying %q", c.args, code, errs.String(), c.want)
		}
	}
}

// TestReminderShowListsTheSendWindows: each delivery's and fallback's
// window, with its zone, under SEND WINDOWS; a reminder without any has no
// such section.
func TestReminderShowListsTheSendWindows(t *testing.T) {
	t.Parallel()
	sms, err := localtime.ParseWindowSpec("08:00-21:00 America/New_York mon-sat")
	if err != nil {
		t.Fatal(err)
	}
	email, err := localtime.ParseWindowSpec("07:00-22:00 Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	r := schedule.Reminder{ID: "rem-1", Deliveries: []schedule.Delivery{
		{Channel: "sms", Provider: "webhook", Window: sms, Fallback: &schedule.Fallback{Channel: "email", Provider: "ses", Window: email}},
		{Channel: "push", Provider: "sns"},
	}}
	var out bytes.Buffer
	printWindows(&out, r)
	want := "\nSEND WINDOWS (never sent outside them; due outside, a delivery waits for the opening)\n" +
		"  rem-1:sms:webhook  08:00-21:00 America/New_York mon-sat\n" +
		"  rem-1:email:ses  07:00-22:00 Europe/Berlin\n"
	if out.String() != want {
		t.Errorf("printed %q; want %q", out.String(), want)
	}
	out.Reset()
	printWindows(&out, schedule.Reminder{ID: "rem-2", Deliveries: []schedule.Delivery{{Channel: "sms", Provider: "webhook"}}})
	if out.Len() != 0 {
		t.Errorf("a reminder without windows: %q; want nothing", out.String())
	}
}
