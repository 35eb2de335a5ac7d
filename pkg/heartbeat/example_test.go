package heartbeat_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/heartbeat"
)

// visibility stands in for the SQS client: it prints each extension, with
// the time since the batch began on the fake clock.
type visibility struct {
	clk   *clock.Fake
	start time.Time
}

func (v visibility) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput,
	_ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	fmt.Printf("at %v: %s invisible for %ds more\n", v.clk.Now().Sub(v.start), aws.ToString(in.ReceiptHandle), in.VisibilityTimeout)
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// The heartbeat runs as batch middleware around each record. A record
// still in flight after Threshold (20 s) is made invisible for Extension
// (90 s) more, and again every Interval (30 s), until it ends; a quick
// record costs no call. The handler passes heartbeat.Watched(ctx) to the
// work that must stop if an extension fails (another consumer may then
// receive the message). In a Lambda function, Visibility is the
// *sqs.Client and Clock is left to its default, the real clock.
func Example() {
	clk := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	hb, err := heartbeat.New(heartbeat.Config{
		Visibility: visibility{clk: clk, start: clk.Now()},
		Extension:  90 * time.Second,
		Threshold:  20 * time.Second,
		Interval:   30 * time.Second,
		Clock:      clk,
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// Each record's body says how long its work takes; the work moves the
	// fake clock on, 10 s at a time, once the heartbeat waits on it. (One
	// record at a time, the slow one first: they share the fake clock, and
	// a finished record's heartbeat leaves its last wait on it, which
	// WaitForWaiters would count.)
	slow := batch.HandlerFunc(func(ctx context.Context, rec events.SQSMessage) error {
		work, _ := time.ParseDuration(rec.Body)
		for done := time.Duration(0); done < work; done += 10 * time.Second {
			if err := heartbeat.Watched(ctx).Err(); err != nil {
				return err // the message was lost: stop
			}
			clk.WaitForWaiters(1, time.Minute)
			clk.Advance(10 * time.Second)
		}
		fmt.Printf("%s done after %v\n", rec.ReceiptHandle, work)
		return nil
	})
	queueURL := func(rec events.SQSMessage) string { return batch.QueueURLFromARN(rec.EventSourceARN) }
	p, err := batch.New(slow, batch.Config{
		Concurrency: 1,
		Clock:       clk,
		Middleware:  []batch.Middleware{hb.Middleware(queueURL)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	const arn = "arn:aws:sqs:us-east-1:123456789012:nudge-work"
	resp, _ := p.Process(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m0", ReceiptHandle: "h0", Body: "100s", EventSourceARN: arn},
		{MessageId: "m1", ReceiptHandle: "h1", Body: "10s", EventSourceARN: arn},
	}})
	fmt.Println("failed:", resp.BatchItemFailures)
	// Output:
	// at 20s: h0 invisible for 90s more
	// at 50s: h0 invisible for 90s more
	// at 1m20s: h0 invisible for 90s more
	// h0 done after 1m40s
	// h1 done after 10s
	// failed: []
}
