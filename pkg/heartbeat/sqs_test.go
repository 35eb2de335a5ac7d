package heartbeat_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/heartbeat"
)

// Against fauxqs, with real time: a heartbeat keeps a message invisible past
// its visibility timeout, and the message returns once the beats stop.
func TestHeartbeatKeepsAMessageInvisible(t *testing.T) {
	t.Parallel()
	client := standintest.SQS(t)
	q := standintest.QueuePair(t, client, 2*time.Second, 5)
	ctx := context.Background()
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.WorkURL), MessageBody: aws.String("x")}); err != nil {
		t.Fatal(err)
	}
	got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.WorkURL), WaitTimeSeconds: 1})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("receive: %v, %d messages", err, len(got.Messages))
	}
	hb, err := heartbeat.New(heartbeat.Config{Visibility: client, Extension: 3 * time.Second, Threshold: 500 * time.Millisecond, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := hb.Start(ctx, q.WorkURL, aws.ToString(got.Messages[0].ReceiptHandle))
	time.Sleep(3 * time.Second) // past the queue's 2s visibility timeout
	again, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.WorkURL)})
	if err != nil || len(again.Messages) != 0 {
		t.Fatalf("message visible while the heartbeat runs: %v, %d", err, len(again.Messages))
	}
	if rctx.Err() != nil {
		t.Fatalf("record context ended: %v", context.Cause(rctx))
	}
	stop()
	back, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.WorkURL), WaitTimeSeconds: 5})
	if err != nil || len(back.Messages) != 1 {
		t.Fatalf("message did not return after the heartbeat stopped: %v, %d", err, len(back.Messages))
	}
}

func TestHeartbeatWithAStaleReceiptCancelsTheRecord(t *testing.T) {
	t.Parallel()
	client := standintest.SQS(t)
	q := standintest.QueuePair(t, client, 30*time.Second, 5)
	hb, err := heartbeat.New(heartbeat.Config{Visibility: client, Extension: 3 * time.Second, Threshold: time.Millisecond, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := hb.Start(context.Background(), q.WorkURL, "not-a-receipt-handle")
	defer stop()
	select {
	case <-rctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("record not cancelled")
	}
	if !errors.Is(context.Cause(rctx), heartbeat.ErrLost) {
		t.Fatalf("cause %v", context.Cause(rctx))
	}
}
