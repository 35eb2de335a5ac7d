package consumer_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/deadletter"
	"github.com/nudgehq/nudge/internal/ledger"
)

// consoleRedrive does what the console's "redrive to a custom destination"
// (StartMessageMoveTask) does with each DLQ message: the same body and
// attributes, sent to the work queue as a new message (a new message id, a
// receive count starting again at 1), and deleted from the DLQ.
func (b *bundle) consoleRedrive() []types.Message {
	b.t.Helper()
	msgs := b.dlq()
	for _, m := range msgs {
		if _, err := b.sqs.SendMessage(b.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(b.q.WorkURL), MessageBody: m.Body, MessageAttributes: m.MessageAttributes}); err != nil {
			b.t.Fatal(err)
		}
		if _, err := b.sqs.DeleteMessage(b.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(b.q.DLQURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			b.t.Fatal(err)
		}
	}
	return msgs
}

// TestConsoleRedriveOfADeadDeliverySendsItOnce: a delivery dead-lettered for
// a provider 400, redriven from the console once the provider is fixed,
// arrives with a new message id and a receive count of 1, is claimed from
// dead and sent exactly once.
func TestConsoleRedriveOfADeadDeliverySendsItOnce(t *testing.T) {
	b := setup(t, options{script: "rem-70=400"}) // the first request fails, later ones succeed
	k := b.schedule("rem-70", b.clk.Now())
	first, _ := b.poll(1)
	if d := b.delivery(k); d.Status != ledger.StatusDead {
		t.Fatalf("not dead-lettered: %+v", d)
	}
	moved := b.consoleRedrive()
	if len(moved) != 1 {
		t.Fatalf("DLQ held %d messages, want 1", len(moved))
	}
	ev, resp := b.poll(1)
	r := ev.Records[0]
	if r.MessageId == first.Records[0].MessageId || r.Attributes["ApproximateReceiveCount"] != "1" || r.MessageAttributes[deadletter.AttrErrorClass].StringValue == nil {
		t.Fatalf("the redriven record is not what the console sends: id %s (was %s), receive count %s, attributes %v",
			r.MessageId, first.Records[0].MessageId, r.Attributes["ApproximateReceiveCount"], r.MessageAttributes)
	}
	d := b.delivery(k)
	if failures(resp) != 0 || d.Status != ledger.StatusSent || b.sink.Sends(k.String()) != 1 || b.sink.Requests(k.String()) != 2 {
		t.Fatalf("failures %v, delivery %+v, sink requests %d", resp.BatchItemFailures, d, b.sink.Requests(k.String()))
	}
	if len(b.dlq()) != 0 {
		t.Fatal("the DLQ is not empty after the redrive")
	}
}

// TestConsoleRedriveOfASentDeliveryIsADuplicate: a DLQ message whose
// delivery was in fact sent (its copy had been dead-lettered, say, before a
// later copy succeeded), redriven from the console, is recognised as a
// duplicate with one ledger request and never reaches the provider.
func TestConsoleRedriveOfASentDeliveryIsADuplicate(t *testing.T) {
	b := setup(t, options{})
	k := b.schedule("rem-71", b.clk.Now())
	if _, resp := b.poll(1); failures(resp) != 0 {
		t.Fatal(resp)
	}
	// The DLQ holds a copy of the sent delivery's message.
	if _, err := b.sqs.SendMessage(b.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(b.q.DLQURL), MessageBody: aws.String(b.body("rem-71", b.clk.Now())),
		MessageAttributes: map[string]types.MessageAttributeValue{deadletter.AttrErrorClass: {DataType: aws.String("String"), StringValue: aws.String("exhausted")}}}); err != nil {
		t.Fatal(err)
	}
	b.consoleRedrive()
	b.counter.Reset()
	_, resp := b.poll(1)
	d := b.delivery(k)
	if failures(resp) != 0 || d.Status != ledger.StatusSent || b.sink.Requests(k.String()) != 1 {
		t.Fatalf("failures %v, delivery %+v, sink requests %d", resp.BatchItemFailures, d, b.sink.Requests(k.String()))
	}
	if got := b.counter.Service("DynamoDB"); got != 2 { // the refused claim, and the test's own read
		t.Fatalf("%d DynamoDB requests for a recognised duplicate, want the refused claim and the test's read (%s)", got, b.counter)
	}
	if !strings.Contains(b.logs.String(), `"outcome":"duplicate"`) {
		t.Fatalf("no duplicate transition logged:\n%s", b.logs.String())
	}
}
