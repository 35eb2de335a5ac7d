package batchtest

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// LoadEvent decodes the SQS event in the file at path, failing the test if it
// cannot.
func LoadEvent(t testing.TB, path string) events.SQSEvent {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("batchtest: %v", err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("batchtest: %s is not an SQS event: %v", path, err)
	}
	if len(ev.Records) == 0 {
		t.Fatalf("batchtest: %s has no records", path)
	}
	return ev
}

// Event builds an SQS event from bodies, one record each, with message ids
// "m0", "m1", … and receipt handles "h0", "h1", ….
func Event(bodies ...string) events.SQSEvent {
	ev := events.SQSEvent{}
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId:      "m" + itoa(i),
			ReceiptHandle:  "h" + itoa(i),
			Body:           b,
			Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
			EventSource:    "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:nudge-work",
			AWSRegion:      "us-east-1",
		})
	}
	return ev
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// Visibility is a fake of the SQS visibility API that records each change.
type Visibility struct {
	mu sync.Mutex
	// Calls counts ChangeMessageVisibilityBatch requests.
	Calls int
	// Changes maps a receipt handle to the last visibility (seconds) set.
	Changes map[string]int32
	// Err, if set, fails every call.
	Err error
}

// ChangeMessageVisibilityBatch records the changes.
func (v *Visibility) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.Calls++
	if v.Err != nil {
		return nil, v.Err
	}
	if v.Changes == nil {
		v.Changes = map[string]int32{}
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		v.Changes[aws.ToString(e.ReceiptHandle)] = e.VisibilityTimeout
	}
	return out, nil
}
