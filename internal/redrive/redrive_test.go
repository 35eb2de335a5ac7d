package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

type fixture struct {
	t      *testing.T
	ctx    context.Context
	sqs    *sqs.Client
	q      standintest.Queues
	ledger *ledger.Ledger
	now    time.Time
}

func setup(t *testing.T) *fixture {
	t.Helper()
	t.Parallel()
	db, client := standintest.DynamoDB(t), standintest.SQS(t)
	f := &fixture{t: t, ctx: context.Background(), sqs: client, q: standintest.QueuePair(t, client, 30*time.Second, 10), now: time.Now().UTC()}
	var err error
	if f.ledger, err = ledger.New(db, ledger.Config{Table: standintest.Table(t, db)}); err != nil {
		t.Fatal(err)
	}
	return f
}

func str(s string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

// dead makes a delivery dead in the ledger, with its message in the DLQ as
// the consumer leaves it.
func (f *fixture) dead(id, class, reason string) message.DeliveryKey {
	f.t.Helper()
	k := f.create(id)
	c, err := f.ledger.Claim(f.ctx, ledger.Claim{Key: k, Token: "tok-" + id, LeaseUntil: time.Now().Add(time.Minute), DueBy: time.Now()})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.ledger.DeadLetter(f.ctx, c, ledger.Failure{Class: failure.Class(class), Message: reason}); err != nil {
		f.t.Fatal(err)
	}
	f.toDLQ(f.body(id), map[string]types.MessageAttributeValue{
		deadletter.AttrErrorClass: str(class), deadletter.AttrReason: str(reason), deadletter.AttrDeliveryKey: str(k.String()),
		deadletter.AttrAttempts: {DataType: aws.String("Number"), StringValue: aws.String("1")}, deadletter.AttrSourceMessageID: str("src-" + id),
	})
	return k
}

func (f *fixture) create(id string) message.DeliveryKey {
	f.t.Helper()
	d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: f.now.Add(-time.Hour), ExpiresAt: f.now.Add(24 * time.Hour)}
	if err := f.ledger.Create(f.ctx, d); err != nil {
		f.t.Fatal(err)
	}
	return d.Key()
}

