package enqueue_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/awsclient"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// deliver claims and completes k as the consumer would.
func deliver(t *testing.T, b *bundle, k message.DeliveryKey) {
	t.Helper()
	now := b.clk.Now()
	c, err := b.ledger.Claim(b.ctx, ledger.Claim{Key: k, Token: "tok-" + k.ReminderID, LeaseUntil: now.Add(time.Minute), DueBy: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ledger.Complete(b.ctx, c, "r"); err != nil {
		t.Fatal(err)
	}
}

// TestWriteUnitsFromCreationToSent measures, from DynamoDB Local's consumed
// capacity (due index writes included), what a delivery costs from
// creation to sent on each hand-off path: by cursor, the path every
// delivery takes, and by a conditional claim per delivery, the path of a
// repaired delivery and the alternative design. Run with -v for the table.
func TestWriteUnitsFromCreationToSent(t *testing.T) {
	b := setupLocal(t, 1)
	const n = 20
	e := b.enqueuer(t, nil)

	var cursorPath, claimPath []message.DeliveryKey
	for i := range n {
		cursorPath = append(cursorPath, b.schedule(t, fmt.Sprintf("rem-c%02d", i), t0))
	}
	created := b.dynamo.WriteUnits()
	reminderUnits := b.dynamo.Units().Reminders
	b.clk.Advance(time.Minute)
	b.run(t, e)
	handOff := b.dynamo.WriteUnits() - created
	for _, k := range cursorPath {
		deliver(t, b, k)
	}
	cursorTotal := b.dynamo.WriteUnits()

	// The claim path: handed off, lost, and requeued one by one.
	start := b.dynamo.WriteUnits()
	for i := range n {
		claimPath = append(claimPath, b.schedule(t, fmt.Sprintf("rem-q%02d", i), b.clk.Now()))
	}
	b.pub.drop = true
	b.clk.Advance(time.Minute)
	b.run(t, e)
	b.pub.drop = false
	b.clk.Advance(11 * time.Minute)
	if rep := b.run(t, e); rep.Repaired != n {
		t.Fatalf("repair run: %+v", rep)
	}
	for _, k := range claimPath {
		deliver(t, b, k)
	}
	claimTotal := b.dynamo.WriteUnits() - start

	// The short-notice path: handed off by the create itself (the mark
	// rides on its put), passed by the cursor, claimed and completed.
	b.withHandOff(t)
	start = b.dynamo.WriteUnits()
	var shortPath []message.DeliveryKey
	for i := range n {
		shortPath = append(shortPath, b.schedule(t, fmt.Sprintf("rem-s%02d", i), b.clk.Now().Add(5*time.Second)))
	}
	shortCreated := b.dynamo.WriteUnits() - start
	b.clk.Advance(time.Minute)
	if rep := b.run(t, e); rep.Passed != n {
		t.Fatalf("short-notice run: %+v; want %d passed", rep, n)
	}
	for _, k := range shortPath {
		deliver(t, b, k)
	}
	shortTotal := b.dynamo.WriteUnits() - start

	perCursor, perClaim, perShort := cursorTotal/n, claimTotal/n, shortTotal/n
	t.Logf("write units per delivery, creation to sent (delivery item + due index):")
	t.Logf("  create %.2f, hand-off by cursor %.2f, claim + complete %.2f: total %.2f", created/n, handOff/n, (cursorTotal-created-handOff)/n, perCursor)
	t.Logf("  with a conditional claim per delivery: total %.2f", perClaim)
	t.Logf("  at short notice, handed off by the create: create %.2f, total %.2f", shortCreated/n, perShort)
	t.Logf("  plus per reminder item %.2f; cursor moves %.2f in all for %d deliveries", reminderUnits/n, b.dynamo.Units().Cursors, 2*n)
	if perCursor != 5 || handOff != 0 {
		t.Errorf("cursor path costs %.2f units per delivery (%.2f at hand-off), want 5 (0)", perCursor, handOff/n)
	}
	if perShort != 5 || shortCreated/n != created/n {
		t.Errorf("short-notice path costs %.2f units per delivery (%.2f at creation), want 5 (%.2f, as any create)", perShort, shortCreated/n, created/n)
	}
	if perClaim != 6 {
		t.Errorf("claim path costs %.2f units per delivery, want 6", perClaim)
	}
	// The item and its entry in the account index (docs/ledger.md).
	if reminderUnits != 2*n {
		t.Errorf("reminder items cost %.2f units for %d reminders, want 2 each (the item and its account index entry)", reminderUnits, n)
	}
}

// TestRequestsPerEnqueuedDelivery counts the AWS requests one run makes to
// hand off 200 deliveries over 4 shards: SendMessageBatch carries ten
// messages per call, and DynamoDB is read and written per page and per
// shard, never per delivery.
func TestRequestsPerEnqueuedDelivery(t *testing.T) {
	t.Parallel()
	cfg := standintest.AWSConfig(t)
	counter := &standin.Counter{}
	counter.Attach(&cfg)
	db, q := awsclient.DynamoDB(cfg), awsclient.SQS(cfg)
	clk := clock.NewFake(t0)
	l, err := ledger.New(db, ledger.Config{Table: standintest.Table(t, db), Clock: clk, Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	store, _ := schedule.New(schedule.Config{Ledger: l, Clock: clk})
	for i := range 200 {
		r := schedule.Reminder{ID: fmt.Sprintf("rem-%03d", i), AccountRef: "a", DueAt: t0, ExpiresAt: t0.Add(time.Hour),
			Deliveries: []schedule.Delivery{{Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"}}}
		if _, err := store.Create(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	queues := standintest.QueuePair(t, q, 30*time.Second, 10)
	e, err := enqueue.New(enqueue.Config{Ledger: l, Queue: q, QueueURL: queues.WorkURL, Shards: 4, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	counter.Reset()
	rep, err := e.Run(context.Background())
	if err != nil || rep.Enqueued != 200 {
		t.Fatalf("run: %+v, %v", rep, err)
	}
	t.Logf("one run, 200 deliveries, 4 shards, pages of 100: %s", counter)
	// Per shard: one cursor read, one query per page plus the empty one
	// that says it caught up, one cursor write per page, one overdue query.
	// Plus one read of the shard registry.
	ddb, sendBatch := counter.Service("DynamoDB"), counter.Count("SQS.SendMessageBatch")
	if sendBatch > 200/10+4 {
		t.Errorf("%d SendMessageBatch calls for 200 messages over 4 shards; want at most 24", sendBatch)
	}
	if ddb > 1+4*5 {
		t.Errorf("%d DynamoDB requests; want at most 21", ddb)
	}
	if counter.Count("DynamoDB.UpdateItem") > 4 || counter.Count("DynamoDB.PutItem") != 0 || counter.Count("DynamoDB.BatchGetItem") != 0 {
		t.Errorf("the hand-off wrote per delivery: %s", counter)
	}
}

// BenchmarkEnqueueThroughput seeds N due deliveries (through the same
// import path as `nudge import`) and measures one enqueue catching up
// with them against DynamoDB Local and fauxqs, on the real clock: 8
// shards, 4 at a time, pages of 100. Reports deliveries/s and requests
// per delivery.
func BenchmarkEnqueueThroughput(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("due=%d", n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				cfg := standintest.AWSConfig(b)
				counter := &standin.Counter{}
				counter.Attach(&cfg)
				db, q := awsclient.DynamoDB(cfg), awsclient.SQS(cfg)
				l, err := ledger.New(db, ledger.Config{Table: standintest.Table(b, db)})
				if err != nil {
					b.Fatal(err)
				}
				store, _ := schedule.New(schedule.Config{Ledger: l})
				due := time.Now().Add(-time.Minute)
				rows := make([]schedule.Row, n)
				for i := range rows {
					rows[i] = schedule.Row{Line: i + 1, Reminder: schedule.Reminder{ID: fmt.Sprintf("rem-%06d", i), AccountRef: "a", DueAt: due, ExpiresAt: due.Add(24 * time.Hour),
						Deliveries: []schedule.Delivery{{Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"}}}}
				}
				importStart := time.Now()
				sum, err := schedule.Import(context.Background(), rows, schedule.ImportConfig{Creator: store, Concurrency: 32})
				if err != nil || sum.Created != n {
					b.Fatalf("seed: %+v, %v", sum, err)
				}
				b.ReportMetric(float64(n)/time.Since(importStart).Seconds(), "imported/s")
				queues := standintest.QueuePair(b, q, 30*time.Second, 10)
				e, err := enqueue.New(enqueue.Config{Ledger: l, Queue: q, QueueURL: queues.WorkURL, Settle: time.Nanosecond, MaxRun: time.Hour,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				counter.Reset()
				b.StartTimer()
				start := time.Now()
				rep, err := e.Run(context.Background())
				took := time.Since(start)
				b.StopTimer()
				if err != nil || rep.Enqueued != n {
					b.Fatalf("run: %+v, %v", rep, err)
				}
				b.ReportMetric(float64(n)/took.Seconds(), "deliveries/s")
				b.ReportMetric(float64(counter.Service("DynamoDB"))/float64(n), "ddb-req/delivery")
				b.ReportMetric(float64(counter.Service("SQS"))/float64(n), "sqs-req/delivery")
			}
		})
	}
}
