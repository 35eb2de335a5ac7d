package demo

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nudgehq/nudge/pkg/provider/ses"
	"github.com/nudgehq/nudge/pkg/provider/sns"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/local/standin"
	"github.com/nudgehq/nudge/pkg/message"
)

// The demo's channels, by provider: e-mail goes out through SES for half
// the reminders and the webhook for the other half; SMS is published to
// SNS, for the team's own SMS gateway.
const (
	sesShare = 0.5
	smsShare = 0.3
)

// expectFor is the outcome a provider's contract calls for after a fault
// (on the first request, or on every one for a fault that repeats): the
// row of docs/reliability.md's fault model the run checks.
func expectFor(prov, fault string) (ledger.Status, failure.Class) {
	switch fault {
	case "400":
		return ledger.StatusDead, failure.ClassRejected
	case "down":
		return ledger.StatusDead, failure.ClassExhausted
	case "500", "hang", "drop":
		// SES may have sent (and with "drop" it has): its policy is
		// review, so the delivery waits in the DLQ for an operator. The
		// webhook and SNS retry with the same key.
		if prov == ses.Name {
			return ledger.StatusDead, failure.ClassAmbiguous
		}
	}
	return ledger.StatusSent, ""
}

// awsFault is the answer a fault kind stands for at SES or SNS.
func awsFault(prov, fault string) *standin.Fault {
	switch fault {
	case "500":
		return &standin.Fault{Status: 500, Code: map[string]string{ses.Name: "InternalFailure", sns.Name: "InternalError"}[prov], Message: "internal error"}
	case "429":
		if prov == ses.Name {
			return &standin.Fault{Status: 429, Code: "TooManyRequestsException", Message: "Maximum sending rate exceeded."}
		}
		return &standin.Fault{Status: 400, Code: "Throttled", Message: "Rate exceeded"}
	case "400":
		if prov == ses.Name {
			return &standin.Fault{Status: 400, Code: "MessageRejected", Message: "Email address is not valid"}
		}
		return &standin.Fault{Status: 400, Code: "InvalidParameter", Message: "Invalid parameter: Message"}
	case "down":
		return &standin.Fault{Status: 503, Code: "ServiceUnavailable", Message: "Service unavailable"}
	case "hang":
		return &standin.Fault{Hang: true}
	case "drop":
		return &standin.Fault{Drop: true}
	}
	return nil
}

// channels are the SES and SNS sides of a run: fault fronts before the
// stand-ins (the consumers call them), and what each stand-in recorded.
type channels struct {
	plan     *plan
	sesURL   string // the SES stand-in, for its store
	ses, sns *standin.FaultFront
	subQueue string // the SNS topic's subscriber queue

	mu        sync.Mutex
	requests  map[string]int // by delivery key, at the fronts
	accepted  int            // answers of 200 from either stand-in
	delivered map[string]int // SNS messages the subscriber received, by delivery key
}

func newChannels(p *plan, sesURL, snsURL, subQueue string) (*channels, error) {
	c := &channels{plan: p, sesURL: sesURL, subQueue: subQueue, requests: map[string]int{}, delivered: map[string]int{}}
	var err error
	if c.ses, err = standin.NewFaultFront(sesURL, func(_ *http.Request, body []byte) *standin.Fault {
		return c.decide(ses.Name, sesKey(body))
	}); err != nil {
		return nil, err
	}
	if c.sns, err = standin.NewFaultFront(snsURL, func(_ *http.Request, body []byte) *standin.Fault {
		return c.decide(sns.Name, snsKey(body))
	}); err != nil {
		c.ses.Close()
		return nil, err
	}
	count := func(_ []byte, status int) {
		if status == http.StatusOK {
			c.mu.Lock()
			c.accepted++
			c.mu.Unlock()
		}
	}
	c.ses.OnAnswer, c.sns.OnAnswer = count, count
	return c, nil
}

func (c *channels) close() {
	c.ses.Close()
	c.sns.Close()
}

