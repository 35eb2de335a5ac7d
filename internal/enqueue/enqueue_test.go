package enqueue_test

// The enqueue's logic on the in-memory ledger with a fake clock (setup),
// and what depends on DynamoDB itself (its consumed capacity, the SDK's
// handling of a stalled request, the whole path to a real queue) against
// DynamoDB Local and fauxqs (setupLocal). A recording publisher shows what
// each run published and with which delay.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/awsclient"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// published is one message a run sent.
type published struct {
	Key   message.DeliveryKey
	Delay int32
	At    time.Time
	// Group and DedupID are the FIFO message group and deduplication id.
	Group, DedupID string
}

// recorder records what went out, and publishes it through the real queue
// if there is one (next).
// fail, if set, decides per entry whether SQS "refuses" it; drop sends
// nothing yet reports success (a message lost in transit); onCall runs
// before each call.
type recorder struct {
	next   enqueue.Publisher
	clk    clock.Clock
	fail   func(message.DeliveryKey) bool
	drop   bool
	onCall func()

	mu   sync.Mutex
	sent []published
	// queues are the queues each delivery was published to, in order.
	queues map[message.DeliveryKey][]string
}

func (r *recorder) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if r.onCall != nil {
		r.onCall()
	}
	out := &sqs.SendMessageBatchOutput{}
	var pass []types.SendMessageBatchRequestEntry
	for _, e := range in.Entries {
		m, err := message.Decode([]byte(aws.ToString(e.MessageBody)))
		if err != nil {
			return nil, fmt.Errorf("enqueue published a body the consumer cannot read: %w", err)
		}
		if r.fail != nil && r.fail(m.Key()) {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), SenderFault: false})
			continue
		}
		r.mu.Lock()
		r.sent = append(r.sent, published{Key: m.Key(), Delay: e.DelaySeconds, At: r.clk.Now(),
			Group: aws.ToString(e.MessageGroupId), DedupID: aws.ToString(e.MessageDeduplicationId)})
		if r.queues == nil {
			r.queues = map[message.DeliveryKey][]string{}
		}
		r.queues[m.Key()] = append(r.queues[m.Key()], aws.ToString(in.QueueUrl))
		r.mu.Unlock()
		pass = append(pass, e)
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
	}
	if len(pass) == 0 || r.drop || r.next == nil {
		return out, nil
	}
	in.Entries = pass
	real, err := r.next.SendMessageBatch(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	real.Failed = append(real.Failed, out.Failed...)
	return real, nil
}

func (r *recorder) take() []published {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sent
	r.sent = nil
	return s
}

// bundleLedger is what the tests ask of the ledger.
type bundleLedger interface {
	enqueue.Ledger
	schedule.Ledger
	Get(ctx context.Context, key message.DeliveryKey) (ledger.Delivery, error)
	Claim(ctx context.Context, c ledger.Claim) (ledger.Delivery, error)
	Complete(ctx context.Context, d ledger.Delivery, receipt string) (ledger.Delivery, error)
	HandedOff(ctx context.Context, d ledger.Delivery) (ledger.HandOff, error)
}

