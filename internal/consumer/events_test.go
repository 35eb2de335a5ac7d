package consumer_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/nudgehq/nudge/internal/local/batchtest"
	"github.com/nudgehq/nudge/internal/message"
)

// TestSampleEventsDecode decodes every SQS event in events/ and checks that each
// record's body is what the file claims to show.
func TestSampleEventsDecode(t *testing.T) {
	t.Parallel()
	want := map[string][]bool{ // per record: is the body a valid message?
		"sqs-batch.json":      {true, true, true},
		"sqs-fifo-batch.json": {true, true, true},
		"sqs-poison.json":     {false, false, false, true},
		"sqs-duplicates.json": {true, true},
		"sqs-redriven.json":   {true},
		"sqs-email.json":      {true, true},
		"sqs-sns.json":        {true, true},
	}
	files, err := filepath.Glob("../../events/sqs-*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no events found: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		valid, ok := want[name]
		if !ok {
			t.Errorf("%s has no expectation in this test; add one", name)
			continue
		}
		ev := batchtest.LoadEvent(t, f)
		if len(ev.Records) != len(valid) {
			t.Fatalf("%s: %d records, want %d", name, len(ev.Records), len(valid))
		}
		for i, r := range ev.Records {
			if r.MessageId == "" || r.ReceiptHandle == "" || r.EventSource != "aws:sqs" || r.Attributes["ApproximateReceiveCount"] == "" {
				t.Errorf("%s record %d lacks the fields Lambda always sends", name, i)
			}
			_, err := message.Decode([]byte(r.Body))
			var de *message.DecodeError
			if valid[i] != (err == nil) || (err != nil && !errors.As(err, &de)) {
				t.Errorf("%s record %d: Decode error %v, want valid=%v", name, i, err, valid[i])
			}
		}
	}
	dup := batchtest.LoadEvent(t, "../../events/sqs-duplicates.json")
	if dup.Records[0].Body != dup.Records[1].Body || dup.Records[0].MessageId == dup.Records[1].MessageId {
		t.Error("sqs-duplicates.json should hold one delivery twice under two message ids")
	}
	fifo := batchtest.LoadEvent(t, "../../events/sqs-fifo-batch.json")
	if fifo.Records[0].Attributes["MessageGroupId"] == "" {
		t.Error("sqs-fifo-batch.json has no MessageGroupId")
	}
	red := batchtest.LoadEvent(t, "../../events/sqs-redriven.json")
	if red.Records[0].MessageAttributes["nudge-error-class"].StringValue == nil {
		t.Error("sqs-redriven.json should carry the DLQ attributes of a dead-lettered message")
	}
}