func (f *fixture) body(id string) string {
	b, err := message.Encode(message.Message{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: f.now.Add(-time.Hour)})
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func (f *fixture) toDLQ(body string, attrs map[string]types.MessageAttributeValue) {
	f.t.Helper()
	if _, err := f.sqs.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(f.q.DLQURL), MessageBody: aws.String(body), MessageAttributes: attrs}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) redriver(q any, mod func(*redrive.Config)) *redrive.Redriver {
	f.t.Helper()
	cfg := redrive.Config{Queue: f.sqs, DLQURL: f.q.DLQURL, TargetURL: f.q.WorkURL, Ledger: f.ledger, By: "ops@example", Rate: 1000}
	if w, ok := q.(*failingDelete); ok {
		cfg.Queue = w
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := redrive.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// depth returns a queue's visible and in-flight messages.
func (f *fixture) depth(url string) (visible, inFlight string) {
	f.t.Helper()
	out, err := f.sqs.GetQueueAttributes(f.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		f.t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"], out.Attributes["ApproximateNumberOfMessagesNotVisible"]
}

func (f *fixture) status(k message.DeliveryKey) ledger.Delivery {
	f.t.Helper()
	d, err := f.ledger.Get(f.ctx, k)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

// seedMix puts the kinds of DLQ message a review meets: dead deliveries, a
// poison body, a sent delivery's copy, and a message the queue's own
// redrive policy moved (no Nudge attributes) after the consumer crashed on
// it, its delivery still sending under a lapsed lease.
func (f *fixture) seedMix() (dead []message.DeliveryKey, live, sent message.DeliveryKey) {
	f.t.Helper()
	dead = append(dead, f.dead("rem-1", "rejected", "provider answered 400"), f.dead("rem-2", "rejected", "provider answered 400"),
		f.dead("rem-3", "exhausted", "attempts exhausted after 500"))
	f.toDLQ("not json at all", map[string]types.MessageAttributeValue{deadletter.AttrErrorClass: str("decode"), deadletter.AttrReason: str("message: not JSON")})
	sent = f.create("rem-4")
	c, _ := f.ledger.Claim(f.ctx, ledger.Claim{Key: sent, Token: "t", LeaseUntil: time.Now().Add(time.Minute), DueBy: time.Now()})
	if _, err := f.ledger.Complete(f.ctx, c, "r-4"); err != nil {
		f.t.Fatal(err)
	}
	f.toDLQ(f.body("rem-4"), map[string]types.MessageAttributeValue{deadletter.AttrErrorClass: str("exhausted"), deadletter.AttrDeliveryKey: str(sent.String())})
	f.toDLQ(f.body("rem-5"), nil) // moved by maxReceiveCount
	live = f.create("rem-5")
	if _, err := f.ledger.Claim(f.ctx, ledger.Claim{Key: live, Token: "t5", LeaseUntil: time.Now().Add(-time.Minute), DueBy: time.Now()}); err != nil {
		f.t.Fatal(err)
	}
	return dead, live, sent
}

// TestListReviewsWithoutConsumingOrHiding: every message is listed with its
// delivery, class, reason, attempts, age, ledger state and destination, and
// is visible again as soon as the list returns.
func TestListReviewsWithoutConsumingOrHiding(t *testing.T) {
	f := setup(t)
	f.seedMix()
	const hold = 5 * time.Second
	r := f.redriver(nil, func(c *redrive.Config) { c.ReviewHold = hold })
	letters, err := r.List(f.ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) < 6 {
		// A receive whose answer never arrived (fauxqs closes a kept-alive
		// connection now and then; the SDK sends the receive again) hid its
		// messages for the read's hold, as a lost answer does in SQS: the
		// list is short, not wrong. Once the hold has passed they are there.
		t.Logf("the list came back with %d of 6 (a receive's answer lost): listing again after the hold", len(letters))
		time.Sleep(hold + time.Second)
		if letters, err = r.List(f.ctx, 50); err != nil {
			t.Fatal(err)
		}
	}
	if len(letters) != 6 {
		t.Fatalf("listed %d, want 6", len(letters))
	}
	if v, inFlight := f.depth(f.q.DLQURL); v != "6" || inFlight != "0" {
		t.Fatalf("after the list the DLQ shows %s visible, %s in flight; want 6 and 0", v, inFlight)
	}
	by := map[string]redrive.Letter{}
	for _, l := range letters {
		by[l.DeliveryKey] = l
		if !strings.HasSuffix(f.q.WorkURL, l.Destination) || l.DeadLetteredAt.IsZero() || l.AgeSeconds < 0 {
			t.Errorf("letter %+v: destination or age missing", l)
		}
	}
	if l := by["rem-1:email:webhook"]; l.ErrorClass != "rejected" || l.Reason != "provider answered 400" || l.Attempts != 1 || l.Ledger != ledger.StatusDead || !l.Redrivable {
		t.Errorf("dead delivery: %+v", l)
	}
	if l := by[""]; l.ErrorClass != "decode" || l.Redrivable || !strings.Contains(l.Why, "not a delivery") {
		t.Errorf("poison: %+v", l)
	}
	if l := by["rem-4:email:webhook"]; l.Ledger != ledger.StatusSent || l.Redrivable || !strings.Contains(l.Why, "already sent") {
		t.Errorf("sent delivery's copy: %+v", l)
	}
	if l := by["rem-5:email:webhook"]; l.ErrorClass != "maxReceiveCount" || l.Ledger != ledger.StatusSending || !l.Redrivable {
		t.Errorf("moved by the redrive policy: %+v", l)
	}
	if _, err := r.List(f.ctx, 0); err == nil {
		t.Error("a limit of 0 was accepted")
	}
}

// TestRedriveMovesABoundedFilteredBatch: only what the filter and the bound
// allow is moved; each is marked in the ledger, sent with the same body and
// a redrive count, and gone from the DLQ; the rest stay, visible.
func TestRedriveMovesABoundedFilteredBatch(t *testing.T) {
	f := setup(t)
	_, live, _ := f.seedMix()
	r := f.redriver(nil, nil)
	sel, err := r.Select(f.ctx, redrive.Filter{Max: 1, Class: "rejected"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.Chosen) != 1 || sel.Scanned != 6 || len(sel.Passed) != 5 {
		t.Fatalf("chose %d of %d, passed %d", len(sel.Chosen), sel.Scanned, len(sel.Passed))
	}
	if v, inFlight := f.depth(f.q.DLQURL); v != "5" || inFlight != "1" {
		t.Fatalf("during review the DLQ shows %s visible, %s held; want 5 and 1", v, inFlight)
	}
	chosen := sel.Chosen[0]
	res, err := r.Move(f.ctx, sel, nil)
	if err != nil || res.Moved != 1 || !res.Outcomes[0].Marked {
		t.Fatalf("%+v %v", res, err)
	}
	k, _ := message.ParseDeliveryKey(chosen.DeliveryKey)
	d := f.status(k)
	if d.Status != ledger.StatusQueued || !strings.Contains(d.History[len(d.History)-1].Note, "redriven by ops@example") {
		t.Fatalf("ledger after the redrive: %+v", d)
	}
	out, err := f.sqs.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.q.WorkURL), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("work queue: %v %v", out, err)
	}
	m := out.Messages[0]
	if aws.ToString(m.Body) != f.body(k.ReminderID) || aws.ToString(m.MessageAttributes[deadletter.AttrRedrives].StringValue) != "1" ||
		aws.ToString(m.MessageAttributes[deadletter.AttrRedrivenBy].StringValue) != "ops@example" || aws.ToString(m.MessageAttributes[deadletter.AttrErrorClass].StringValue) != "rejected" {
		t.Fatalf("redriven message: body %s, attributes %v", aws.ToString(m.Body), m.MessageAttributes)
	}
	if v, inFlight := f.depth(f.q.DLQURL); v != "5" || inFlight != "0" {
		t.Fatalf("after the redrive the DLQ shows %s visible, %s in flight; want 5 and 0", v, inFlight)
	}
	// The other rejected delivery, and everything older than an hour: none.
	sel, err = r.Select(f.ctx, redrive.Filter{Max: 10, OlderThan: time.Hour})
	if err != nil || len(sel.Chosen) != 0 {
		t.Fatalf("older than an hour chose %d: %v", len(sel.Chosen), err)
	}
	later := f.redriver(nil, func(c *redrive.Config) { c.Clock = clock.NewFake(time.Now().Add(2 * time.Hour)) })
	sel, err = later.Select(f.ctx, redrive.Filter{Max: 10, OlderThan: time.Hour})
	if err != nil || len(sel.Chosen) != 3 { // rem-2 and rem-3, dead; rem-5, live
		t.Fatalf("two hours on, older than an hour chose %d: %v", len(sel.Chosen), err)
	}
	_ = later.Release(f.ctx, sel.Chosen)
	// The live delivery's message moves without a ledger mark.
	sel, err = r.Select(f.ctx, redrive.Filter{Max: 1, Class: "maxReceiveCount"})
	if err != nil || len(sel.Chosen) != 1 {
		t.Fatalf("chose %d: %v", len(sel.Chosen), err)
	}
	if res, err := r.Move(f.ctx, sel, nil); err != nil || res.Moved != 1 || res.Outcomes[0].Marked {
		t.Fatalf("%+v %v", res, err)
	}
	if d := f.status(live); d.Status != ledger.StatusSending {
		t.Fatalf("the live delivery was changed: %s", d.Status)
	}
}

// TestDryRunMovesNothing: a selection released (the CLI's --dry-run, or a
// declined confirmation) leaves the DLQ and the ledger as they were.
func TestDryRunMovesNothing(t *testing.T) {
	f := setup(t)
	dead, _, _ := f.seedMix()
	r := f.redriver(nil, nil)
	sel, err := r.Select(f.ctx, redrive.Filter{Max: 10})
	if err != nil || len(sel.Chosen) != 4 {
		t.Fatalf("chose %d: %v", len(sel.Chosen), err)
	}
	if err := r.Release(f.ctx, sel.Chosen); err != nil {
		t.Fatal(err)
	}
	if v, inFlight := f.depth(f.q.DLQURL); v != "6" || inFlight != "0" {
		t.Fatalf("DLQ %s visible, %s in flight; want 6 and 0", v, inFlight)
	}
	if v, inFlight := f.depth(f.q.WorkURL); v != "0" || inFlight != "0" {
		t.Fatalf("the work queue got %s messages", v)
	}
	for _, k := range dead {
		if d := f.status(k); d.Status != ledger.StatusDead {
			t.Fatalf("%s is %s after a dry run", k, d.Status)
		}
	}
}

// failingDelete is SQS whose DeleteMessage fails: a redrive interrupted
// between the send and the delete.
type failingDelete struct {
	*sqs.Client
	deletes atomic.Int32
}

func (f *failingDelete) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.deletes.Add(1)
	return nil, errors.New("connection reset")
}

// TestInterruptionBetweenSendAndDeleteDuplicatesButNeverLoses: the copy left
// in the DLQ is listed again; once the first copy has been delivered, the
// second redrive (with --include-settled) moves it, and its claim is
// refused as already sent: one delivery, never two.
func TestInterruptionBetweenSendAndDeleteDuplicatesButNeverLoses(t *testing.T) {
	f := setup(t)
	k := f.dead("rem-7", "rejected", "provider answered 400")
	broken := &failingDelete{Client: f.sqs}
	r := f.redriver(broken, func(c *redrive.Config) { c.SelectHold = time.Second })
	sel, err := r.Select(f.ctx, redrive.Filter{Max: 5})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Move(f.ctx, sel, nil)
	if err != nil || res.Failed != 1 || !strings.Contains(res.Outcomes[0].Problem, "not deleted from the DLQ") || broken.deletes.Load() != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if v, _ := f.depth(f.q.WorkURL); v != "1" {
		t.Fatalf("the work queue has %s messages, want the redriven one", v)
	}
	// The hold ends: the copy is back in the DLQ. (fauxqs updates its
	// counts only when someone receives, so look by listing.)
	time.Sleep(1100 * time.Millisecond)
	if letters, err := f.redriver(nil, nil).List(f.ctx, 10); err != nil || len(letters) != 1 || letters[0].DeliveryKey != k.String() {
		t.Fatalf("the DLQ holds %+v (%v), want the copy", letters, err)
	}
	// The consumer delivers the first copy.
	c, err := f.ledger.Claim(f.ctx, ledger.Claim{Key: k, Token: "consumer", LeaseUntil: time.Now().Add(time.Minute), DueBy: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.Complete(f.ctx, c, "r-7"); err != nil {
		t.Fatal(err)
	}
	// The copy is now settled: not chosen by default, moved with
	// --include-settled, and its claim is a duplicate.
	r = f.redriver(nil, nil)
	if sel, _ := r.Select(f.ctx, redrive.Filter{Max: 5}); len(sel.Chosen) != 0 || !strings.Contains(sel.Passed[0].Why, "already sent") {
		t.Fatalf("a sent delivery's copy was chosen: %+v", sel)
	}
	sel, err = r.Select(f.ctx, redrive.Filter{Max: 5, IncludeSettled: true})
	if err != nil || len(sel.Chosen) != 1 {
		t.Fatalf("%+v %v", sel, err)
	}
	if res, err := r.Move(f.ctx, sel, nil); err != nil || res.Moved != 1 || res.Outcomes[0].Marked {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := f.ledger.Claim(f.ctx, ledger.Claim{Key: k, Token: "again", LeaseUntil: time.Now().Add(time.Minute), DueBy: time.Now()}); !errors.Is(err, ledger.ErrAlreadySent) {
		t.Fatalf("the second copy's claim: %v, want ErrAlreadySent", err)
	}
	if v, inFlight := f.depth(f.q.DLQURL); v != "0" || inFlight != "0" {
		t.Fatalf("the DLQ still holds %s/%s", v, inFlight)
	}
}

// TestMoveStopsWhenInterrupted: a cancelled redrive stops between messages
// and leaves the rest in the DLQ, visible.
func TestMoveStopsWhenInterrupted(t *testing.T) {
	f := setup(t)
	for i := range 3 {
		f.dead(fmt.Sprintf("rem-2%d", i), "rejected", "provider answered 400")
	}
	r := f.redriver(nil, func(c *redrive.Config) { c.Rate = 1 })
	sel, err := r.Select(f.ctx, redrive.Filter{Max: 3})
	if err != nil || len(sel.Chosen) != 3 {
		t.Fatal(sel, err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	res, err := r.Move(ctx, sel, func(redrive.Outcome) { cancel() })
	if err == nil || res.Moved != 1 || !strings.Contains(err.Error(), "stopped after 1 of 3") {
		t.Fatalf("%+v %v", res, err)
	}
	if v, inFlight := f.depth(f.q.DLQURL); v != "2" || inFlight != "0" {
		t.Fatalf("the DLQ shows %s visible, %s in flight; want 2 and 0", v, inFlight)
	}
}

func TestNewRefusesNonsense(t *testing.T) {
	t.Parallel()
	base := redrive.Config{Queue: &sqs.Client{}, DLQURL: "https://sqs/1/nudge-dev-dlq", TargetURL: "https://sqs/1/nudge-dev-work"}
	for _, c := range []struct {
		mod  func(*redrive.Config)
		want string
	}{
		{func(c *redrive.Config) { c.TargetURL = c.DLQURL }, "is the DLQ itself"},
		{func(c *redrive.Config) { c.Rate = -1 }, "use 0.1 to 1000"},
		{func(c *redrive.Config) { c.DLQURL = "" }, "required"},
	} {
		cfg := base
		c.mod(&cfg)
		if _, err := redrive.New(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error with %q", err, c.want)
		}
	}
	r, _ := redrive.New(base)
	if _, err := r.Select(context.Background(), redrive.Filter{}); err == nil || !strings.Contains(err.Error(), "bounded batch") {
		t.Errorf("a redrive without --max: %v", err)
	}
}

// TestTwoCopiesOfOneDeliveryAreOneLetter: the consumer dead-lettered a
// delivery, failed to record it, and on the retry dead-lettered it again:
// the DLQ holds it twice. The review shows one delivery with two copies
// (the later one's reason and attempts); a redrive moves it once and
// removes both copies.
func TestTwoCopiesOfOneDeliveryAreOneLetter(t *testing.T) {
	f := setup(t)
	k := f.dead("rem-twice", "rejected", "provider answered 400")
	f.toDLQ(f.body("rem-twice"), map[string]types.MessageAttributeValue{
		deadletter.AttrErrorClass: str("rejected"), deadletter.AttrReason: str("provider answered 400 again"), deadletter.AttrDeliveryKey: str(k.String()),
		deadletter.AttrAttempts: {DataType: aws.String("Number"), StringValue: aws.String("2")}, deadletter.AttrSourceMessageID: str("src-rem-twice"),
	})
	f.dead("rem-once", "rejected", "provider answered 400")
	r := f.redriver(nil, nil)
	letters, err := r.List(f.ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 2 {
		t.Fatalf("listed %d letters, want 2 deliveries: %+v", len(letters), letters)
	}
	var twice redrive.Letter
	for _, l := range letters {
		if l.DeliveryKey == k.String() {
			twice = l
		} else if l.Copies != 1 {
			t.Errorf("%s: %d copies, want 1", l.DeliveryKey, l.Copies)
		}
	}
	if twice.Copies != 2 || twice.Attempts != 2 || twice.Reason != "provider answered 400 again" || !twice.Redrivable {
		t.Fatalf("the delivery dead-lettered twice: %+v; want one letter with 2 copies and the later reason", twice)
	}
	if v, inFlight := f.depth(f.q.DLQURL); v != "3" || inFlight != "0" {
		t.Fatalf("after the list the DLQ shows %s visible, %s in flight; want 3 and 0", v, inFlight)
	}
	// --max counts deliveries: two, though the DLQ holds three messages.
	sel, err := r.Select(f.ctx, redrive.Filter{Max: 2, Class: "rejected"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.Chosen) != 2 {
		t.Fatalf("chosen %+v, want both deliveries", sel.Chosen)
	}
	if res, err := r.Move(f.ctx, sel, nil); err != nil || res.Moved != 2 || res.Failed != 0 {
		t.Fatalf("move: %+v, %v", res, err)
	}
	work, _ := f.depth(f.q.WorkURL)
	dlq, _ := f.depth(f.q.DLQURL)
	if work != "2" || dlq != "0" || f.status(k).Status != ledger.StatusQueued {
		t.Fatalf("after the move: work queue %s, DLQ %s, ledger %s; want each delivery in the work queue once and no copy left", work, dlq, f.status(k).Status)
	}
}

// TestTheReviewPassesAPrimaryWhoseFallbackWasTaken: a dead delivery whose
// fallback was taken is listed as not redrivable, with why, and a
// selection passes it: the ledger would refuse it.
func TestTheReviewPassesAPrimaryWhoseFallbackWasTaken(t *testing.T) {
	f := setup(t)
	fb := ledger.Delivery{ReminderID: "rem-fb", Channel: "sms", Provider: "webhook", Status: ledger.StatusHeld, DueAt: f.now.Add(-time.Hour),
		ExpiresAt: f.now.Add(24 * time.Hour), FallbackOf: ledger.FallbackRef{Channel: "email", Provider: "webhook"}, FallbackWithin: time.Hour}
	primary := ledger.Delivery{ReminderID: "rem-fb", Channel: "email", Provider: "webhook", DueAt: f.now.Add(-time.Hour), ExpiresAt: f.now.Add(24 * time.Hour),
		Fallback: ledger.FallbackRef{Channel: "sms", Provider: "webhook"}, FallbackWithin: time.Hour}
	for _, d := range []ledger.Delivery{fb, primary} {
		if err := f.ledger.Create(f.ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	c, err := f.ledger.Claim(f.ctx, ledger.Claim{Key: primary.Key(), Token: "tok", LeaseUntil: time.Now().Add(time.Minute), DueBy: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := f.ledger.DeadLetter(f.ctx, c, ledger.Failure{Class: "rejected", Message: "provider answered 400"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ledger.TakeFallback(f.ctx, dead, "dead (rejected)"); err != nil {
		t.Fatal(err)
	}
	f.toDLQ(f.body("rem-fb"), map[string]types.MessageAttributeValue{
		deadletter.AttrErrorClass: str("rejected"), deadletter.AttrReason: str("provider answered 400"), deadletter.AttrDeliveryKey: str(primary.Key().String()),
		deadletter.AttrAttempts: {DataType: aws.String("Number"), StringValue: aws.String("1")}, deadletter.AttrSourceMessageID: str("src-fb"),
	})
	sel, err := f.redriver(nil, nil).Select(f.ctx, redrive.Filter{Max: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.Chosen) != 0 || len(sel.Passed) != 1 || sel.Passed[0].Redrivable || !strings.Contains(sel.Passed[0].Why, "its fallback rem-fb:sms:webhook was taken") {
		t.Fatalf("chosen %+v, passed %+v; want it passed, its fallback named", sel.Chosen, sel.Passed)
	}
	// With --include-settled it is moved, unmarked, for the consumer to
	// retire; the ledger keeps it dead.
	time.Sleep(time.Second) // the selection's hold on the passed letter
	r := f.redriver(nil, nil)
	for try := 0; try < 5 && (sel == nil || len(sel.Chosen) == 0); try++ {
		if sel, err = r.Select(f.ctx, redrive.Filter{Max: 5, IncludeSettled: true}); err != nil {
			t.Fatal(err)
		}
		if len(sel.Chosen) == 0 {
			time.Sleep(time.Second)
		}
	}
	res, err := r.Move(f.ctx, sel, nil)
	if err != nil || res.Moved != 1 || res.Outcomes[0].Marked {
		t.Fatalf("moved with --include-settled: %+v, %v; want it moved, unmarked", res, err)
	}
	if d, err := f.ledger.Get(f.ctx, primary.Key()); err != nil || d.Status != ledger.StatusDead {
		t.Fatalf("the primary after the move: %s, %v; want dead", d.Status, err)
	}
}

// TestSelectByReasonKeepsOneGroup: a filter by reason (a group of the
// review) chooses the messages dead-lettered with exactly that reason, and
// says of the others that their reason differs; the selection says when
// its hold ends, and the redriver names its queues.
func TestSelectByReasonKeepsOneGroup(t *testing.T) {
	f := setup(t)
	f.seedMix()
	f.dead("rem-6", "rejected", "provider answered 422")
	r := f.redriver(nil, func(c *redrive.Config) { c.SelectHold = time.Minute })
	before := time.Now()
	sel, err := r.Select(f.ctx, redrive.Filter{Max: 10, Class: "rejected", Reason: "provider answered 400"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Release(f.ctx, sel.Chosen) }()
	var chosen []string
	for _, l := range sel.Chosen {
		chosen = append(chosen, l.DeliveryKey)
	}
	if strings.Join(chosen, " ") != "rem-1:email:webhook rem-2:email:webhook" {
		t.Fatalf("chose %v; want rem-1 and rem-2, the two rejected with 400", chosen)
	}
	for _, l := range sel.Passed {
		if l.DeliveryKey == "rem-6:email:webhook" && l.Why != "another reason: provider answered 422" {
			t.Errorf("rem-6 passed with %q", l.Why)
		}
	}
	if sel.Until.Before(before.Add(time.Minute)) || sel.Until.After(time.Now().Add(time.Minute)) {
		t.Errorf("held until %v; want a minute after the read began (%v)", sel.Until, before)
	}
	if !strings.HasSuffix(f.q.DLQURL, "/"+r.DLQ()) || !strings.HasSuffix(f.q.WorkURL, "/"+r.Target()) {
		t.Errorf("queues %q and %q; want the names of %s and %s", r.DLQ(), r.Target(), f.q.DLQURL, f.q.WorkURL)
	}
}

// TestARedriveSendsEachMessageToItsProvidersQueue: a paced provider's
// dead letter goes back to its own work queue, named as its destination
// in the review; nothing reaches the default work queue.
func TestARedriveSendsEachMessageToItsProvidersQueue(t *testing.T) {
	f := setup(t)
	own, err := f.sqs.CreateQueue(f.ctx, &sqs.CreateQueueInput{QueueName: aws.String(standintest.Name("paced") + "-webhook")})
	if err != nil {
		t.Fatal(err)
	}
	routes, err := envelope.ParseRoutes(f.q.WorkURL, "webhook="+aws.ToString(own.QueueUrl))
	if err != nil {
		t.Fatal(err)
	}
	k := f.dead("rem-1", "rejected", "provider answered 400")
	r := f.redriver(nil, func(c *redrive.Config) { c.Routes = routes })
	sel, err := r.Select(f.ctx, redrive.Filter{Max: 10})
	if err != nil || len(sel.Chosen) != 1 {
		t.Fatalf("chose %d: %v", len(sel.Chosen), err)
	}
	if got, want := sel.Chosen[0].Destination, envelope.QueueName(aws.ToString(own.QueueUrl)); got != want {
		t.Fatalf("destination %s, want the provider's queue %s", got, want)
	}
	if res, err := r.Move(f.ctx, sel, nil); err != nil || res.Moved != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if v, _ := f.depth(f.q.WorkURL); v != "0" {
		t.Fatalf("the default work queue holds %s", v)
	}
	out, err := f.sqs.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: own.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != f.body(k.ReminderID) {
		t.Fatalf("the provider's queue: %v, %v", out, err)
	}
}
