package redrive_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/redrive"
)

// fakeDLQ holds messages for one read and records what is sent.
type fakeDLQ struct {
	mu   sync.Mutex
	msgs []types.Message
	sent []*sqs.SendMessageInput
}

func (q *fakeDLQ) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := &sqs.ReceiveMessageOutput{Messages: q.msgs}
	q.msgs = nil
	return out, nil
}

func (q *fakeDLQ) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent = append(q.sent, in)
	return &sqs.SendMessageOutput{MessageId: aws.String("new")}, nil
}

func (q *fakeDLQ) DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return &sqs.DeleteMessageOutput{}, nil
}

func (q *fakeDLQ) ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput,
	...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

// TestFIFORedriveKeepsTheGroupAndCountsTheRedrive: to a FIFO work queue a
// redrive sends the letter's group ("nudge-redrive" if it had none) and
// "<messageId>-redrive-<n>" as deduplication id, n counting this redrive,
// with the letter's attributes and the redrive's own.
func TestFIFORedriveKeepsTheGroupAndCountsTheRedrive(t *testing.T) {
	t.Parallel()
	letter := func(id, group, body string, attrs map[string]types.MessageAttributeValue) types.Message {
		m := types.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String(body), MessageAttributes: attrs,
			Attributes: map[string]string{"SentTimestamp": "1764493200000"}}
		if group != "" {
			m.Attributes["MessageGroupId"] = group
		}
		return m
	}
	q := &fakeDLQ{msgs: []types.Message{
		letter("m-1", "acct-1", `{"v":1,"reminderId":"rem-1","channel":"email","provider":"webhook","dueAt":"2026-11-30T09:00:00Z"}`,
			map[string]types.MessageAttributeValue{deadletter.AttrErrorClass: str("rejected"),
				deadletter.AttrRedrives: {DataType: aws.String("Number"), StringValue: aws.String("1")}}),
		letter("m-2", "", `{"v":1,"reminderId":"rem-2","channel":"email","provider":"webhook","dueAt":"2026-11-30T09:00:00Z"}`,
			map[string]types.MessageAttributeValue{deadletter.AttrErrorClass: str("rejected")}),
	}}
	r, err := redrive.New(redrive.Config{Queue: q, DLQURL: "https://sqs/dlq.fifo", TargetURL: "https://sqs/work.fifo", By: "ops@example", Rate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := r.Select(context.Background(), redrive.Filter{Max: 10})
	if err != nil || len(sel.Chosen) != 2 {
		t.Fatalf("chose %d: %v", len(sel.Chosen), err)
	}
	if res, err := r.Move(context.Background(), sel, nil); err != nil || res.Moved != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	want := map[string][2]string{"rem-1": {"acct-1", "m-1-redrive-2"}, "rem-2": {"nudge-redrive", "m-2-redrive-1"}}
	if len(q.sent) != 2 {
		t.Fatalf("sent %d, want 2", len(q.sent))
	}
	for _, in := range q.sent {
		m, err := message.Decode([]byte(aws.ToString(in.MessageBody)))
		if err != nil {
			t.Fatal(err)
		}
		id := m.ReminderID
		got := [2]string{aws.ToString(in.MessageGroupId), aws.ToString(in.MessageDeduplicationId)}
		l := deadletter.Read(in.MessageAttributes)
		if aws.ToString(in.QueueUrl) != "https://sqs/work.fifo" || got != want[id] || in.DelaySeconds != 0 || l.Class != "rejected" || l.RedrivenBy != "ops@example" {
			t.Errorf("%s sent as %v to %s (delay %d), letter %+v; want %v", id, got, aws.ToString(in.QueueUrl), in.DelaySeconds, l, want[id])
		}
	}
}
