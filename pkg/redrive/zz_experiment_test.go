package redrive_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/pkg/redrive"
)

func TestZZExperimentLongRead(t *testing.T) {
	f := setup(t)
	n := 1300
	for i := 0; i < n; i += 10 {
		var es []types.SendMessageBatchRequestEntry
		for j := i; j < i+10; j++ {
			es = append(es, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(fmt.Sprintf(`{"v":1,"reminderId":"rem-%05d","channel":"email","provider":"ses","dueAt":"2026-12-01T00:00:00Z"}`, j)),
				MessageAttributes: map[string]types.MessageAttributeValue{"nudge-error-class": str("ambiguous"), "nudge-error-reason": str("may have been sent (attempt 1 ended without a record); ses does not deduplicate, so it is not sent again: check the provider's record, then redrive to send or leave it dead")}})
		}
		if _, err := f.sqs.SendMessageBatch(f.ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(f.q.DLQURL), Entries: es}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := redrive.New(redrive.Config{Queue: f.sqs, DLQURL: f.q.DLQURL, TargetURL: f.q.WorkURL, ReviewHold: 20 * time.Second, Ledger: f.ledger})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		v0, fl0 := f.depth(f.q.DLQURL)
		start := time.Now()
		ls, err := r.List(f.ctx, 1_000_000)
		read := 0
		for _, l := range ls {
			read += l.Copies
		}
		v, fl := f.depth(f.q.DLQURL)
		t.Logf("before %s/%s: read %d of %d in %v (err %v); after: visible %s in flight %s", v0, fl0, read, n, time.Since(start), err, v, fl)
		time.Sleep(2 * time.Second)
	}
}
