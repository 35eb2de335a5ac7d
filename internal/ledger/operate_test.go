package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/clock"
)

type operateFixture struct {
	ctx   context.Context
	db    *dynamodb.Client
	table string
	clk   *clock.Fake
	l     *ledger.Ledger
}

func operateSetup(t *testing.T) *operateFixture {
	t.Helper()
	t.Parallel()
	db := standintest.DynamoDB(t)
	f := &operateFixture{ctx: context.Background(), db: db, table: standintest.Table(t, db), clk: clock.NewFake(t0)}
	var err error
	if f.l, err = ledger.New(db, ledger.Config{Table: f.table, Clock: f.clk}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *operateFixture) create(t *testing.T, id, channel string) ledger.Delivery {
	t.Helper()
	d := ledger.Delivery{ReminderID: id, Channel: channel, Provider: "webhook", DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}
	if err := f.l.Create(f.ctx, d); err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *operateFixture) raw(t *testing.T, d ledger.Delivery) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.db.GetItem(f.ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: ledger.PartitionKey(d.ReminderID)}, "SK": &types.AttributeValueMemberS{Value: ledger.SortKey(d.Channel, d.Provider)}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// TestRedriveHandsADeadDeliveryBackAndIndexesItAgain: dead → queued, back
// in the due index behind every cursor, its TTL its reminder's, with the operator's
// note in the history; only once; and never over a sent delivery.
func TestRedriveHandsADeadDeliveryBackAndIndexesItAgain(t *testing.T) {
	f := operateSetup(t)
	d := f.create(t, "rem-90", "email")
	c, err := f.l.Claim(f.ctx, ledger.Claim{Key: d.Key(), Token: "t1", LeaseUntil: t0.Add(time.Minute), DueBy: t0})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := f.l.DeadLetter(f.ctx, c, ledger.Failure{Class: "rejected", Message: "provider answered 400"})
	if err != nil {
		t.Fatal(err)
	}
	if it := f.raw(t, d); it["dueShard"] != nil || it["ttl"] == nil {
		t.Fatalf("a dead delivery should be out of the index and have a TTL: %v", it)
	}
	f.clk.Advance(time.Hour)
	got, err := f.l.Redrive(f.ctx, dead, "redriven by ops@example by nudge dlq redrive")
	if err != nil {
		t.Fatal(err)
	}
	last := got.History[len(got.History)-1]
	if got.Status != ledger.StatusQueued || last.Status != ledger.StatusQueued || last.Note != "redriven by ops@example by nudge dlq redrive" || got.LastErrorClass != "rejected" {
		t.Fatalf("after the redrive: %+v", got)
	}
	it := f.raw(t, d)
	sort, _ := it["dueSort"].(*types.AttributeValueMemberS)
	ttl, _ := it["ttl"].(*types.AttributeValueMemberN)
	if it["dueShard"] == nil || sort == nil || sort.Value != ledger.IndexSort(t0, d.Key()) || ttl == nil || ttl.Value != fmt.Sprint(f.l.Expiry(d.ExpiresAt).Unix()) {
		t.Fatalf("the redriven delivery is not back in the index at its dueAt with its reminder's TTL: %v", it)
	}
	if _, err := f.l.Redrive(f.ctx, dead, "again"); !errors.Is(err, ledger.ErrNotDead) {
		t.Fatalf("a second redrive: %v, want ErrNotDead", err)
	}
	// The consumer takes it from queued, and a redrive of the sent delivery
	// is refused as already sent.
	c, err = f.l.Claim(f.ctx, ledger.Claim{Key: d.Key(), Token: "t2", LeaseUntil: f.clk.Now().Add(time.Minute), DueBy: f.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.Complete(f.ctx, c, "r-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.Redrive(f.ctx, dead, "late"); !errors.Is(err, ledger.ErrAlreadySent) {
		t.Fatalf("a redrive of a sent delivery: %v, want ErrAlreadySent", err)
	}
	// Dead-lettered unclaimed (a provider the stack does not run) after two
	// repairs: a redrive restarts the repair's back-off with the budget.
	d = f.create(t, "rem-91", "email")
	for range 2 {
		read, err := f.l.Get(f.ctx, d.Key())
		if err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Second)
		if _, err := f.l.Requeue(f.ctx, read, "repair"); err != nil {
			t.Fatal(err)
		}
	}
	read, err := f.l.Get(f.ctx, d.Key())
	if err != nil || read.Repairs != 2 {
		t.Fatalf("after two repairs: %d repairs, %v", read.Repairs, err)
	}
	if dead, err = f.l.DeadLetter(f.ctx, read, ledger.Failure{Class: "config", Message: "no provider"}); err != nil {
		t.Fatal(err)
	}
	if got, err = f.l.Redrive(f.ctx, dead, "redriven"); err != nil || got.Repairs != 0 {
		t.Fatalf("redriven after two repairs: %d repairs, %v", got.Repairs, err)
	}
}

// TestRedriveRefusesAPrimaryWhoseFallbackWasTaken: once a dead primary's
// fallback was taken, the CLI's redrive (dead -> queued) is refused with
// ErrFallbackTaken, saying which and when, and the primary stays dead.
func TestRedriveRefusesAPrimaryWhoseFallbackWasTaken(t *testing.T) {
	f := operateSetup(t)
	fb := ledger.FallbackRef{Channel: "sms", Provider: "webhook"}
	d := ledger.Delivery{ReminderID: "rem-92", Channel: "email", Provider: "webhook", DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour), Fallback: fb}
	held := ledger.Delivery{ReminderID: "rem-92", Channel: "sms", Provider: "webhook", DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour),
		Status: ledger.StatusHeld, FallbackOf: ledger.FallbackRef{Channel: "email", Provider: "webhook"}}
	for _, x := range []ledger.Delivery{d, held} {
		if err := f.l.Create(f.ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := f.l.DeadLetter(f.ctx, d, ledger.Failure{Class: "rejected", Message: "provider answered 400"})
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(time.Minute)
	if _, err := f.l.TakeFallback(f.ctx, dead, "dead (rejected)"); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(time.Minute)
	_, err = f.l.Redrive(f.ctx, dead, "redriven by ops@example")
	var re *ledger.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, ledger.ErrFallbackTaken) {
		t.Fatalf("redrive of a primary whose fallback was taken: %v, want ErrFallbackTaken", err)
	}
	want := "its fallback rem-92:sms:webhook was taken at " + ledger.Format(t0.Add(time.Minute))
	if note := ledger.FallbackTakenNote(re.Current); note != want {
		t.Errorf("the refusal's note: %q, want %q", note, want)
	}
	if got, err := f.l.Get(f.ctx, d.Key()); err != nil || got.Status != ledger.StatusDead || got.Index != nil {
		t.Fatalf("after the refused redrive: %v, %+v", err, got)
	}
	if it := f.raw(t, d); it["fbTaken"] == nil || it["fallbackTaken"] != nil {
		t.Errorf("the mark's attribute: %v", it)
	}
}

// TestPurgeRemovesEverythingButNotWhileInFlight: a purge refuses, removing
// nothing, while a delivery is being sent; once the lease has lapsed it
// removes the reminder item and every delivery with its history.
func TestPurgeRemovesEverythingButNotWhileInFlight(t *testing.T) {
	f := operateSetup(t)
	email, sms := f.create(t, "rem-91", "email"), f.create(t, "rem-91", "sms")
	f.create(t, "rem-92", "email") // another reminder, untouched
	item := ledger.ReminderItem{ID: "rem-91", AccountRef: "acct-1", DueAt: email.DueAt, ExpiresAt: email.ExpiresAt}
	if _, _, err := f.l.CreateReminder(f.ctx, item); err != nil {
		t.Fatal(err)
	}
	if _, err := f.l.Claim(f.ctx, ledger.Claim{Key: sms.Key(), Token: "t1", LeaseUntil: t0.Add(time.Minute), DueBy: t0}); err != nil {
		t.Fatal(err)
	}
	_, err := f.l.Purge(f.ctx, "rem-91")
	var inFlight *ledger.InFlightError
	if !errors.As(err, &inFlight) || !errors.Is(err, ledger.ErrInFlight) || len(inFlight.Keys) != 1 || inFlight.Keys[0] != sms.Key() {
		t.Fatalf("purge while sending: %v", err)
	}
	if st, _ := f.l.ReadReminder(f.ctx, "rem-91"); len(st.Deliveries) != 2 || st.Reminder == nil {
		t.Fatalf("a refused purge removed something: %+v", st)
	}
	f.clk.Advance(2 * time.Minute) // the consumer died; its lease lapsed
	p, err := f.l.Purge(f.ctx, "rem-91")
	if err != nil || len(p.Deliveries) != 2 || len(p.OtherItems) != 1 {
		t.Fatalf("purge: %+v, %v", p, err)
	}
	if st, _ := f.l.ReadReminder(f.ctx, "rem-91"); !st.Empty() {
		t.Fatalf("left behind: %+v", st)
	}
	if _, err := f.l.Get(f.ctx, email.Key()); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the email delivery is still there: %v", err)
	}
	if _, err := f.l.Purge(f.ctx, "rem-91"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("a second purge: %v, want ErrNotFound", err)
	}
	if st, _ := f.l.ReadReminder(f.ctx, "rem-92"); len(st.Deliveries) != 1 {
		t.Fatal("another reminder was touched")
	}
}