type bundle struct {
	ctx    context.Context
	clk    *clock.Fake
	ledger bundleLedger
	mem    *ledger.Memory // setup's ledger
	dynamo *ledger.Ledger // setupLocal's ledger, over DynamoDB Local
	db     *dynamodb.Client
	sqs    *sqs.Client
	q      standintest.Queues
	store  *schedule.Store
	pub    *recorder
	logs   *bytes.Buffer
	logMu  *sync.Mutex
	cfg    enqueue.Config
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// ledgerOn is a ledger over the local bundle's table through api.
func (b *bundle) ledgerOn(t *testing.T, api ledger.API) *ledger.Ledger {
	t.Helper()
	l, err := ledger.New(api, ledger.Config{Table: b.dynamo.Table(), Clock: b.clk, Shards: b.cfg.Shards})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// setup is a bundle on the in-memory ledger, publishing nowhere.
func setup(t *testing.T, shards int) *bundle {
	t.Helper()
	t.Parallel()
	b := &bundle{ctx: context.Background(), clk: clock.NewFake(t0), logs: &bytes.Buffer{}, logMu: &sync.Mutex{},
		q: standintest.Queues{WorkURL: "https://sqs.eu-west-1.amazonaws.com/000000000000/work"}}
	var err error
	if b.mem, err = ledger.NewMemory(ledger.MemoryConfig{Clock: b.clk, Shards: shards}); err != nil {
		t.Fatal(err)
	}
	b.ledger = b.mem
	b.finish(t, shards)
	return b
}

// setupLocal is a bundle on DynamoDB Local, publishing to fauxqs.
func setupLocal(t *testing.T, shards int) *bundle {
	t.Helper()
	t.Parallel()
	cfg := standintest.AWSConfig(t)
	b := &bundle{ctx: context.Background(), clk: clock.NewFake(t0), db: awsclient.DynamoDB(cfg), sqs: awsclient.SQS(cfg), logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	b.q = standintest.QueuePair(t, b.sqs, 30*time.Second, 10)
	var err error
	if b.dynamo, err = ledger.New(b.db, ledger.Config{Table: standintest.Table(t, b.db), Clock: b.clk, Shards: shards}); err != nil {
		t.Fatal(err)
	}
	b.ledger = b.dynamo
	b.finish(t, shards)
	return b
}

func (b *bundle) finish(t *testing.T, shards int) {
	t.Helper()
	var err error
	b.store, err = schedule.New(schedule.Config{Ledger: b.ledger, Clock: b.clk})
	if err != nil {
		t.Fatal(err)
	}
	var next enqueue.Publisher
	if b.sqs != nil {
		next = b.sqs
	}
	b.pub = &recorder{next: next, clk: b.clk}
	b.cfg = enqueue.Config{
		Ledger: b.ledger, Queue: b.pub, QueueURL: b.q.WorkURL, Shards: shards, Clock: b.clk,
		Logger: slog.New(slog.NewJSONHandler(lockedWriter{b.logMu, b.logs}, nil)),
	}
	t.Cleanup(func() {
		if t.Failed() {
			b.logMu.Lock()
			t.Logf("logs:\n%s", b.logs.String())
			b.logMu.Unlock()
		}
	})
}

func (b *bundle) enqueuer(t *testing.T, edit func(*enqueue.Config)) *enqueue.Enqueuer {
	t.Helper()
	cfg := b.cfg
	if edit != nil {
		edit(&cfg)
	}
	e, err := enqueue.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (b *bundle) run(t *testing.T, e *enqueue.Enqueuer) enqueue.Report {
	t.Helper()
	rep, err := e.Run(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// schedule creates reminder id with one email delivery due at due.
func (b *bundle) schedule(t *testing.T, id string, due time.Time, expires ...time.Time) message.DeliveryKey {
	t.Helper()
	r := schedule.Reminder{ID: id, AccountRef: "acct-1", DueAt: due, ExpiresAt: due.Add(24 * time.Hour),
		Deliveries: []schedule.Delivery{{Channel: "email", Provider: "webhook", RecipientRef: "acct-1/contact-1", TemplateRef: "t-1"}}}
	if len(expires) > 0 {
		r.ExpiresAt = expires[0]
	}
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	return r.Key(r.Deliveries[0])
}

func (b *bundle) status(t *testing.T, k message.DeliveryKey) ledger.Delivery {
	t.Helper()
	d, err := b.ledger.Get(b.ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func keysOf(ps []published) map[message.DeliveryKey]int {
	m := map[message.DeliveryKey]int{}
	for _, p := range ps {
		m[p.Key]++
	}
	return m
}

// TestFIFOHandOffIsGroupedAndDeduplicatedNotDelayed: on a FIFO queue a
// hand-off carries no delay (the consumer defers an early one with its
// visibility), the reminder as its group, and as deduplication id the
// SHA-256 of "key#publishAt" (here computed with sha256sum).
func TestFIFOHandOffIsGroupedAndDeduplicatedNotDelayed(t *testing.T) {
	b := setup(t, 1)
	e := b.enqueuer(t, func(c *enqueue.Config) { c.QueueURL += ".fifo" })
	k := b.schedule(t, "rem-fifo", t0.Add(10*time.Minute))
	if at := b.status(t, k).Index.PublishAt; !at.Equal(t0) {
		t.Fatalf("publish time %s, want %s (written at t0, due within the lookahead)", at, t0)
	}
	b.clk.Advance(time.Minute)
	b.run(t, e)
	want := published{Key: k, At: b.clk.Now(), Group: "rem-fifo", DedupID: "69ba9f58ddef98726437b91724dfeeb14d53145979911112e4bd6fa6c75a9a42"}
	if got := b.pub.take(); len(got) != 1 || got[0] != want {
		t.Fatalf("published %+v, want %+v", got, want)
	}
}

// TestEachDeliveryGoesToItsProvidersQueue: a paced provider's deliveries
// are handed off to its own work queue, the others' to the default, in
// batches of one queue each; the repair publishes to the same queues.
func TestEachDeliveryGoesToItsProvidersQueue(t *testing.T) {
	b := setup(t, 1)
	routes, err := envelope.ParseRoutes(b.q.WorkURL, "ses="+b.q.WorkURL+"-ses")
	if err != nil {
		t.Fatal(err)
	}
	e := b.enqueuer(t, func(c *enqueue.Config) { c.Routes = routes })
	var want = map[message.DeliveryKey]string{}
	for i := range 12 {
		p := []string{"webhook", "ses"}[i%2]
		r := schedule.Reminder{ID: fmt.Sprintf("rem-%d", i), AccountRef: "acct-1", DueAt: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Hour),
			Deliveries: []schedule.Delivery{{Channel: "email", Provider: p, RecipientRef: "acct-1/contact-1", TemplateRef: "t-1"}}}
		if _, err := b.store.Create(b.ctx, r); err != nil {
			t.Fatal(err)
		}
		want[r.Key(r.Deliveries[0])] = routes.For(p)
	}
	b.clk.Advance(time.Minute)
	if rep := b.run(t, e); rep.Enqueued != 12 {
		t.Fatalf("enqueued %d, want 12", rep.Enqueued)
	}
	for k, q := range want {
		if got := b.pub.queues[k]; len(got) != 1 || got[0] != q {
			t.Errorf("%s published to %v, want %s", k, got, q)
		}
	}
}

func TestDueBoundariesLookaheadAndDelay(t *testing.T) {
	b := setup(t, 2)
	e := b.enqueuer(t, nil) // settle 15s, lookahead 15m
	in5 := b.schedule(t, "rem-in5m", t0.Add(5*time.Minute))
	in15 := b.schedule(t, "rem-in15m", t0.Add(15*time.Minute))
	in16 := b.schedule(t, "rem-in16m", t0.Add(16*time.Minute))
	in2h := b.schedule(t, "rem-in2h", t0.Add(2*time.Hour))

	// Just before the settle time nothing written at t0 is read.
	b.clk.Advance(15*time.Second - time.Millisecond)
	if rep := b.run(t, e); rep.Enqueued != 0 {
		t.Fatalf("run at t0+15s-1ms enqueued %d, want 0", rep.Enqueued)
	}
	// At exactly the settle time both within the lookahead go, delayed
	// until due; the one due in 16 minutes does not.
	b.clk.Advance(time.Millisecond)
	rep := b.run(t, e)
	got := b.pub.take()
	if rep.Enqueued != 2 || len(got) != 2 || !rep.Caught || rep.Cut {
		t.Fatalf("report %+v, published %+v", rep, got)
	}
	delays := map[message.DeliveryKey]int32{}
	for _, p := range got {
		delays[p.Key] = p.Delay
	}
	if delays[in5] != 285 || delays[in15] != 885 {
		t.Fatalf("delays = %v; want 285s and 885s (due minus now)", delays)
	}
	// A second run at the same time publishes nothing again.
	if rep := b.run(t, e); rep.Enqueued != 0 {
		t.Fatalf("second run enqueued %d", rep.Enqueued)
	}
	// A minute later the 16-minute one comes into the lookahead.
	b.clk.Advance(time.Minute)
	b.run(t, e)
	got = b.pub.take()
	if len(got) != 1 || got[0].Key != in16 || got[0].Delay != 885 {
		t.Fatalf("published %+v, want %s with 885s", got, in16)
	}
	if d := b.status(t, in2h); d.Status != ledger.StatusPending {
		t.Fatalf("far delivery = %s", d.Status)
	}
}

func TestReminderScheduledBehindTheCursorIsPublishedOnTime(t *testing.T) {
	b := setup(t, 1)
	e := b.enqueuer(t, nil)
	b.schedule(t, "rem-early", t0.Add(10*time.Minute))
	b.clk.Advance(time.Minute)
	b.run(t, e) // the cursor is now past everything published at t0
	b.pub.take()
	// Scheduled at t0+1m, due at t0+3m: inside the window already passed.
	late := b.schedule(t, "rem-late", t0.Add(3*time.Minute))
	b.clk.Advance(20 * time.Second)
	b.run(t, e)
	got := b.pub.take()
	if len(got) != 1 || got[0].Key != late || got[0].Delay != 100 {
		t.Fatalf("published %+v, want %s delayed 100s until due", got, late)
	}
}

func TestDeliveriesSpreadOverShardsAndEachIsPublishedOnce(t *testing.T) {
	b := setup(t, 8)
	for i := range 400 {
		b.schedule(t, fmt.Sprintf("rem-%04d", i), t0)
	}
	b.clk.Advance(time.Minute)
	e := b.enqueuer(t, nil)
	rep := b.run(t, e)
	got := keysOf(b.pub.take())
	if rep.Enqueued != 400 || len(got) != 400 {
		t.Fatalf("report %+v, %d distinct published", rep, len(got))
	}
	for k, n := range got {
		if n != 1 {
			t.Fatalf("%s published %d times", k, n)
		}
	}
	for shard := range 8 {
		cur, err := b.ledger.Cursor(b.ctx, shard)
		if err != nil || cur.Pos == "" {
			t.Fatalf("shard %d cursor %q, %v: a shard received nothing", shard, cur.Pos, err)
		}
	}
}

func TestFailedPublishIsRetriedByTheNextRun(t *testing.T) {
	b := setup(t, 1)
	e := b.enqueuer(t, func(c *enqueue.Config) { c.PublishAttempts = 2 })
	ok := b.schedule(t, "rem-ok", t0)
	bad := b.schedule(t, "rem-refused", t0)
	down := true
	b.pub.fail = func(k message.DeliveryKey) bool { return down && k == bad }
	b.clk.Advance(time.Minute)
	rep := b.run(t, e)
	if rep.Enqueued != 1 || rep.PublishFailed != 1 {
		t.Fatalf("report %+v", rep)
	}
	// Handed back to the calendar ahead of the cursor.
	if d := b.status(t, bad); d.Status != ledger.StatusPending || d.History[len(d.History)-1].Note == "" {
		t.Fatalf("refused delivery = %+v", d)
	}
	down = false
	b.pub.take()
	b.clk.Advance(time.Minute)
	b.run(t, e)
	if got := keysOf(b.pub.take()); len(got) != 1 || got[bad] != 1 || got[ok] != 0 {
		t.Fatalf("second run published %v, want only %s", got, bad)
	}
}

func TestLostHandOffIsRepairedAndOverdueIsCounted(t *testing.T) {
	b := setup(t, 2)
	e := b.enqueuer(t, nil) // overdue after 5m, repair after 10m
	lost := b.schedule(t, "rem-lost", t0)
	b.pub.drop = true // SQS "accepts" and the message is never delivered
	b.clk.Advance(time.Minute)
	if rep := b.run(t, e); rep.Enqueued != 1 {
		t.Fatalf("report %+v", rep)
	}
	b.pub.drop = false
	b.pub.take()

	b.clk.Advance(5 * time.Minute) // 6m past due: overdue, not yet repaired
	rep := b.run(t, e)
	if rep.OverduePending != 1 || rep.OldestOverdue != 6*time.Minute || rep.Repaired != 0 {
		t.Fatalf("at 6m: %+v", rep)
	}
	b.clk.Advance(5 * time.Minute) // 11m past due: repaired
	rep = b.run(t, e)
	got := b.pub.take()
	if rep.Repaired != 1 || len(got) != 1 || got[0].Key != lost || got[0].Delay != 0 {
		t.Fatalf("at 11m: %+v, published %+v", rep, got)
	}
	d := b.status(t, lost)
	if d.Status != ledger.StatusQueued || !d.UpdatedAt.Equal(b.clk.Now()) {
		t.Fatalf("repaired delivery = %+v", d)
	}
	// Queued just now: the next run leaves it to the consumer.
	if rep := b.run(t, e); rep.Repaired != 0 || rep.OverduePending != 1 {
		t.Fatalf("run after repair: %+v", rep)
	}
}

// TestABacklogLongerThanTheWindowGetsAFewCopies: a queue that holds every
// message for three hours (a consumer far behind, or hand-offs lost again
// and again) gets five copies of each delivery, the repairs 10, 20, 40 and
// 80 minutes apart, and not one per 10-minute window: each copy would
// lengthen the backlog that delays it. A claim shows the hand-off worked,
// and the back-off starts again from the window.
func TestABacklogLongerThanTheWindowGetsAFewCopies(t *testing.T) {
	b := setup(t, 2)
	e := b.enqueuer(t, nil) // repair after 10m
	var keys []message.DeliveryKey
	for i := range 20 {
		keys = append(keys, b.schedule(t, fmt.Sprintf("rem-backlog-%02d", i), t0))
	}
	claimed := keys[0]
	b.pub.drop = true                         // nothing published reaches a consumer
	copies := map[message.DeliveryKey][]int{} // the minutes each copy went out at
	for minute := 1; minute <= 180; minute++ {
		b.clk.Advance(time.Minute)
		if minute == 80 {
			// claimed reaches a consumer at last, which fails and retries.
			if d := b.status(t, claimed); d.Repairs != 3 {
				t.Fatalf("at 80m: %d repairs, want 3", d.Repairs)
			}
			c, err := b.ledger.Claim(b.ctx, ledger.Claim{Key: claimed, Token: "late", LeaseUntil: b.clk.Now().Add(time.Minute), DueBy: b.clk.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.mem.Retry(b.ctx, c, ledger.Failure{Class: "server", Message: "500", NextAttemptAt: b.clk.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		b.run(t, e)
		for _, p := range b.pub.take() {
			copies[p.Key] = append(copies[p.Key], int(p.At.Sub(t0)/time.Minute))
		}
	}
	want := []int{1, 11, 32, 73, 154}
	for _, k := range keys[1:] {
		if !slices.Equal(copies[k], want) {
			t.Fatalf("%s published at minutes %v; want %v", k, copies[k], want)
		}
	}
	// Claimed at 80 and retried: repaired 10, 20 and 40 minutes on.
	if got, want := copies[claimed], []int{1, 11, 32, 73, 91, 112, 153}; !slices.Equal(got, want) {
		t.Fatalf("the claimed delivery published at minutes %v; want %v", got, want)
	}
}

// TestADeliveryNearItsExpiryIsRepairedEveryWindow: the back-off never
// waits past half the time a delivery has left, so one that expires 30
// minutes after it is due gets a copy every 10 minutes until it expires.
func TestADeliveryNearItsExpiryIsRepairedEveryWindow(t *testing.T) {
	b := setup(t, 1)
	e := b.enqueuer(t, nil)
	k := b.schedule(t, "rem-short", t0, t0.Add(30*time.Minute))
	b.pub.drop = true
	var at []int
	for minute := 1; minute <= 40; minute++ {
		b.clk.Advance(time.Minute)
		b.run(t, e)
		for _, p := range b.pub.take() {
			if p.Key == k {
				at = append(at, minute)
			}
		}
	}
	if want := []int{1, 11, 22}; !slices.Equal(at, want) {
		t.Fatalf("published at minutes %v; want %v", at, want)
	}
	if d := b.status(t, k); d.Status != ledger.StatusExpired {
		t.Fatalf("at 40m: %s; want expired", d.Status)
	}
}

// TestALateHandOffIsNotTakenForALostOne: a delivery handed off long after
// it was due has a fresh message. The run that hands it off never repairs
// it too, and one written overdue waits RepairAfter from its write, not
// from its due time, before a repair takes its hand-off for lost.
func TestALateHandOffIsNotTakenForALostOne(t *testing.T) {
	t.Run("the enqueue was down", func(t *testing.T) {
		b := setup(t, 1)
		e := b.enqueuer(t, nil) // overdue after 5m, repair after 10m
		k := b.schedule(t, "rem-enqueue-down", t0.Add(time.Minute))
		b.clk.Advance(31 * time.Minute) // the first run for half an hour
		rep := b.run(t, e)
		if got := keysOf(b.pub.take()); rep.Enqueued != 1 || rep.Repaired != 0 || got[k] != 1 {
			t.Fatalf("the first run after 30 minutes: %+v, published %v; want it handed off once", rep, got)
		}
		// Then a run a minute, each moving the cursor past a new reminder,
		// and the late one's message lost: repaired 10 minutes after its
		// hand-off, not at the next run.
		b.pub.drop = true
		at := []int{31}
		for minute := 32; minute <= 45; minute++ {
			b.schedule(t, fmt.Sprintf("rem-steady-%02d", minute), b.clk.Now().Add(30*time.Second))
			b.clk.Advance(time.Minute)
			b.run(t, e)
			for _, p := range b.pub.take() {
				if p.Key == k {
					at = append(at, minute)
				}
			}
		}
		if want := []int{31, 41}; !slices.Equal(at, want) {
			t.Fatalf("the late delivery published at minutes %v; want %v", at, want)
		}
	})
	t.Run("written overdue", func(t *testing.T) {
		b := setup(t, 1)
		e := b.enqueuer(t, nil)
		k := b.schedule(t, "rem-written-late", t0.Add(-40*time.Minute))
		b.pub.drop = true // and its message is lost
		var at []int
		for minute := 1; minute <= 12; minute++ {
			b.clk.Advance(time.Minute)
			b.run(t, e)
			for _, p := range b.pub.take() {
				if p.Key == k {
					at = append(at, minute)
				}
			}
		}
		if want := []int{1, 11}; !slices.Equal(at, want) {
			t.Fatalf("published at minutes %v; want %v (handed off, then repaired 10 minutes after it was written)", at, want)
		}
	})
}

// TestAFailedRepairIsHandedBackToTheCalendar: SQS refuses a repair's
// message; the delivery goes back ahead of the cursor, as a refused hand-off
// does, and the next run hands it off instead of waiting out the repair's
// longer back-off.
func TestAFailedRepairIsHandedBackToTheCalendar(t *testing.T) {
	b := setup(t, 1)
	e := b.enqueuer(t, nil)
	k := b.schedule(t, "rem-refused", t0)
	b.pub.drop = true
	b.clk.Advance(time.Minute)
	b.run(t, e)
	b.pub.drop = false
	b.pub.take()
	b.clk.Advance(10 * time.Minute) // 11m: repaired, and SQS refuses it
	b.pub.fail = func(message.DeliveryKey) bool { return true }
	if rep := b.run(t, e); rep.PublishFailed != 1 {
		t.Fatalf("the refused repair: %+v", rep)
	}
	if d := b.status(t, k); d.Status != ledger.StatusPending || d.Repairs != 1 {
		t.Fatalf("after the refused repair: %s, %d repairs; want pending (handed back), 1 repair", d.Status, d.Repairs)
	}
	b.pub.fail = nil
	b.clk.Advance(time.Minute)
	rep := b.run(t, e)
	if got := keysOf(b.pub.take()); rep.Enqueued != 1 || got[k] != 1 {
		t.Fatalf("the next run: %+v, published %v; want the delivery handed off", rep, got)
	}
}

// TestTheRepairLimitReachesEveryCandidate: with more candidates than the
// run may examine, each run looks at the next RepairLimit of them, so that
// every lost delivery is repaired within len/RepairLimit runs.
func TestTheRepairLimitReachesEveryCandidate(t *testing.T) {
	b := setup(t, 1)
	e := b.enqueuer(t, func(c *enqueue.Config) { c.RepairLimit = 3 })
	for i := range 12 {
		b.schedule(t, fmt.Sprintf("rem-limit-%02d", i), t0)
	}
	b.pub.drop = true
	b.clk.Advance(time.Minute)
	b.run(t, e)
	b.pub.take()
	b.clk.Advance(10 * time.Minute)
	repaired := map[message.DeliveryKey]int{}
	for run := range 4 {
		rep := b.run(t, e)
		for k, n := range keysOf(b.pub.take()) {
			repaired[k] += n
		}
		if rep.Repaired != 3 {
			t.Fatalf("run %d repaired %d; want 3 (the limit)", run+1, rep.Repaired)
		}
		b.clk.Advance(time.Minute)
	}
	if len(repaired) != 12 {
		t.Fatalf("4 runs of 3 repaired %d distinct deliveries; want all 12", len(repaired))
	}
}

func TestConcurrentRunsNeverHandOffTheSameDelivery(t *testing.T) {
	b := setup(t, 4)
	for i := range 300 {
		b.schedule(t, fmt.Sprintf("rem-%03d", i), t0)
	}
	b.clk.Advance(time.Minute)
	e1 := b.enqueuer(t, func(c *enqueue.Config) { c.PageSize = 10 })
	e2 := b.enqueuer(t, func(c *enqueue.Config) { c.PageSize = 10 })
	var wg sync.WaitGroup
	reps := make([]enqueue.Report, 2)
	for i, e := range []*enqueue.Enqueuer{e1, e2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if reps[i], err = e.Run(b.ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := keysOf(b.pub.take())
	if len(got) != 300 || reps[0].Enqueued+reps[1].Enqueued != 300 {
		t.Fatalf("reports %+v; %d distinct published", reps, len(got))
	}
	for k, n := range got {
		if n != 1 {
			t.Fatalf("%s published %d times", k, n)
		}
	}
	t.Logf("run 1 enqueued %d, run 2 enqueued %d; cursor steps lost to the other run: %d", reps[0].Enqueued, reps[1].Enqueued, reps[0].Contended+reps[1].Contended)
}

func TestTimeBudgetCutsTheRunAndTheNextResumesEveryShard(t *testing.T) {
	b := setup(t, 4)
	for i := range 200 {
		b.schedule(t, fmt.Sprintf("rem-%03d", i), t0)
	}
	b.clk.Advance(time.Minute)
	// Each publish call takes a second of the fake clock; a run may use 20s.
	b.pub.onCall = func() { b.clk.Advance(time.Second) }
	e := b.enqueuer(t, func(c *enqueue.Config) {
		c.PageSize = 10
		c.MaxRun = 21 * time.Second
		c.CutoffMargin = time.Second
		c.Concurrency = 1
	})
	first := b.run(t, e)
	if !first.Cut || first.Caught || first.Enqueued == 0 || first.Enqueued >= 200 {
		t.Fatalf("first run: %+v; want a cut run that did part of the work", first)
	}
	for shard := range 4 {
		if cur, _ := b.ledger.Cursor(b.ctx, shard); cur.Pos == "" {
			t.Fatalf("shard %d was starved by the first run", shard)
		}
	}
	total, runs := first.Enqueued, 1
	for ; total < 200 && runs < 20; runs++ {
		b.clk.Advance(time.Minute)
		total += b.run(t, e).Enqueued
	}
	got := keysOf(b.pub.take())
	if total != 200 || len(got) != 200 {
		t.Fatalf("after %d runs: enqueued %d, %d distinct", runs, total, len(got))
	}
	for k, n := range got {
		if n != 1 {
			t.Fatalf("%s published %d times", k, n)
		}
	}
	t.Logf("first run handed off %d of 200 and was cut; %d runs in all", first.Enqueued, runs)
}

func TestCancelledAndExpiredDeliveriesAreNeverPublished(t *testing.T) {
	b := setup(t, 1)
	e := b.enqueuer(t, nil)
	cancelled := b.schedule(t, "rem-cancelled", t0)
	expired := b.schedule(t, "rem-expires", t0, t0.Add(30*time.Second))
	live := b.schedule(t, "rem-live", t0)
	if _, err := b.store.Cancel(b.ctx, "rem-cancelled", "test"); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Minute)
	rep := b.run(t, e)
	got := keysOf(b.pub.take())
	if len(got) != 1 || got[live] != 1 || rep.Expired != 1 {
		t.Fatalf("report %+v, published %v; want only %s", rep, got, live)
	}
	if d := b.status(t, expired); d.Status != ledger.StatusExpired {
		t.Fatalf("expired delivery = %s", d.Status)
	}
	if d := b.status(t, cancelled); d.Status != ledger.StatusCancelled {
		t.Fatalf("cancelled delivery = %s", d.Status)
	}

	// One handed off and then lost, which expires before repair: the overdue
	// scan ends it instead of publishing it.
	lost := b.schedule(t, "rem-lost", b.clk.Now(), b.clk.Now().Add(8*time.Minute))
	b.pub.drop = true
	b.clk.Advance(time.Minute)
	b.run(t, e)
	b.pub.drop = false
	b.pub.take()
	b.clk.Advance(10 * time.Minute)
	rep = b.run(t, e)
	// (rem-live, never consumed here, is repaired meanwhile; that is right.)
	if keysOf(b.pub.take())[lost] != 0 || rep.Expired != 1 || b.status(t, lost).Status != ledger.StatusExpired {
		t.Fatalf("report %+v; lost delivery = %s", rep, b.status(t, lost).Status)
	}
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	l, err := ledger.New(&dynamodb.Client{}, ledger.Config{Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	base := enqueue.Config{Ledger: l, Queue: &sqs.Client{}, QueueURL: "https://sqs/q"}
	for name, edit := range map[string]func(*enqueue.Config){
		"no queue url":          func(c *enqueue.Config) { c.QueueURL = "" },
		"zero shards":           func(c *enqueue.Config) { c.Shards = -1 },
		"repair before overdue": func(c *enqueue.Config) { c.OverdueAfter = time.Hour },
		"settle past lookahead": func(c *enqueue.Config) { c.Settle = time.Hour },
		"page too big":          func(c *enqueue.Config) { c.PageSize = 5000 },
		"reserve past margin":   func(c *enqueue.Config) { c.Reserve = 5 * time.Second },
		"negative reserve":      func(c *enqueue.Config) { c.Reserve = -time.Second },
	} {
		cfg := base
		edit(&cfg)
		if _, err := enqueue.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := enqueue.New(base); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
}

// TestDelayIsCountedFromEachBatchNotTheRunStart: a run that takes a while
// must not delay its later messages past their due time.
func TestDelayIsCountedFromEachBatchNotTheRunStart(t *testing.T) {
	b := setup(t, 1)
	due := t0.Add(10 * time.Minute)
	for i := range 30 {
		b.schedule(t, fmt.Sprintf("rem-%02d", i), due)
	}
	b.clk.Advance(time.Minute)
	b.pub.onCall = func() { b.clk.Advance(10 * time.Second) } // each call takes 10 s
	e := b.enqueuer(t, func(c *enqueue.Config) { c.PageSize = 10; c.Concurrency = 1 })
	b.run(t, e)
	got := b.pub.take()
	seen := map[int32]bool{}
	for _, p := range got {
		sentAt := p.At.Add(-10 * time.Second) // when the batch was built
		if want := envelope.DelaySeconds(due.Sub(sentAt)); p.Delay != want {
			t.Fatalf("%s published at %s with delay %ds, want %ds", p.Key, sentAt.Format(time.TimeOnly), p.Delay, want)
		}
		seen[p.Delay] = true
	}
	if len(got) != 30 || len(seen) < 3 {
		t.Fatalf("%d published with delays %v; want 30 with the delay shrinking batch by batch", len(got), seen)
	}
}

// failingShard fails every due index read of one shard, as throttling of
// one partition would.
type failingShard struct {
	enqueue.Ledger
	shard int
}

var errThrottled = errors.New("ProvisionedThroughputExceededException")

func (f failingShard) DueAfter(ctx context.Context, shard int, pos string, upTo time.Time, limit int) ([]ledger.IndexEntry, error) {
	if shard == f.shard {
		return nil, errThrottled
	}
	return f.Ledger.DueAfter(ctx, shard, pos, upTo, limit)
}

func (f failingShard) DueBy(ctx context.Context, shard int, by time.Time, page func([]ledger.IndexEntry) bool) (bool, error) {
	if shard == f.shard {
		return false, errThrottled
	}
	return f.Ledger.DueBy(ctx, shard, by, page)
}

// scheduleHundred schedules 100 reminders due at t0 over shards, and
// returns how many fell in shard 0.
func (b *bundle) scheduleHundred(t *testing.T, shards int) (inShard0 int) {
	t.Helper()
	for i := range 100 {
		id := fmt.Sprintf("rem-%03d", i)
		if ledger.ShardOf(id, shards) == 0 {
			inShard0++
		}
		b.schedule(t, id, t0)
	}
	return inShard0
}

func TestAFailingShardDoesNotStopTheOthers(t *testing.T) {
	b := setup(t, 4)
	inShard0 := b.scheduleHundred(t, 4)
	b.clk.Advance(time.Minute)
	broken := b.enqueuer(t, func(c *enqueue.Config) { c.Ledger = failingShard{Ledger: c.Ledger, shard: 0} })
	rep, err := broken.Run(b.ctx)
	if err == nil || !strings.Contains(err.Error(), "ProvisionedThroughputExceededException") {
		t.Fatalf("run error = %v, want the shard's error", err)
	}
	if rep.Enqueued != 100-inShard0 || rep.Caught {
		t.Fatalf("report %+v; want the %d deliveries of the other shards handed off", rep, 100-inShard0)
	}
	// The next run, with the shard healthy, hands off the rest.
	if rep := b.run(t, b.enqueuer(t, nil)); rep.Enqueued != inShard0 {
		t.Fatalf("next run: %+v, want %d", rep, inShard0)
	}
	if got := keysOf(b.pub.take()); len(got) != 100 {
		t.Fatalf("%d distinct published, want 100", len(got))
	}
}

// TestAnOperatorClockBehindNeverSchedulesBehindTheCursor: an operator's
// laptop runs a minute behind and schedules a reminder due now. Its
// publish time is allowed for that skew (ledger.OperatorClockSkew), so it
// lands ahead of the enqueue's cursor and the next run hands it off.
// Without the margin it was written a minute behind the cursor and only
// the overdue repair found it, ten minutes late.
func TestAnOperatorClockBehindNeverSchedulesBehindTheCursor(t *testing.T) {
	b := setup(t, 1)
	e := b.enqueuer(t, nil)
	b.clk.Advance(44 * time.Second)
	b.schedule(t, "rem-first", b.clk.Now().Add(time.Minute)) // published from t0+44s
	b.clk.Advance(16 * time.Second)
	if rep := b.run(t, e); rep.Enqueued != 1 { // the cursor moves to t0+44s
		t.Fatalf("first run enqueued %d", rep.Enqueued)
	}
	behind := clock.NewFake(b.clk.Now().Add(-time.Minute))
	op, err := b.mem.With(ledger.MemoryConfig{Clock: behind, Shards: 1, ClockSkew: ledger.OperatorClockSkew})
	if err != nil {
		t.Fatal(err)
	}
	store, err := schedule.New(schedule.Config{Ledger: op, Clock: behind})
	if err != nil {
		t.Fatal(err)
	}
	due := b.clk.Now()
	r := schedule.Reminder{ID: "rem-skewed", AccountRef: "acct-1", DueAt: due, ExpiresAt: due.Add(time.Hour),
		Deliveries: []schedule.Delivery{{Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"}}}
	if _, err := store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(20 * time.Second)
	if rep := b.run(t, e); rep.Enqueued != 1 {
		t.Fatalf("the run after a skewed operator scheduled a reminder due now enqueued %d, want 1", rep.Enqueued)
	}
}

// readBoth holds every Requeue until both runs have read the overdue
// deliveries (GetMany), so that both decide to repair each of them: the
// race the requeue's condition must settle.
type readBoth struct {
	enqueue.Ledger
	reads chan struct{}
	both  chan struct{}
	once  sync.Once
}

func (r *readBoth) GetMany(ctx context.Context, keys []message.DeliveryKey) (map[message.DeliveryKey]ledger.Delivery, error) {
	ds, err := r.Ledger.GetMany(ctx, keys)
	select {
	case r.reads <- struct{}{}:
	default:
	}
	if len(r.reads) == cap(r.reads) {
		r.once.Do(func() { close(r.both) })
	}
	return ds, err
}

func (r *readBoth) Requeue(ctx context.Context, d ledger.Delivery, note string) (ledger.Delivery, error) {
	select {
	case <-r.both:
	case <-time.After(10 * time.Second):
		return ledger.Delivery{}, errors.New("test: the other run never read the overdue deliveries")
	}
	return r.Ledger.Requeue(ctx, d, note)
}

// TestConcurrentRepairsRepublishEachLostHandOffOnce: 60 hand-offs are lost;
// past the repair threshold two runs both read them as lost before either
// repairs one. Each lost delivery is republished once in all: the requeue's
// condition on the delivery as read lets one run through and refuses the
// other.
func TestConcurrentRepairsRepublishEachLostHandOffOnce(t *testing.T) {
	b := setup(t, 1) // one shard: each run reads the 60 in one GetMany
	for i := range 60 {
		b.schedule(t, fmt.Sprintf("rem-lost-%02d", i), t0)
	}
	b.pub.drop = true
	b.clk.Advance(time.Minute)
	if rep := b.run(t, b.enqueuer(t, nil)); rep.Enqueued != 60 {
		t.Fatalf("first run %+v", rep)
	}
	b.pub.drop = false
	b.pub.take()
	b.clk.Advance(11 * time.Minute)
	gate := &readBoth{Ledger: b.ledger, reads: make(chan struct{}, 2), both: make(chan struct{})}
	runs := []*enqueue.Enqueuer{
		b.enqueuer(t, func(c *enqueue.Config) { c.Ledger = gate }),
		b.enqueuer(t, func(c *enqueue.Config) { c.Ledger = gate }),
	}
	reps := make([]enqueue.Report, len(runs))
	var wg sync.WaitGroup
	for i, e := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if reps[i], err = e.Run(b.ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := keysOf(b.pub.take())
	if len(got) != 60 || reps[0].Repaired+reps[1].Repaired != 60 {
		t.Fatalf("reports %+v and %+v; %d distinct deliveries republished", reps[0], reps[1], len(got))
	}
	for k, n := range got {
		if n != 1 {
			t.Fatalf("%s republished %d times", k, n)
		}
	}
	t.Logf("run 1 repaired %d, run 2 repaired %d", reps[0].Repaired, reps[1].Repaired)
}

// TestAPendingDeliveryTellsWhetherItWasHandedOff: a hand-off by the cursor
// writes nothing to the delivery, which stays pending; what tells an
// operator whether it was handed off is the cursor, past its index entry
// or not (nudge reminder show's HANDED OFF).
func TestAPendingDeliveryTellsWhetherItWasHandedOff(t *testing.T) {
	b := setup(t, 1)
	soon := b.schedule(t, "rem-soon", t0.Add(10*time.Minute))
	later := b.schedule(t, "rem-later", t0.Add(2*time.Hour))
	for _, k := range []message.DeliveryKey{soon, later} {
		if h, err := b.ledger.HandedOff(b.ctx, b.status(t, k)); err != nil || h.Done {
			t.Fatalf("%s before any run: %+v, %v", k, h, err)
		}
	}
	b.clk.Advance(time.Minute)
	b.run(t, b.enqueuer(t, nil))
	d := b.status(t, soon)
	if h, err := b.ledger.HandedOff(b.ctx, d); err != nil || !h.Done || d.Status != ledger.StatusPending {
		t.Fatalf("%s after the run: %+v, %v, status %s; want handed off and still pending", soon, h, err, d.Status)
	}
	if h, err := b.ledger.HandedOff(b.ctx, b.status(t, later)); err != nil || h.Done || !h.PublishAt.Equal(t0.Add(2*time.Hour-15*time.Minute)) {
		t.Fatalf("%s after the run: %+v, %v; want not handed off, publish at due − 15 min", later, h, err)
	}
}

// TestTheEnqueueRecordsWhatTheStageRuns: the first run records the stage's
// providers in the table, where the intake reads them; without a stage it
// records nothing.
func TestTheEnqueueRecordsWhatTheStageRuns(t *testing.T) {
	b := setup(t, 2)
	b.run(t, b.enqueuer(t, nil))
	if _, ok, _ := b.mem.ReadStage(b.ctx); ok {
		t.Fatal("a run without a stage recorded one")
	}
	facts := ledger.StageFacts{Providers: []string{"webhook", "ses"}, Env: map[string]string{"NUDGE_SES_TEMPLATE_PREFIX": "nudge-dev-"}}
	b.run(t, b.enqueuer(t, func(c *enqueue.Config) { c.Stage = &facts }))
	got, ok, err := b.mem.ReadStage(b.ctx)
	if err != nil || !ok || strings.Join(got.Providers, ",") != "webhook,ses" || got.Env["NUDGE_SES_TEMPLATE_PREFIX"] != "nudge-dev-" {
		t.Fatalf("recorded %+v, %v, %v", got, ok, err)
	}
}
