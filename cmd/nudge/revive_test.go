package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

// reviveFixture is a ledger table with dead deliveries of several ages and
// classes, dated from now (the CLI reads the wall clock), and a live and a
// sent one.
type reviveFixture struct {
	t     *testing.T
	ctx   context.Context
	table string
	l     *ledger.Ledger
}

// The fixture's deliveries, dead since: 30 days (its DLQ copy aged out),
// 20 days (class exhausted), 1 day (its DLQ copy may remain), and 30 days
// but expired an hour ago.
var (
	deadOld     = message.DeliveryKey{ReminderID: "rem-rv-old", Channel: "email", Provider: "webhook"}
	deadOld2    = message.DeliveryKey{ReminderID: "rem-rv-old2", Channel: "email", Provider: "webhook"}
	deadRecent  = message.DeliveryKey{ReminderID: "rem-rv-recent", Channel: "email", Provider: "webhook"}
	deadExpired = message.DeliveryKey{ReminderID: "rem-rv-expired", Channel: "email", Provider: "webhook"}
)

func reviveSetup(t *testing.T) *reviveFixture {
	t.Helper()
	db := standintest.DynamoDB(t)
	f := &reviveFixture{t: t, ctx: context.Background(), table: standintest.Table(t, db)}
	now := time.Now().UTC()
	clk := clock.NewFake(now.Add(-30 * 24 * time.Hour))
	var err error
	if f.l, err = ledger.New(db, ledger.Config{Table: f.table, Clock: clk}); err != nil {
		t.Fatal(err)
	}
	dies := func(k message.DeliveryKey, expiresAt time.Time, class failure.Class) {
		t.Helper()
		d := ledger.Delivery{ReminderID: k.ReminderID, Channel: k.Channel, Provider: k.Provider, RecipientRef: "acct-1/contact-1", TemplateRef: "renewal-v3",
			DueAt: clk.Now(), ExpiresAt: expiresAt, Status: ledger.StatusQueued}
		if err := f.l.Create(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		c, err := f.l.Claim(f.ctx, ledger.Claim{Key: k, Token: "tok", LeaseUntil: clk.Now().Add(time.Minute), DueBy: clk.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.l.DeadLetter(f.ctx, c, ledger.Failure{Class: class, Message: "provider answered 400"}); err != nil {
			t.Fatal(err)
		}
	}
	dies(deadOld, now.Add(30*24*time.Hour), "rejected")
	dies(deadExpired, now.Add(-time.Hour), "rejected")
	clk.Advance(10 * 24 * time.Hour)
	dies(deadOld2, now.Add(30*24*time.Hour), "exhausted")
	clk.Advance(now.Add(-24 * time.Hour).Sub(clk.Now()))
	dies(deadRecent, now.Add(30*24*time.Hour), "rejected")
	for _, id := range []string{"rem-rv-live", "rem-rv-sent"} {
		k := message.DeliveryKey{ReminderID: id, Channel: "email", Provider: "webhook"}
		d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: clk.Now(), ExpiresAt: now.Add(time.Hour)}
		if err := f.l.Create(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		if id == "rem-rv-sent" {
			c, err := f.l.Claim(f.ctx, ledger.Claim{Key: k, Token: "tok", LeaseUntil: clk.Now().Add(time.Minute), DueBy: clk.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.l.Complete(f.ctx, c, "r"); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

// revive runs nudge ledger revive on the fixture's table.
func (f *reviveFixture) revive(stdin string, args ...string) (int, string, string) {
	var out, errs bytes.Buffer
	code := run(append([]string{"ledger", "revive", "--table", f.table}, args...), strings.NewReader(stdin), &out, &errs)
	return code, out.String(), errs.String()
}

// revivePlanJSON is what --dry-run --json prints.
type revivePlanJSON struct {
	Scanned     int `json:"scanned"`
	WouldRevive []struct {
		DeliveryKey      string `json:"deliveryKey"`
		ErrorClass       string `json:"errorClass"`
		DLQCopyMayRemain bool   `json:"dlqCopyMayRemain"`
	} `json:"wouldRevive"`
	Left []struct {
		DeliveryKey string `json:"deliveryKey"`
		Why         string `json:"why"`
	} `json:"left"`
	Full bool   `json:"full"`
	Next string `json:"next"`
}

func (f *reviveFixture) plan(args ...string) revivePlanJSON {
	f.t.Helper()
	code, out, errs := f.revive("", append([]string{"--dry-run", "--json", "--reason", "review"}, args...)...)
	if code != exitOK {
		f.t.Fatalf("revive --dry-run %v: exit %d: %s", args, code, errs)
	}
	var p revivePlanJSON
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		f.t.Fatalf("revive --dry-run --json: %v\n%s", err, out)
	}
	return p
}

func (p revivePlanJSON) chosen() []string {
	var ks []string
	for _, d := range p.WouldRevive {
		ks = append(ks, d.DeliveryKey)
	}
	return ks
}

func (p revivePlanJSON) why(k message.DeliveryKey) string {
	for _, d := range p.Left {
		if d.DeliveryKey == k.String() {
			return d.Why
		}
	}
	return ""
}

func (f *reviveFixture) status(k message.DeliveryKey) ledger.Delivery {
	f.t.Helper()
	d, err := f.l.Get(f.ctx, k)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

// TestLedgerReviveIsReviewedAndBounded runs nudge ledger revive as an
// operator would, against DynamoDB Local: the plan (what would be revived,
// the longest dead first, and why the others stay dead), the filters, the
// read's bound and its continuation, the bound on the batch, the question
// and the reason it requires, then the revive, recorded with who and why.
// Not parallel, as TestOperatorCommands.
func TestLedgerReviveIsReviewedAndBounded(t *testing.T) {
	f := reviveSetup(t)
	t.Setenv("NUDGE_OPERATOR", "ops@example")

	// The plan: every dead delivery but the expired one, the longest dead
	// first; the one dead a day may still have its DLQ copy.
	p := f.plan("--max", "10")
	if got, want := p.chosen(), []string{deadOld.String(), deadOld2.String(), deadRecent.String()}; !slices.Equal(got, want) {
		t.Fatalf("would revive %v, want %v", got, want)
	}
	if p.WouldRevive[0].DLQCopyMayRemain || !p.WouldRevive[2].DLQCopyMayRemain {
		t.Errorf("DLQ copies: %+v", p.WouldRevive)
	}
	if why := p.why(deadExpired); !strings.Contains(why, "past its expiresAt a delivery is never revived") || len(p.Left) != 1 || p.Full || p.Next != "" {
		t.Errorf("left %+v, full %v, next %q", p.Left, p.Full, p.Next)
	}
	// The filters: the class and the age.
	p = f.plan("--max", "10", "--reason-class", "rejected", "--older-than", "336h")
	if got := p.chosen(); !slices.Equal(got, []string{deadOld.String()}) {
		t.Fatalf("filtered: would revive %v, want %v", got, deadOld)
	}
	if !strings.Contains(p.why(deadOld2), "error class exhausted, not rejected") || !strings.Contains(p.why(deadRecent), "not older than 336h0m0s") {
		t.Errorf("filtered: left %+v", p.Left)
	}
	// The read's bound: two items at a time, and on from where it stopped.
	var paged []string
	after := ""
	for pages := 0; ; pages++ {
		args := []string{"--max", "10", "--read", "2"}
		if after != "" {
			args = append(args, "--after", after)
		}
		p = f.plan(args...)
		if p.Scanned > 2 {
			t.Fatalf("--read 2 read %d items", p.Scanned)
		}
		paged = append(paged, p.chosen()...)
		if p.Next == "" {
			break
		}
		if pages > 20 {
			t.Fatal("the reads never end")
		}
		after = p.Next
	}
	slices.Sort(paged)
	want := []string{deadOld.String(), deadOld2.String(), deadRecent.String()}
	if slices.Sort(want); !slices.Equal(paged, want) {
		t.Errorf("read two items at a time: %v, want %v", paged, want)
	}
	code, out, _ := f.revive("", "--max", "10", "--read", "2", "--reason", "x", "--dry-run")
	if code != exitOK || !strings.Contains(out, "read on with --after ") {
		t.Errorf("a bounded read does not say how to read on: %d\n%s", code, out)
	}

	// The batch's bound, and the question: declined, nothing changes.
	code, out, _ = f.revive("n\n", "--max", "1", "--reason", "provider fixed (INC-42)")
	if code != exitRefused || !hasLine(out, "Would revive 1") || !hasLine(out, deadOld.String(), "rejected", "provider answered 400", "aged out") ||
		!hasLine(out, "2  beyond --max") || !hasLine(out, "1  expired: past its expiresAt") || !strings.Contains(out, "Reached --max 1") ||
		!strings.Contains(out, `Revive 1 delivery, recorded as by ops@example: "provider fixed (INC-42)"? [y/N]`) || !strings.Contains(out, "Nothing was revived.") {
		t.Errorf("declined revive: %d\n%s", code, out)
	}
	for _, k := range []message.DeliveryKey{deadOld, deadOld2, deadRecent, deadExpired} {
		if d := f.status(k); d.Status != ledger.StatusDead {
			t.Fatalf("a declined revive changed %s: %s", k, d.Status)
		}
	}

	// Confirmed: the two longest dead go back to the calendar, with who
	// and why; the others stay dead.
	code, out, errs := f.revive("y\n", "--max", "2", "--reason", "provider fixed (INC-42)")
	if code != exitOK || !hasLine(out, "revived "+deadOld.String(), "pending; the enqueue hands it off from") ||
		!hasLine(out, "revived "+deadOld2.String()) || !strings.Contains(out, "2 revived, 0 skipped, 0 failed.") {
		t.Fatalf("revive: %d\n%s\n%s", code, out, errs)
	}
	for _, k := range []message.DeliveryKey{deadOld, deadOld2} {
		d := f.status(k)
		last := d.History[len(d.History)-1]
		if d.Status != ledger.StatusPending || d.Index == nil || d.BudgetUsed() != 0 || last.Note != "revived by ops@example: provider fixed (INC-42)" {
			t.Errorf("%s after the revive: status %s, index %+v, budget used %d, history %+v", k, d.Status, d.Index, d.BudgetUsed(), last)
		}
	}
	for _, k := range []message.DeliveryKey{deadRecent, deadExpired} {
		if d := f.status(k); d.Status != ledger.StatusDead {
			t.Errorf("%s, beyond --max or expired, became %s", k, d.Status)
		}
	}
	// --json with --yes; --by names another operator.
	code, out, errs = f.revive("", "--max", "5", "--yes", "--json", "--by", "oncall@example", "--reason", "retry after the fix")
	if code != exitOK || !strings.Contains(out, `"revived": 1`) || !strings.Contains(out, `"deliveryKey": "`+deadRecent.String()+`"`) {
		t.Fatalf("revive --yes --json: %d\n%s\n%s", code, out, errs)
	}
	if d := f.status(deadRecent); d.History[len(d.History)-1].Note != "revived by oncall@example: retry after the fix" {
		t.Errorf("--by: %+v", d.History[len(d.History)-1])
	}
	if code, out, _ := f.revive("", "--max", "5", "--reason", "again"); code != exitOK || !strings.Contains(out, "Nothing to revive.") {
		t.Errorf("nothing left: %d\n%s", code, out)
	}
}

// TestLedgerReviveRefusesWhatIsNotReviewedOrBounded: the usage mistakes
// refused before anything is read.
func TestLedgerReviveRefusesWhatIsNotReviewedOrBounded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--reason", "fixed"}, "give --max N"},
		{[]string{"--max", "5"}, "give --reason TEXT"},
		{[]string{"--max", "5", "--reason", "  "}, "give --reason TEXT"},
		{[]string{"--max", "5", "--reason", strings.Repeat("x", 130)}, "shorten the reason"},
		{[]string{"--max", "5", "--reason", "fixed", "--by", ""}, "names who revives"},
		{[]string{"--max", "5", "--reason", "fixed", "--json"}, "--json cannot ask for confirmation"},
		{[]string{"--max", "5", "--reason", "fixed", "--read", "0"}, "--read 0"},
		{[]string{"--max", "5", "--reason", "fixed", "rem-1"}, "it takes no arguments"},
	} {
		var out, errs bytes.Buffer
		code := run(append([]string{"ledger", "revive", "--table", "t"}, c.args...), strings.NewReader(""), &out, &errs)
		if code != exitUsage || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errs.String(), exitUsage, c.want)
		}
	}
}