// TestAnOperatorClockAheadNeverTakesALiveLease: a consumer holds a lease
// for 40 more seconds; an operator whose laptop runs a minute ahead cancels
// and purges. With the operator's clock-skew margin both are refused as in
// flight; without it both would take the delivery from a consumer that is
// sending it (recorded cancelled, actually sent). A minute after the lease
// truly lapsed, the operator's commands go through.
func TestAnOperatorClockAheadNeverTakesALiveLease(t *testing.T) {
	f := operateSetup(t)
	d := f.create(t, "rem-skew", "email")
	if _, err := f.l.Claim(f.ctx, ledger.Claim{Key: d.Key(), Token: "consumer", LeaseUntil: t0.Add(40 * time.Second), DueBy: t0}); err != nil {
		t.Fatal(err)
	}
	ahead := clock.NewFake(t0.Add(time.Minute))
	op, err := ledger.New(f.db, ledger.Config{Table: f.table, Clock: ahead, ClockSkew: ledger.OperatorClockSkew})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Cancel(f.ctx, d.Key(), "by a skewed operator"); !errors.Is(err, ledger.ErrLeased) {
		t.Fatalf("cancel by a clock a minute ahead, 40 s before the lease ends: %v; want ErrLeased", err)
	}
	if _, err := op.Purge(f.ctx, "rem-skew"); !errors.Is(err, ledger.ErrInFlight) {
		t.Fatalf("purge by a clock a minute ahead: %v; want ErrInFlight", err)
	}
	if got, _ := f.l.Get(f.ctx, d.Key()); got.Status != ledger.StatusSending {
		t.Fatalf("the delivery is %s; the consumer's lease was taken", got.Status)
	}
	// The consumer died; its lease lapsed a minute ago (by true time).
	ahead.Advance(time.Minute + 41*time.Second)
	if got, err := op.Cancel(f.ctx, d.Key(), "by a skewed operator"); err != nil || got.Status != ledger.StatusCancelled {
		t.Fatalf("cancel after the lease lapsed: %v, %v", got.Status, err)
	}
}

