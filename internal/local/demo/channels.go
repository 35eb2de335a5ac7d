package demo

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/internal/provider/sns"
	"github.com/nudgehq/nudge/pkg/provider"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/check"
	"github.com/nudgehq/nudge/internal/local/sink"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/message"
)

// This file is each provider's side of a run: the faults the plan injects
// at it, its requests counted by delivery key, and its own record of what
// it accepted, which the checker holds the ledger to. The webhook's is the
// sink (sinkPlan); SES's and SNS's are fault fronts before their stand-ins,
// which the consumers call, and the stand-ins' records: the SES store and
// the SNS topic's subscriber queue.

// sinkPlan is the webhook's behaviour: each delivery's fault on its first
// request, or on every request for a fault that repeats, and a random
// latency on all.
func (p *plan) sinkPlan() sink.Plan {
	return func(key string, attempt int) sink.Fault {
		k, err := message.ParseDeliveryKey(key)
		var fault string
		if d, ok := p.Deliveries[k]; ok && err == nil {
			fault = d.Fault
		}
		f := sink.Fault{Kind: "ok", Delay: p.latency()}
		if attempt > 1 && !p.repeats(fault) {
			return f
		}
		switch fault {
		case "500", "down":
			f.Kind = "500"
		case "429":
			f.Kind, f.RetryAfter = "429", retryAfter
		case "400", "hang", "drop":
			f.Kind = fault
		}
		return f
	}
}

// awsFault is the answer a fault kind stands for at the service of
// provider prov (its driver's StandIn.Faults).
func awsFault(prov, fault string) *standin.Fault {
	switch fault {
	case "hang":
		return &standin.Fault{Hang: true}
	case "drop":
		return &standin.Fault{Drop: true}
	}
	d, _ := registry.Lookup(prov)
	a, ok := d.StandIn.Faults[fault]
	if !ok {
		return nil
	}
	return &standin.Fault{Status: a.Status, Code: a.Code, Message: a.Message}
}

// stoodIn is the name of the provider the stand-in of kind plays.
func stoodIn(kind provider.StandInKind) string {
	d, _ := registry.StoodInBy(kind)
	return d.Name
}

// channels are the providers' sides of a run: the sink, and fault fronts
// before the SES and SNS stand-ins (the consumers call them), with what
// each stand-in recorded.
type channels struct {
	plan     *plan
	sink     *sink.Sink
	q        *sqs.Client
	sesURL   string // the SES stand-in, for its store
	ses, sns *standin.FaultFront
	subQueue string // the SNS topic's subscriber queue
	// instancePaths is the webhook's path and a slash: each consumer
	// instance posts to it followed by its name.
	instancePaths string

	mu        sync.Mutex
	requests  map[string]int // by delivery key, at the fronts
	accepted  int            // answers of 200 from either stand-in
	delivered map[string]int // SNS messages the subscriber received, by delivery key
}