// decide applies the plan's fault for key on its first request (on every
// one for a fault that repeats). A request without a key (SNS's other
// calls) passes.
func (c *channels) decide(prov, key string) *standin.Fault {
	if key == "" {
		return nil
	}
	c.mu.Lock()
	c.requests[key]++
	attempt := c.requests[key]
	c.mu.Unlock()
	k, err := message.ParseDeliveryKey(key)
	d, ok := c.plan.byKey[k]
	if err != nil || !ok || d.fault == "" || attempt > 1 && !c.plan.repeats(d.fault) {
		return nil
	}
	return awsFault(prov, d.fault)
}

// requestsFor is how many requests SES or SNS received for key.
func (c *channels) requestsFor(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests[key]
}

// sesKey is the delivery key a SendEmail request carries in its header.
func sesKey(body []byte) string {
	var in struct {
		Content struct {
			Template struct {
				Headers []struct{ Name, Value string }
			}
		}
	}
	if json.Unmarshal(body, &in) != nil {
		return ""
	}
	for _, h := range in.Content.Template.Headers {
		if strings.EqualFold(h.Name, ses.HeaderDeliveryKey) {
			return h.Value
		}
	}
	return ""
}

// snsKey is the delivery key a Publish request carries as an attribute.
func snsKey(body []byte) string {
	q, err := url.ParseQuery(string(body))
	if err != nil || q.Get("Action") != "Publish" {
		return ""
	}
	for k, v := range q {
		if strings.HasSuffix(k, ".Name") && len(v) == 1 && v[0] == sns.AttrDeliveryKey {
			return q.Get(strings.TrimSuffix(k, ".Name") + ".Value.StringValue")
		}
	}
	return ""
}

// acceptedCount is how many requests SES and SNS accepted so far.
func (c *channels) acceptedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted
}

// drain receives what the SNS subscriber queue holds, counting each
// delivery key, until ctx ends.
func (c *channels) drain(ctx context.Context, q *sqs.Client) {
	for ctx.Err() == nil {
		_, _ = c.receive(ctx, q, 1)
	}
}

// receive takes one receive's worth from the subscriber queue.
func (c *channels) receive(ctx context.Context, q *sqs.Client, wait int32) (int, error) {
	out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(c.subQueue), MaxNumberOfMessages: 10,
		WaitTimeSeconds: wait, MessageAttributeNames: []string{sns.AttrDeliveryKey}})
	if err != nil {
		if ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
		}
		return 0, err
	}
	var del []string
	c.mu.Lock()
	for _, m := range out.Messages {
		if a, ok := m.MessageAttributes[sns.AttrDeliveryKey]; ok {
			c.delivered[aws.ToString(a.StringValue)]++
		}
		del = append(del, aws.ToString(m.ReceiptHandle))
	}
	c.mu.Unlock()
	for _, h := range del {
		_, _ = q.DeleteMessage(context.WithoutCancel(ctx), &sqs.DeleteMessageInput{QueueUrl: aws.String(c.subQueue), ReceiptHandle: aws.String(h)})
	}
	return len(out.Messages), nil
}

// records are what each stand-in recorded, by delivery key: the e-mails
// the SES stand-in stored since the run started, and the SNS messages the
// subscriber received (drained to the end).
func (c *channels) records(ctx context.Context, q *sqs.Client, since time.Time) (emails, published map[string]int, err error) {
	for {
		n, err := c.receive(ctx, q, 1)
		if err != nil {
			return nil, nil, err
		}
		if n == 0 {
			break
		}
	}
	sent, err := standin.SentEmails(ctx, c.sesURL)
	if err != nil {
		return nil, nil, err
	}
	emails = map[string]int{}
	for _, e := range sent {
		if e.At < since.Unix() {
			continue // an earlier run's, on the same stand-in
		}
		if key := e.Header(ses.HeaderDeliveryKey); key != "" {
			if k, err := message.ParseDeliveryKey(key); err == nil && c.plan.byKey[k] != nil {
				emails[key]++
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	published = map[string]int{}
	for k, n := range c.delivered {
		published[k] = n
	}
	return emails, published, nil
}