// TestRetainGivesOlderItemsTheirRemindersTTL: items written before TTLs
// were set at creation — a live delivery with none, an ended one kept 90
// days after its end though its reminder expires a year later, a reminder
// item with none — get their reminder's Expiry; a current item and one
// with a later TTL are left alone; a dry run changes nothing, and a second
// run finds nothing to do.
func TestRetainGivesOlderItemsTheirRemindersTTL(t *testing.T) {
	f := operateSetup(t)
	far := t0.Add(365 * 24 * time.Hour)
	create := func(id string) ledger.Delivery {
		d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: t0, ExpiresAt: far}
		if err := f.l.Create(f.ctx, d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	setTTL := func(d ledger.Delivery, ttl string) {
		t.Helper()
		expr, values := "REMOVE #ttl", map[string]types.AttributeValue(nil)
		if ttl != "" {
			expr, values = "SET #ttl = :t", map[string]types.AttributeValue{":t": &types.AttributeValueMemberN{Value: ttl}}
		}
		if _, err := f.db.UpdateItem(f.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.table), Key: f.key(d.ReminderID, ledger.SortKey(d.Channel, d.Provider)),
			UpdateExpression: aws.String(expr), ExpressionAttributeNames: map[string]string{"#ttl": "ttl"}, ExpressionAttributeValues: values}); err != nil {
			t.Fatal(err)
		}
	}
	live, ended, later := create("rem-old-live"), create("rem-old-ended"), create("rem-later")
	create("rem-current")
	setTTL(live, "")
	setTTL(ended, fmt.Sprint(t0.Add(90*24*time.Hour).Unix()))
	laterTTL := fmt.Sprint(far.Add(200 * 24 * time.Hour).Unix())
	setTTL(later, laterTTL)
	if _, err := f.db.PutItem(f.ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: ledger.PartitionKey("rem-old-live")}, "SK": &types.AttributeValueMemberS{Value: "REMINDER"},
		"expiresAt": &types.AttributeValueMemberS{Value: ledger.Format(far)}}}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(f.l.Expiry(far).Unix())
	if r, err := f.l.Retain(f.ctx, true); err != nil || r.Items != 5 || r.Extended != 3 {
		t.Fatalf("dry run: %+v, %v; want 5 items read, 3 to extend", r, err)
	}
	if ttl := f.ttl(t, live.ReminderID, ledger.SortKey("email", "webhook")); ttl != "" {
		t.Fatalf("the dry run wrote a TTL: %s", ttl)
	}
	if r, err := f.l.Retain(f.ctx, false); err != nil || r.Extended != 3 {
		t.Fatalf("retain: %+v, %v; want 3 extended", r, err)
	}
	for _, c := range []struct{ id, sk, want string }{
		{"rem-old-live", ledger.SortKey("email", "webhook"), want}, {"rem-old-ended", ledger.SortKey("email", "webhook"), want},
		{"rem-current", ledger.SortKey("email", "webhook"), want}, {"rem-later", ledger.SortKey("email", "webhook"), laterTTL},
		{"rem-old-live", "REMINDER", want},
	} {
		if got := f.ttl(t, c.id, c.sk); got != c.want {
			t.Errorf("%s %s: TTL %s, want %s", c.id, c.sk, got, c.want)
		}
	}
	if r, err := f.l.Retain(f.ctx, false); err != nil || r.Extended != 0 {
		t.Fatalf("a second run: %+v, %v; want nothing to do", r, err)
	}
}

func (f *operateFixture) key(id, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: ledger.PartitionKey(id)}, "SK": &types.AttributeValueMemberS{Value: sk}}
}

func (f *operateFixture) ttl(t *testing.T, id, sk string) string {
	t.Helper()
	out, err := f.db.GetItem(f.ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: f.key(id, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := out.Item["ttl"].(*types.AttributeValueMemberN); ok {
		return n.Value
	}
	return ""
}