func newChannels(p *plan, sys *local.System) (*channels, error) {
	c := &channels{plan: p, sink: sys.Sink, q: sys.SQS, sesURL: sys.SESEndpoint, subQueue: sys.Resources.Topic.QueueURL,
		requests: map[string]int{}, delivered: map[string]int{}}
	webhook, err := url.Parse(sys.WebhookURL)
	if err != nil {
		return nil, err
	}
	c.instancePaths = webhook.Path + "/"
	// Before the stand-in for SES's event publishing: an e-mail whose answer
	// the front drops still has its events, as in AWS.
	if c.ses, err = standin.NewFaultFront(sys.SESSendEndpoint(), func(_ *http.Request, body []byte) *standin.Fault {
		return c.decide(stoodIn(provider.EmailStandIn), sesKey(body))
	}); err != nil {
		return nil, err
	}
	if c.sns, err = standin.NewFaultFront(sys.SQSEndpoint, func(_ *http.Request, body []byte) *standin.Fault {
		return c.decide(stoodIn(provider.TopicStandIn), snsKey(body))
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

// fronts are where the consumers send their SES and SNS calls.
func (c *channels) fronts() local.Endpoints {
	return local.Endpoints{SES: c.ses.Endpoint, SNS: c.sns.Endpoint}
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
	d, ok := c.plan.Deliveries[k]
	if err != nil || !ok || d.Fault == "" || attempt > 1 && !c.plan.repeats(d.Fault) {
		return nil
	}
	return awsFault(prov, d.Fault)
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

// acceptedSoFar is how many sends the providers accepted: the sink's, and
// SES's and SNS's answers of 200.
func (c *channels) acceptedSoFar() int {
	n, _ := c.sink.Totals()
	c.mu.Lock()
	defer c.mu.Unlock()
	return n + c.accepted
}

// drain receives what the SNS subscriber queue holds, counting each
// delivery key, until ctx ends.
func (c *channels) drain(ctx context.Context) {
	for ctx.Err() == nil {
		_, _ = c.receive(ctx, 1)
	}
}

// receive takes one receive's worth from the subscriber queue.
func (c *channels) receive(ctx context.Context, wait int32) (int, error) {
	out, err := c.q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(c.subQueue), MaxNumberOfMessages: 10,
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
		_, _ = c.q.DeleteMessage(context.WithoutCancel(ctx), &sqs.DeleteMessageInput{QueueUrl: aws.String(c.subQueue), ReceiptHandle: aws.String(h)})
	}
	return len(out.Messages), nil
}

// evidence adds what each provider recorded of the plan's deliveries to
// ev: the copies of each it holds (the sink's acceptances, the e-mails the
// SES stand-in stored since the run started, the SNS messages the
// subscriber received, drained to the end), the requests it received for
// each and in all, when the sink accepted each, and the sink's repeats
// after an answered acceptance.
func (c *channels) evidence(ctx context.Context, since time.Time, ev *check.Evidence) error {
	for {
		n, err := c.receive(ctx, 1)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	sent, err := standin.SentEmails(ctx, c.sesURL)
	if err != nil {
		return err
	}
	ev.Recorded, ev.Requests, ev.AcceptedAt = map[message.DeliveryKey]int{}, map[message.DeliveryKey]int{}, map[message.DeliveryKey]time.Time{}
	record := func(key string, n int) {
		if k, err := message.ParseDeliveryKey(key); err == nil {
			ev.Recorded[k] += n
		}
	}
	// The webhook: the sink deduplicates by key, so it holds each once.
	for _, key := range c.sink.Keys() {
		record(key, 1)
		if k, err := message.ParseDeliveryKey(key); err == nil {
			a, _ := c.sink.Accepted(key)
			ev.AcceptedAt[k] = a.At
		}
	}
	for _, r := range c.sink.Resends() {
		resend := check.Resend{Key: r.Key, Times: r.Times}
		// Each consumer instance posts to its own path: the webhook's, then
		// its name.
		if name, ok := strings.CutPrefix(r.AnsweredTo, c.instancePaths); ok {
			resend.AnsweredTo = name
		}
		if a, ok := c.sink.Accepted(r.Key); ok {
			resend.Received = a.Received
		}
		ev.Resends = append(ev.Resends, resend)
	}
	// SES: the stand-in's store.
	for _, e := range sent {
		if e.At < since.Unix() {
			continue // an earlier run's, on the same stand-in
		}
		if key := e.Header(ses.HeaderDeliveryKey); key != "" {
			if k, err := message.ParseDeliveryKey(key); err == nil {
				if _, planned := c.plan.Deliveries[k]; planned {
					record(key, 1)
				}
				if ledger.IsProbe(k) {
					if ev.Probes == nil {
						ev.Probes = map[string]int{}
					}
					ev.Probes[k.Provider]++
				}
			}
		}
	}
	// SNS: the subscriber's messages.
	c.mu.Lock()
	for key, n := range c.delivered {
		record(key, n)
	}
	for k := range c.plan.Deliveries {
		ev.Requests[k] = c.requests[k.String()]
	}
	c.mu.Unlock()
	for k := range c.plan.Deliveries {
		if k.Provider == stoodIn(provider.SinkStandIn) {
			ev.Requests[k] = c.sink.Requests(k.String())
		}
	}
	ev.ProviderRequests = map[string]int64{stoodIn(provider.SinkStandIn): int64(c.sink.RequestTotal()),
		stoodIn(provider.EmailStandIn): c.ses.Requests(), stoodIn(provider.TopicStandIn): c.sns.Requests()}
	return nil
}
