package status_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/status"
	"github.com/nudgehq/nudge/pkg/clock"
)

// TestReadCountsLiveOverdueAndQueues: the report counts the live deliveries
// and the overdue ones with the oldest from the due index, both queues'
// depths and the DLQ's oldest message from a sample that hides each message
// a second at most (before, ten seconds), and, asked to
// scan, every delivery by state and the recent expired ones; it says which
// figures are exact and which are sampled.
func TestReadCountsLiveOverdueAndQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, q := standintest.DynamoDB(t), standintest.SQS(t)
	table := standintest.Table(t, db)
	queues := standintest.QueuePair(t, q, 30*time.Second, 10)
	now := time.Now().UTC().Truncate(time.Second).Add(time.Hour) // the DLQ's messages are an hour old at now
	clk := clock.NewFake(now)
	l, err := ledger.New(db, ledger.Config{Table: table, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for id, due := range map[string]time.Duration{"rem-1": -20 * time.Minute, "rem-2": -10 * time.Minute, "rem-3": -time.Minute, "rem-4": 24 * time.Hour, "rem-5": -time.Hour, "rem-6": -2 * time.Hour} {
		expires := now.Add(48 * time.Hour)
		if id == "rem-6" {
			expires = now.Add(-time.Hour)
		}
		if err := l.Create(ctx, ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: now.Add(due), ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
	}
	k5 := ledger.Delivery{ReminderID: "rem-5", Channel: "email", Provider: "webhook"}.Key()
	c, _ := l.Claim(ctx, ledger.Claim{Key: k5, Token: "t", LeaseUntil: now.Add(time.Minute), DueBy: now})
	if _, err := l.Complete(ctx, c, "r"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Expire(ctx, ledger.Delivery{ReminderID: "rem-6", Channel: "email", Provider: "webhook", ExpiresAt: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	send := func(url string, delay int32) {
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(`{"v":1}`), DelaySeconds: delay}); err != nil {
			t.Fatal(err)
		}
	}
	send(queues.WorkURL, 0)
	send(queues.WorkURL, 600)
	send(queues.DLQURL, 0)
	send(queues.DLQURL, 0)
	cfg := status.Config{Ledger: l, Table: table, Queue: q, WorkURL: queues.WorkURL, DLQURL: queues.DLQURL, Clock: clk}
	rep, err := status.Read(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Live != 4 || rep.ByStatus != nil || rep.Expired != nil {
		t.Errorf("live %d, by status %v, expired %v; want 4 live and no scan", rep.Live, rep.ByStatus, rep.Expired)
	}
	if rep.OverduePending != 2 || rep.OldestOverdueKey != "rem-1:email:webhook" || rep.OldestOverdueSeconds != 1200 {
		t.Errorf("overdue %d, oldest %s at %ds; want 2, rem-1 at 1200s", rep.OverduePending, rep.OldestOverdueKey, rep.OldestOverdueSeconds)
	}
	if rep.WorkQueue != (status.Depth{Visible: 1, Delayed: 1}) || rep.DLQ.Visible != 2 {
		t.Errorf("work %+v, DLQ %+v", rep.WorkQueue, rep.DLQ)
	}
	if rep.DLQOldestAgeSeconds < 3590 || rep.DLQOldestAgeSeconds > 3610 || rep.DLQSampled != 2 || rep.Sources["dlqOldestAge"] != "exact: every DLQ message read" {
		t.Errorf("DLQ oldest %ds of %d read (%s); want about an hour, both read", rep.DLQOldestAgeSeconds, rep.DLQSampled, rep.Sources["dlqOldestAge"])
	}
	// fauxqs counts a message in flight until the next receive: receive.
	time.Sleep(1500 * time.Millisecond)
	if out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queues.DLQURL), MaxNumberOfMessages: 10, VisibilityTimeout: 1}); err != nil || len(out.Messages) != 2 {
		t.Errorf("1.5 s after the sample a receive gets %d DLQ messages, %v; want both, visible again", len(out.Messages), err)
	}
	if rep.Sources["live"] != "exact: the due index" || rep.Sources["queues"] != "approximate: SQS's counts" {
		t.Errorf("sources %v", rep.Sources)
	}

	cfg.Scan, cfg.ExpiredSince = true, 24*time.Hour
	rep, err = status.Read(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Deliveries != 6 || rep.ByStatus[ledger.StatusPending] != 4 || rep.ByStatus[ledger.StatusSent] != 1 || rep.ByStatus[ledger.StatusExpired] != 1 {
		t.Errorf("by status %v of %d", rep.ByStatus, rep.Deliveries)
	}
	if len(rep.Expired) != 1 || rep.Expired[0].Key != "rem-6:email:webhook" || rep.Sources["expired"] != "exact: a scan of the table" {
		t.Errorf("expired %+v", rep.Expired)
	}
}
