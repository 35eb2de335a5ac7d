package consumer_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/pkg/provider"
)

type captureSQS struct{ sent []*sqs.SendMessageInput }

func (c *captureSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.sent = append(c.sent, in)
	return &sqs.SendMessageOutput{}, nil
}

func TestDeadLetterToAFIFODLQCarriesGroupAndDeduplicationIDs(t *testing.T) {
	t.Parallel()
	q := &captureSQS{}
	c, err := consumer.New(consumer.Config{Ledger: memLedger{}, Providers: map[string]provider.Provider{"webhook": provider.Func(nil)},
		Queue: q, QueueURL: "https://sqs.example/1/work.fifo", DLQURL: "https://sqs.example/1/dlq.fifo", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Handle(context.Background(), events.SQSMessage{MessageId: "m-1", Body: "garbage", Attributes: map[string]string{"MessageGroupId": "acct-17", "ApproximateReceiveCount": "1"}})
	if err != nil || len(q.sent) != 1 {
		t.Fatalf("Handle = %v, %d sends", err, len(q.sent))
	}
	in := q.sent[0]
	if aws.ToString(in.MessageGroupId) != "acct-17" || aws.ToString(in.MessageDeduplicationId) != "m-1" || aws.ToString(in.MessageBody) != "garbage" {
		t.Fatalf("DLQ send %+v", in)
	}
}
