package status_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/redrive"
	"github.com/nudgehq/nudge/pkg/standin/standintest"
	"github.com/nudgehq/nudge/pkg/status"
)

// TestReadCountsStatesOverdueAndQueues: the report counts deliveries by
// state, the overdue ones with the oldest, both queues' depths and the
// DLQ's oldest message.
func TestReadCountsStatesOverdueAndQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, q := standintest.DynamoDB(t), standintest.SQS(t)
	table := standintest.Table(t, db)
	queues := standintest.QueuePair(t, q, 30*time.Second, 10)
	now := time.Now().UTC().Truncate(time.Second)
	l, err := ledger.New(db, ledger.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	for id, due := range map[string]time.Duration{"rem-1": -20 * time.Minute, "rem-2": -10 * time.Minute, "rem-3": -time.Minute, "rem-4": 24 * time.Hour, "rem-5": -time.Hour} {
		if err := l.Create(ctx, ledger.Delivery{ReminderID: id, Channel: "email", Provider: "webhook", DueAt: now.Add(due), ExpiresAt: now.Add(48 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	k5 := ledger.Delivery{ReminderID: "rem-5", Channel: "email", Provider: "webhook"}.Key()
	c, _ := l.Claim(ctx, ledger.Claim{Key: k5, Token: "t", LeaseUntil: now.Add(time.Minute), DueBy: now})
	if _, err := l.Complete(ctx, c, "r"); err != nil {
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
	later := clock.NewFake(now.Add(time.Hour))
	dlq, err := redrive.New(redrive.Config{Queue: q, DLQURL: queues.DLQURL, TargetURL: queues.WorkURL, Clock: later})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := status.Read(ctx, status.Config{DB: db, Table: table, Queue: q, WorkURL: queues.WorkURL, DLQURL: queues.DLQURL, DLQ: dlq, Clock: clock.NewFake(now)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Deliveries != 5 || rep.ByStatus[ledger.StatusPending] != 4 || rep.ByStatus[ledger.StatusSent] != 1 {
		t.Errorf("by status %v of %d", rep.ByStatus, rep.Deliveries)
	}
	if rep.OverduePending != 2 || rep.OldestOverdueKey != "rem-1:email:webhook" || rep.OldestOverdueSeconds != 1200 {
		t.Errorf("overdue %d, oldest %s at %ds; want 2, rem-1 at 1200s", rep.OverduePending, rep.OldestOverdueKey, rep.OldestOverdueSeconds)
	}
	if rep.WorkQueue != (status.Depth{Visible: 1, Delayed: 1}) || rep.DLQ.Visible != 2 {
		t.Errorf("work %+v, DLQ %+v", rep.WorkQueue, rep.DLQ)
	}
	if rep.DLQOldestAgeSeconds < 3590 || rep.DLQOldestAgeSeconds > 3610 || rep.DLQOldestSampled {
		t.Errorf("DLQ oldest %ds (sampled %v); want about an hour, exact", rep.DLQOldestAgeSeconds, rep.DLQOldestSampled)
	}
}
