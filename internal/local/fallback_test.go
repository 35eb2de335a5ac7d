package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/sesevents"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/outcome"
	"github.com/nudgehq/nudge/internal/provider/ses"
	snsprovider "github.com/nudgehq/nudge/internal/provider/sns"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// TestABouncedEmailTakesItsSMSFallbackOnce is the closed loop, run locally
// as the stack runs it: a reminder scheduled through the HTTP intake to
// SES's bounce@ mailbox with an SMS fallback through SNS. The enqueue hands
// the e-mail to the queue, the consumer sends it through SES (its stand-in),
// SES's events come back through the default bus, the feedback queue and
// the feedback function, which records the bounce on the delivery; the
// ledger's stream brings that to the outcomes function, which takes the
// fallback; the enqueue and the consumer send it. At the end: the e-mail
// sent then bounced for good, the SMS sent once (one message at the
// topic's subscriber), both seen through the API, and the events of each
// on the local bus: the e-mail's sent and bounced, the SMS's sent, naming
// the e-mail it stands in for.
func TestABouncedEmailTakesItsSMSFallbackOnce(t *testing.T) {
	standintest.AWSConfig(t)
	bins := standintest.Bootstraps(t, "consumer", "enqueue", "outcomes", "feedback", "intake")
	sys := startSESSystem(t, "loop")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	h, err := sys.StartHarness(ctx, local.HarnessConfig{Bootstraps: bins, Consumers: 1, IntakeInstances: 1, PollWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	api := h.Intake.Client()

	const id = "renewal-4821"
	due := time.Now().UTC()
	in := schedule.Input{ID: id, AccountRef: "acct-4821", DueAt: due.Format(time.RFC3339Nano),
		Metadata: map[string]string{"plan": "Pro", "renewsOn": due.Format("2 January 2006"), "reference": id},
		Deliveries: []schedule.DeliveryInput{{Channel: "email", Provider: ses.Name, RecipientRef: "contact/4821", TemplateRef: "renewal-notice",
			Address: sesevents.Bounce, Fallback: &schedule.FallbackInput{Channel: "sms", Provider: snsprovider.Name,
				RecipientRef: "contact/4821/phone", TemplateRef: "renewal-notice-v3"}}}}
	if c, err := api.Put(ctx, in); err != nil || c.Outcome != schedule.Created {
		t.Fatalf("PUT: %+v, %v", c, err)
	}
	email := message.DeliveryKey{ReminderID: id, Channel: "email", Provider: ses.Name}
	sms := message.DeliveryKey{ReminderID: id, Channel: "sms", Provider: snsprovider.Name}
	if d, err := h.Ledger.Get(ctx, sms); err != nil || d.Status != ledger.StatusHeld || d.FallbackOf.Key(id) != email {
		t.Fatalf("the fallback before the e-mail failed: %+v, %v; want held, the e-mail's", d, err)
	}

	// The schedule ticks and the mapping runs until both have ended.
	go h.RunMappings(ctx)
	var e, s ledger.Delivery
	for {
		if _, err := h.Enqueue.Invoke(ctx, fmt.Appendf(nil, `{"source":"aws.scheduler","scheduledTime":%q}`, time.Now().UTC().Format(time.RFC3339))); err != nil {
			t.Fatal(err)
		}
		if e, err = h.Ledger.Get(ctx, email); err != nil {
			t.Fatal(err)
		}
		if s, err = h.Ledger.Get(ctx, sms); err != nil {
			t.Fatal(err)
		}
		if e.Failed() && s.Status.Terminal() {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the e-mail is %s (feedback %q), its fallback %s", e.Status, e.Feedback.Note(), s.Status)
		case <-time.After(2 * time.Second):
		}
	}
	if e.Status != ledger.StatusSent || e.Feedback.Kind != ledger.FeedbackBounced || !e.Feedback.Permanent {
		t.Errorf("the e-mail: %s, feedback %+v; want sent, then bounced for good", e.Status, e.Feedback)
	}
	if s.Status != ledger.StatusSent || s.Attempts != 1 {
		t.Errorf("the SMS fallback: %s after %d attempts; want sent at the first", s.Status, s.Attempts)
	}

	// The SMS reached the topic's subscriber once.
	if n := topicCopies(t, sys, sms); n != 1 {
		t.Errorf("the topic's subscriber got %d copies of %s; want 1", n, sms)
	}

	// The API shows both.
	doc, err := api.Get(ctx, id)
	if err != nil || len(doc.Deliveries) != 2 {
		t.Fatalf("GET: %+v, %v", doc, err)
	}
	body, _ := json.Marshal(doc)
	for _, want := range []string{`"bounced`, `"fallbackOf"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET %s does not show %s: %s", id, want, body)
		}
	}

	// The events, once the stream is read to its end.
	if err := h.DrainOutcomes(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string][]outcome.Event{}
	for _, ev := range outcomeEvents(t, sys) {
		got[ev.DeliveryKey] = append(got[ev.DeliveryKey], ev)
	}
	has := func(key message.DeliveryKey, o outcome.Outcome) *outcome.Event {
		for _, ev := range got[key.String()] {
			if ev.Outcome == o {
				return &ev
			}
		}
		return nil
	}
	if ev := has(email, outcome.Sent); ev == nil || ev.Fallback != sms.String() {
		t.Errorf("the e-mail's sent event: %+v; want one naming its fallback", ev)
	}
	if has(email, outcome.Bounced) == nil {
		t.Errorf("no bounced event for the e-mail: %+v", got[email.String()])
	}
	if ev := has(sms, outcome.Sent); ev == nil || ev.FallbackOf != email.String() {
		t.Errorf("the SMS's sent event: %+v; want one naming the e-mail it stands in for", ev)
	}
	if st := h.MappingStats(); st.BatchFailures != 0 {
		t.Errorf("the mapping: %+v", st)
	}
}

// topicCopies counts the messages of delivery k the SNS topic's subscriber
// queue holds.
func topicCopies(t *testing.T, sys *local.System, k message.DeliveryKey) int {
	t.Helper()
	n := 0
	for _, m := range receiveAll(t, sys, sys.Resources.Topic.QueueURL) {
		if a, ok := m.MessageAttributes[snsprovider.AttrDeliveryKey]; ok && aws.ToString(a.StringValue) == k.String() {
			n++
		} else if strings.Contains(aws.ToString(m.Body), k.String()) {
			n++
		}
	}
	return n
}

// outcomeEvents reads every outcome event the outcomes queue holds.
func outcomeEvents(t *testing.T, sys *local.System) []outcome.Event {
	t.Helper()
	var out []outcome.Event
	for _, m := range receiveAll(t, sys, sys.Resources.OutcomesURL) {
		var env struct {
			Detail outcome.Event `json:"detail"`
		}
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &env); err != nil {
			t.Fatalf("%v: %s", err, aws.ToString(m.Body))
		}
		out = append(out, env.Detail)
	}
	return out
}

// receiveAll receives every message of queue url until a receive finds
// none, hiding each for a minute.
func receiveAll(t *testing.T, sys *local.System, url string) []types.Message {
	t.Helper()
	var out []types.Message
	for {
		r, err := sys.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, VisibilityTimeout: 60, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Messages) == 0 {
			return out
		}
		out = append(out, r.Messages...)
	}
}
