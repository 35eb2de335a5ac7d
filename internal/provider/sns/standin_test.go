package sns_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/failure/awsfailure"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	snsprovider "github.com/nudgehq/nudge/internal/provider/sns"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// snsFixture is a topic on fauxqs's SNS with a raw SQS subscription, and
// the provider publishing to it through a fault front.
type snsFixture struct {
	sns      *snsprovider.Sender
	sqs      *sqs.Client
	queueURL string
}

var snsFaults = map[string]standin.Fault{
	"throttled": {Status: 400, Code: "Throttled", Message: "Rate exceeded"},
	"invalid":   {Status: 400, Code: "InvalidParameter", Message: "Invalid parameter: Message"},
	"notfound":  {Status: 404, Code: "NotFound", Message: "Topic does not exist"},
	"denied":    {Status: 403, Code: "AuthorizationError", Message: "not authorized to publish"},
	"internal":  {Status: 500, Code: "InternalError", Message: "internal error"},
	"drop":      {Drop: true},
}

func newSNSFixture(t *testing.T, fifo bool) snsFixture {
	t.Helper()
	ctx := context.Background()
	client, q := standintest.SNS(t), standintest.SQS(t)
	name := standintest.Name("nudge-deliveries")
	topicAttrs, queueAttrs := map[string]string{}, map[string]string{}
	if fifo {
		name += ".fifo"
		topicAttrs["FifoTopic"] = "true"
		queueAttrs["FifoQueue"] = "true"
	}
	topic, err := client.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name), Attributes: topicAttrs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: topic.TopicArn})
	})
	qname := standintest.Name("nudge-sub")
	if fifo {
		qname += ".fifo"
	}
	qo, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(qname), Attributes: queueAttrs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = q.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: qo.QueueUrl}) })
	qa, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: qo.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(qa.Attributes["QueueArn"]),
		Attributes: map[string]string{"RawMessageDelivery": "true"}}); err != nil {
		t.Fatal(err)
	}
	front, err := standin.NewFaultFront(os.Getenv("AWS_ENDPOINT_URL_SNS"), func(r *http.Request, body []byte) *standin.Fault {
		for kind, f := range snsFaults {
			if strings.Contains(string(body), "rem-"+kind+"-") {
				return &f
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = front.Close() })
	viaFront := sns.NewFromConfig(standintest.AWSConfig(t), func(o *sns.Options) { o.BaseEndpoint = aws.String(front.Endpoint) })
	p, err := snsprovider.New(snsprovider.Config{Client: viaFront, TopicARN: aws.ToString(topic.TopicArn), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return snsFixture{sns: p, sqs: q, queueURL: aws.ToString(qo.QueueUrl)}
}

// received drains the subscription's queue.
func (f snsFixture) received(t *testing.T) []sqsMessage {
	t.Helper()
	var out []sqsMessage
	for empty := 0; empty < 2; {
		m, err := f.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.queueURL), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Messages) == 0 {
			empty++
			continue
		}
		for _, msg := range m.Messages {
			attrs := map[string]string{}
			for k, v := range msg.MessageAttributes {
				attrs[k] = aws.ToString(v.StringValue)
			}
			out = append(out, sqsMessage{Body: aws.ToString(msg.Body), Attrs: attrs})
			_, _ = f.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(f.queueURL), ReceiptHandle: msg.ReceiptHandle})
		}
	}
	return out
}

type sqsMessage struct {
	Body  string
	Attrs map[string]string
}

