package batchtest

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/local/esm"
)

// Receive receives up to max messages from a real (or stand-in) queue and
// shapes them as Lambda's SQS event source mapping does (esm.Event).
func Receive(ctx context.Context, client *sqs.Client, url, arn string, max int32, wait time.Duration) (events.SQSEvent, error) {
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         max,
		WaitTimeSeconds:             int32(wait / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return events.SQSEvent{}, err
	}
	return esm.Event(out.Messages, arn), nil
}

// Acknowledge deletes the records of ev that resp does not list as failed,
// as the event source mapping does after an invocation.
func Acknowledge(ctx context.Context, client *sqs.Client, url string, ev events.SQSEvent, resp events.SQSEventResponse) error {
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	var entries []types.DeleteMessageBatchRequestEntry
	for i, r := range ev.Records {
		if !failed[r.MessageId] {
			entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.ReceiptHandle)})
		}
	}
	for len(entries) > 0 {
		n := min(10, len(entries))
		if _, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries[:n]}); err != nil {
			return err
		}
		entries = entries[n:]
	}
	return nil
}
