package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/outcome"
	"github.com/nudgehq/nudge/internal/status"
)

// eventReaders is how many receives read the outcomes queue at once.
const eventReaders = 4

// readEvents reads, and removes, every outcome event the local bus
// delivered to the outcomes queue at url: the envelope EventBridge
// delivers, its detail decoded. It reads until the queue is empty (no
// message visible, in flight or delayed) and a receive finds nothing. A
// message that is not an outcome event is a problem, named.
func readEvents(ctx context.Context, q *sqs.Client, url string, problem func(format string, args ...any)) ([]outcome.Event, error) {
	var (
		mu     sync.Mutex
		events []outcome.Event
		errs   = make(chan error, eventReaders)
		wg     sync.WaitGroup
	)
	for range eventReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60})
				if err != nil {
					errs <- fmt.Errorf("demo: read the outcome events: %w", err)
					return
				}
				if len(out.Messages) == 0 {
					depth, err := status.QueueDepth(ctx, q, url)
					if err != nil {
						errs <- fmt.Errorf("demo: read the outcome events: %w", err)
						return
					}
					if depth.Total() == 0 {
						return
					}
					continue
				}
				var del []types.DeleteMessageBatchRequestEntry
				for i, m := range out.Messages {
					var env struct {
						DetailType string        `json:"detail-type"`
						Source     string        `json:"source"`
						Detail     outcome.Event `json:"detail"`
					}
					if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &env); err != nil || env.Source != outcome.Source || env.DetailType != env.Detail.DetailType() {
						problem("the outcomes queue holds a message that is not an outcome event (source %q, detail-type %q): %v", env.Source, env.DetailType, err)
					} else {
						mu.Lock()
						events = append(events, env.Detail)
						mu.Unlock()
					}
					del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
				}
				if _, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del}); err != nil {
					errs <- fmt.Errorf("demo: remove the outcome events read: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return events, nil
}
