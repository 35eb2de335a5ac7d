package enqueue_test

// The short-notice hand-off: a store with a HandOff publishes a delivery
// due within the lookahead at once; the cursor passes its marked entry
// without a second message; a hand-off lost between the write and the
// publish is repaired; one SQS refuses goes back to the calendar; a
// reschedule of a delivery handed off early is handed off again at its new
// time, and the cursor still publishes nothing for it.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// withHandOff gives the bundle's store a short-notice hand-off through
// its recording publisher (hand, so that a test can tell the intake's
// messages from the enqueue's).
func (b *bundle) withHandOff(t *testing.T) *recorder {
	t.Helper()
	hand := &recorder{next: b.pub.next, clk: b.clk}
	h, err := enqueue.NewHandOff(enqueue.HandOffConfig{Queue: hand, QueueURL: b.q.WorkURL, Clock: b.clk, Logger: b.cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	if b.store, err = schedule.New(schedule.Config{Ledger: b.ledger, Clock: b.clk, HandOff: h, Logger: b.cfg.Logger}); err != nil {
		t.Fatal(err)
	}
	return hand
}

// TestAShortNoticeDeliveryIsHandedOffOnceByItsWriter: due now, in 10 s and
// in 14 minutes, each delivery is published by the create itself, delayed
// until due; one due in 20 minutes waits for the cursor. The enqueue's
// runs, before and after the cursor passes the entries, publish nothing
// more for them (Passed), and the one beyond the lookahead once.
func TestAShortNoticeDeliveryIsHandedOffOnceByItsWriter(t *testing.T) {
	for _, local := range []bool{false, true} {
		name := map[bool]string{false: "memory", true: "dynamodb"}[local]
		t.Run(name, func(t *testing.T) {
			var b *bundle
			if local {
				b = setupLocal(t, 2)
			} else {
				b = setup(t, 2)
			}
			hand := b.withHandOff(t)
			e := b.enqueuer(t, nil) // settle 15 s, lookahead 15 min
			now := b.schedule(t, "rem-now", t0)
			soon := b.schedule(t, "rem-10s", t0.Add(10*time.Second))
			edge := b.schedule(t, "rem-14m", t0.Add(14*time.Minute))
			later := b.schedule(t, "rem-20m", t0.Add(20*time.Minute))
			got := hand.take()
			if want := map[message.DeliveryKey]int{now: 1, soon: 1, edge: 1}; !equalCounts(keysOf(got), want) {
				t.Fatalf("the creates published %v; want %v", keysOf(got), want)
			}
			for _, p := range got {
				want := map[message.DeliveryKey]int32{now: 0, soon: 10, edge: 14 * 60}[p.Key]
				if p.Delay != want {
					t.Errorf("%s published with delay %d s; want %d", p.Key, p.Delay, want)
				}
			}
			byCursor := 0
			for _, step := range []time.Duration{0, 20 * time.Second, 6 * time.Minute} {
				b.clk.Advance(step)
				rep := b.run(t, e)
				pub := keysOf(b.pub.take())
				if pub[now]+pub[soon]+pub[edge] != 0 {
					t.Fatalf("after %v the enqueue published %v again (report %+v)", step, pub, rep)
				}
				byCursor += pub[later]
			}
			if byCursor != 1 {
				t.Fatalf("the enqueue published the delivery beyond the lookahead %d times; want once", byCursor)
			}
			// The cursor has passed all four by now (none is yet overdue enough for
			// a repair): three marked, one published.
			if pub := hand.take(); len(pub) != 0 {
				t.Fatalf("the hand-off published again: %v", pub)
			}
			d := b.status(t, later)
			if h, err := b.ledger.HandedOff(b.ctx, d); err != nil || !h.Done {
				t.Fatalf("the delivery beyond the lookahead: %+v, %v; want the cursor to have handed it off", h, err)
			}
		})
	}
}

func equalCounts(a, b map[message.DeliveryKey]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, n := range a {
		if b[k] != n {
			return false
		}
	}
	return true
}

// TestTheCursorPassesAHandedOffEntryAndCountsIt: the report says how many
// entries the cursor passed because their writer had published them.
func TestTheCursorPassesAHandedOffEntryAndCountsIt(t *testing.T) {
	b := setup(t, 1)
	b.withHandOff(t)
	e := b.enqueuer(t, nil)
	b.schedule(t, "rem-a", t0.Add(time.Minute))
	b.schedule(t, "rem-b", t0.Add(2*time.Minute))
	b.clk.Advance(time.Minute)
	if rep := b.run(t, e); rep.Passed != 2 || rep.Enqueued != 0 {
		t.Fatalf("report %+v; want 2 passed, none enqueued", rep)
	}
	if rep := b.run(t, e); rep.Passed != 0 {
		t.Fatalf("a second run: %+v; want nothing passed twice", rep)
	}
}

// TestAHandOffLostBetweenTheWriteAndThePublishIsRepaired: the intake dies
// after the write (the publish never happens, or SQS loses the message):
// the cursor passes the marked entry, and the overdue scan republishes it
// once it is RepairAfter past due, as any lost hand-off.
func TestAHandOffLostBetweenTheWriteAndThePublishIsRepaired(t *testing.T) {
	b := setup(t, 2)
	hand := b.withHandOff(t)
	hand.drop = true // "accepted", never delivered: as a crash before the publish
	e := b.enqueuer(t, nil)
	lost := b.schedule(t, "rem-lost", t0.Add(5*time.Second))
	hand.take()
	b.clk.Advance(time.Minute)
	if rep := b.run(t, e); rep.Passed != 1 || rep.Enqueued != 0 {
		t.Fatalf("report %+v; want the entry passed", rep)
	}
	b.clk.Advance(9 * time.Minute) // under 10 min past due
	if rep := b.run(t, e); rep.Repaired != 0 {
		t.Fatalf("repaired too soon: %+v", rep)
	}
	b.clk.Advance(2 * time.Minute)
	rep := b.run(t, e)
	got := b.pub.take()
	if rep.Repaired != 1 || len(got) != 1 || got[0].Key != lost {
		t.Fatalf("report %+v, published %+v; want the lost hand-off repaired once", rep, got)
	}
	if d := b.status(t, lost); d.Status != ledger.StatusQueued {
		t.Fatalf("the repaired delivery is %s; want queued", d.Status)
	}
}

// TestAHandOffSQSRefusesGoesBackToTheCalendar: when the publish fails, the
// store gives the delivery back (Release): unmarked, the cursor publishes
// it at its next run, on time, without waiting for a repair.
func TestAHandOffSQSRefusesGoesBackToTheCalendar(t *testing.T) {
	b := setup(t, 2)
	hand := b.withHandOff(t)
	hand.fail = func(message.DeliveryKey) bool { return true }
	e := b.enqueuer(t, nil)
	k := b.schedule(t, "rem-refused", t0.Add(30*time.Second))
	if got := hand.take(); len(got) != 0 {
		t.Fatalf("published %v despite the refusal", got)
	}
	d := b.status(t, k)
	if d.Index == nil || d.Index.HandedOff || d.Status != ledger.StatusPending {
		t.Fatalf("after a refused hand-off the delivery is %s at %+v; want pending, unmarked", d.Status, d.Index)
	}
	b.clk.Advance(20 * time.Second) // past the settle
	rep := b.run(t, e)
	got := b.pub.take()
	if rep.Enqueued != 1 || len(got) != 1 || got[0].Key != k || got[0].Delay != 10 {
		t.Fatalf("report %+v, published %+v; want the cursor to publish it with 10 s to go", rep, got)
	}
}

// TestAHeldFallbackIsNotHandedOff: only the primary of a short-notice
// reminder is published; its held fallback waits to be taken.
func TestAHeldFallbackIsNotHandedOff(t *testing.T) {
	b := setup(t, 2)
	hand := b.withHandOff(t)
	r := schedule.Reminder{ID: "rem-fb", AccountRef: "acct-1", DueAt: t0, ExpiresAt: t0.Add(time.Hour),
		Deliveries: []schedule.Delivery{{Channel: "email", Provider: "webhook", RecipientRef: "acct-1/c", TemplateRef: "t",
			Fallback: &schedule.Fallback{Channel: "sms", Provider: "webhook", RecipientRef: "acct-1/c", TemplateRef: "t"}}}}
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	got := hand.take()
	if len(got) != 1 || got[0].Key != r.Key(r.Deliveries[0]) {
		t.Fatalf("published %+v; want the primary alone", got)
	}
}

// TestARescheduleOfAnEarlyHandOff: a reminder handed off at creation (due
// in 30 s) is moved an hour on, then back to 40 s from now. The move out
// of the lookahead is the cursor's to publish (once, at its publish time);
// the move back in is handed off again by the reschedule. The message of
// the first hand-off, which arrives at the old time, is refused by its
// claim (not due) and deferred, so the delivery is sent at its new time.
func TestARescheduleOfAnEarlyHandOff(t *testing.T) {
	b := setup(t, 2)
	hand := b.withHandOff(t)
	e := b.enqueuer(t, nil)
	k := b.schedule(t, "rem-move", t0.Add(30*time.Second))
	if got := hand.take(); len(got) != 1 {
		t.Fatalf("published %+v at creation", got)
	}
	out, err := b.store.Reschedule(b.ctx, "rem-move", schedule.Times{DueAt: schedule.FormatTime(t0.Add(time.Hour))}, "later")
	if err != nil || out.Refused() {
		t.Fatal(out, err)
	}
	if got := hand.take(); len(got) != 0 {
		t.Fatalf("a move beyond the lookahead was handed off: %+v", got)
	}
	// The old message arrives at the old time: its claim is refused.
	b.clk.Advance(30 * time.Second)
	if _, err := b.ledger.Claim(b.ctx, ledger.Claim{Key: k, Token: "old", LeaseUntil: b.clk.Now().Add(time.Minute), DueBy: b.clk.Now()}); !errors.Is(err, ledger.ErrNotDue) {
		t.Fatalf("the old message's claim: %v; want not due", err)
	}
	out, err = b.store.Reschedule(b.ctx, "rem-move", schedule.Times{DueAt: schedule.FormatTime(b.clk.Now().Add(40 * time.Second))}, "sooner")
	if err != nil || out.Refused() {
		t.Fatal(out, err)
	}
	got := hand.take()
	if len(got) != 1 || got[0].Key != k || got[0].Delay != 40 {
		t.Fatalf("the move back within the lookahead published %+v; want one message delayed 40 s", got)
	}
	for range 3 {
		b.clk.Advance(30 * time.Second)
		if rep := b.run(t, e); len(b.pub.take()) != 0 {
			t.Fatalf("the enqueue published the rescheduled delivery again: %+v", rep)
		}
	}
	if _, err := b.ledger.Claim(b.ctx, ledger.Claim{Key: k, Token: "new", LeaseUntil: b.clk.Now().Add(time.Minute), DueBy: b.clk.Now()}); err != nil {
		t.Fatalf("the new message's claim at its time: %v", err)
	}
}

// TestARetriedCreatePublishesAHandOffItsWriterMayHaveLost: the caller's
// retry of a create whose writer died after the write (the publish lost)
// publishes it again, sooner than the repair; once a consumer has claimed
// it, a retry publishes nothing.
func TestARetriedCreatePublishesAHandOffItsWriterMayHaveLost(t *testing.T) {
	b := setup(t, 2)
	hand := b.withHandOff(t)
	hand.drop = true // the first create's publish is lost
	k := b.schedule(t, "rem-retry", t0.Add(20*time.Second))
	hand.take()
	hand.drop = false
	b.clk.Advance(5 * time.Second)
	b.schedule(t, "rem-retry", t0.Add(20*time.Second)) // the caller's retry
	if got := hand.take(); len(got) != 1 || got[0].Key != k || got[0].Delay != 15 {
		t.Fatalf("the retry published %+v; want the delivery again, delayed 15 s", got)
	}
	if _, err := b.ledger.Claim(b.ctx, ledger.Claim{Key: k, Token: "c", LeaseUntil: b.clk.Now().Add(time.Minute), DueBy: t0.Add(20 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	b.schedule(t, "rem-retry", t0.Add(20*time.Second))
	if got := hand.take(); len(got) != 0 {
		t.Fatalf("a retry after the claim published %+v", got)
	}
}

// TestAnOperatorsHandOffAllowsForItsClock: a writer whose clock may be a
// minute behind publishes a minute early (the consumer defers what comes
// early), never late.
func TestAnOperatorsHandOffAllowsForItsClock(t *testing.T) {
	b := setup(t, 2)
	rec := &recorder{clk: b.clk}
	h, err := enqueue.NewHandOff(enqueue.HandOffConfig{Queue: rec, QueueURL: b.q.WorkURL, Clock: b.clk, ClockSkew: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if b.store, err = schedule.New(schedule.Config{Ledger: b.ledger, Clock: b.clk, HandOff: h}); err != nil {
		t.Fatal(err)
	}
	b.schedule(t, "rem-op", t0.Add(3*time.Minute))
	b.schedule(t, "rem-op-now", t0.Add(30*time.Second))
	got := map[string]int32{}
	for _, p := range rec.take() {
		got[p.Key.ReminderID] = p.Delay
	}
	if got["rem-op"] != 120 || got["rem-op-now"] != 0 || len(got) != 2 {
		t.Fatalf("delays %v; want 120 s and 0 s (a minute early, at most)", got)
	}
}

// TestARetriedRescheduleRepublishesAMoveItsWriterMayHaveLost: a reschedule
// into the lookahead whose publish was lost (the writer died after the
// move) is published by the caller's retry of the same reschedule.
func TestARetriedRescheduleRepublishesAMoveItsWriterMayHaveLost(t *testing.T) {
	b := setup(t, 2)
	hand := b.withHandOff(t)
	k := b.schedule(t, "rem-rs", t0.Add(time.Hour))
	to := schedule.Times{DueAt: schedule.FormatTime(t0.Add(30 * time.Second))}
	hand.drop = true
	if out, err := b.store.Reschedule(b.ctx, "rem-rs", to, ""); err != nil || out.Refused() {
		t.Fatal(out, err)
	}
	hand.take()
	hand.drop = false
	if out, err := b.store.Reschedule(b.ctx, "rem-rs", to, ""); err != nil || out.Refused() {
		t.Fatal(out, err)
	}
	if got := hand.take(); len(got) != 1 || got[0].Key != k || got[0].Delay != 30 {
		t.Fatalf("the retry published %+v; want the moved delivery, delayed 30 s", got)
	}
}

// depths answers a queue's depth by URL.
type depths map[string]int

func (d depths) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"ApproximateNumberOfMessages": fmt.Sprint(d[aws.ToString(in.QueueUrl)])}}, nil
}

// TestNoRepairBehindAProvidersBacklog: a delivery of a provider whose own
// queue holds a backlog is waiting, not lost: past RepairAfter it is not
// republished while the backlog lasts (a copy would lengthen it and spend
// a turn of a paced provider's rate), and is once the queue drains. A
// delivery of a provider without its own queue is repaired as before.
func TestNoRepairBehindAProvidersBacklog(t *testing.T) {
	b := setup(t, 2)
	q := depths{"https://sqs/work-ses": 5000}
	e := b.enqueuer(t, func(c *enqueue.Config) {
		c.Routes = envelope.Routes{Default: b.q.WorkURL, ByProvider: map[string]string{"ses": "https://sqs/work-ses"}}
		c.Depths = q
	})
	r := schedule.Reminder{ID: "rem-ses", AccountRef: "acct-1", DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour),
		Deliveries: []schedule.Delivery{{Channel: "email", Provider: "ses", RecipientRef: "r", TemplateRef: "t", Address: "a@example.com"}}}
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	web := b.schedule(t, "rem-web", t0)
	b.clk.Advance(time.Minute)
	b.run(t, e) // both handed off
	b.pub.take()
	b.clk.Advance(11 * time.Minute)
	rep := b.run(t, e)
	got := keysOf(b.pub.take())
	if rep.Repaired != 1 || got[web] != 1 || rep.RepairsDeferred != 1 {
		t.Fatalf("behind the backlog: %+v, published %v; want the webhook's repaired and the e-mail deferred", rep, got)
	}
	q["https://sqs/work-ses"] = 3
	b.clk.Advance(time.Minute)
	rep = b.run(t, e)
	if got := b.pub.take(); rep.Repaired != 1 || len(got) != 1 || got[0].Key.ReminderID != "rem-ses" {
		t.Fatalf("after the backlog: %+v, published %+v; want the e-mail repaired", rep, got)
	}
}

// TestARunBegunTooCloseToItsDeadlineAnswersCut: an invocation that begins
// with less time left than the cut-off margin (a late start; locally, the
// runtime's init counted against it) does nothing and answers cut, not a
// failure: the next tick resumes from the cursors.
func TestARunBegunTooCloseToItsDeadlineAnswersCut(t *testing.T) {
	b := setup(t, 2)
	e := b.enqueuer(t, nil) // cut-off margin 3 s
	k := b.schedule(t, "rem-late-start", t0.Add(20*time.Minute))
	b.clk.Advance(10 * time.Minute)
	// wall clock: the invocation's deadline is Lambda's
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rep, err := e.Run(ctx)
	if err != nil || !rep.Cut || len(b.pub.take()) != 0 {
		t.Fatalf("report %+v, %v; want cut, nothing published, no error", rep, err)
	}
	if rep := b.run(t, e); rep.Enqueued != 1 {
		t.Fatalf("the next run: %+v; want the delivery handed off (%s)", rep, k)
	}
}