func TestSNSPublishesReferencesWithFilterAttributes(t *testing.T) {
	f := newSNSFixture(t, false)
	key := "rem-sns-1:sms:sns"
	_, err := f.sns.Send(context.Background(), provider.Request{DeliveryKey: key, ReminderID: "rem-sns-1", Channel: "sms", RecipientRef: "cust-7",
		TemplateRef: "renewal", Address: "never@example.com", TemplateData: map[string]string{"plan": "Pro"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	got := f.received(t)
	if len(got) != 1 {
		t.Fatalf("the subscription got %d messages, want 1", len(got))
	}
	m := got[0]
	if m.Attrs[snsprovider.AttrChannel] != "sms" || m.Attrs[snsprovider.AttrProvider] != "sns" || m.Attrs[snsprovider.AttrDeliveryKey] != key {
		t.Errorf("message attributes %v", m.Attrs)
	}
	var body provider.Request
	if err := json.Unmarshal([]byte(m.Body), &body); err != nil || body.DeliveryKey != key || body.RecipientRef != "cust-7" {
		t.Errorf("body %s (%v)", m.Body, err)
	}
	if strings.Contains(m.Body, "@") || strings.Contains(m.Body, "Pro") {
		t.Errorf("the published body carries the address or the template data: %s", m.Body)
	}
}

func TestSNSFIFOTopicDropsARepeatOfTheSameDeliveryKey(t *testing.T) {
	f := newSNSFixture(t, true)
	key := "rem-fifo-1:push:sns"
	req := provider.Request{DeliveryKey: key, ReminderID: "rem-fifo-1", Channel: "push", RecipientRef: "dev-1", TemplateRef: "t"}
	for range 2 {
		if _, err := f.sns.Send(context.Background(), req, key); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.received(t); len(got) != 1 {
		t.Fatalf("the FIFO subscription got %d messages for one delivery key sent twice, want 1", len(got))
	}
}

func TestSNSDeduplicationIDFitsSNSLimit(t *testing.T) {
	long := strings.Repeat("r", 128) + ":email:webhook"
	if id := snsprovider.DeduplicationID(long); len(id) != 64 || id == snsprovider.DeduplicationID(long+"x") {
		t.Fatalf("DeduplicationID of a %d-byte key = %q", len(long), id)
	}
	if id := snsprovider.DeduplicationID("rem-1:email:sns"); id != "rem-1:email:sns" {
		t.Fatalf("a short key is not its own id: %q", id)
	}
}

// snsRow is a row of SNS's failure table: the fault the front answers for
// ("rem-<kind>-" in the body), the driver's row it is, and what it must
// become.
type snsRow struct {
	kind, answer string
	want         failure.Kind
	class        failure.Class
	sent         bool
}

// snsTable is the driver's classification table (sns.Driver.Contract), row
// by row, as TestSNSFailureTable makes each answer happen.
var snsTable = []snsRow{
	{"throttled", "Throttled, Throttling, KMSThrottling", failure.KindRetry, failure.ClassThrottled, false},
	{"invalid", "InvalidParameter, ValidationError", failure.KindPermanent, failure.ClassRejected, false},
	{"notfound", "NotFound: no such topic", failure.KindPermanent, failure.ClassConfig, false},
	{"denied", "AuthorizationError, AccessDenied, KMS errors", failure.KindPermanent, failure.ClassConfig, false},
	{"internal", "500 InternalError", failure.KindAmbiguous, failure.ClassServer, false},
	{"drop", "accepted, the answer lost", failure.KindAmbiguous, failure.ClassNetwork, true},
}

// TestTheDeclaredTableIsTheTestedOne: every row of the driver's
// classification table is a row TestSNSFailureTable makes happen against
// the stand-in, with the same outcome, and no tested row is undeclared.
func TestTheDeclaredTableIsTheTestedOne(t *testing.T) {
	tested := map[string]snsRow{}
	for _, r := range snsTable {
		tested[r.answer] = r
	}
	declared := map[string]bool{}
	for _, d := range snsprovider.Driver.Contract.Classification {
		declared[d.Answer] = true
		if r, ok := tested[d.Answer]; !ok || r.want != d.Kind || r.class != d.Class {
			t.Errorf("declared %q → %v/%s; the failure table has %+v", d.Answer, d.Kind, d.Class, r)
		}
	}
	for answer := range tested {
		if !declared[answer] {
			t.Errorf("the failure table tests %q, which the driver does not declare", answer)
		}
	}
}

func TestSNSFailureTable(t *testing.T) {
	f := newSNSFixture(t, false)
	rows := snsTable
	for _, r := range rows {
		t.Run(r.kind, func(t *testing.T) {
			id := "rem-" + r.kind + "-1"
			_, err := f.sns.Send(context.Background(), provider.Request{DeliveryKey: id + ":sms:sns", ReminderID: id, Channel: "sms"}, id+":sms:sns")
			o := awsfailure.Default.Classify(err)
			if err == nil || o.Kind != r.want || o.Class != r.class {
				t.Errorf("%v classified %v/%s, want %v/%s", err, o.Kind, o.Class, r.want, r.class)
			}
			if got := len(f.received(t)); (got == 1) != r.sent {
				t.Errorf("the subscription got %d messages; want sent=%v", got, r.sent)
			}
		})
	}
}
