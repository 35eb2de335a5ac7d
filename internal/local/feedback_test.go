package local_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/feedback"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/sesevents"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/provider/ses"
	nudgestatus "github.com/nudgehq/nudge/internal/status"
	"github.com/nudgehq/nudge/pkg/provider"
)

// TestTheFeedbackRuleTakesWhatTheFunctionRecords: the bus's rule to the
// feedback queue matches exactly the detail-types the feedback function
// records; an open, a click or a subscription it would ignore stays off
// the queue.
func TestTheFeedbackRuleTakesWhatTheFunctionRecords(t *testing.T) {
	t.Parallel()
	body := func(detailType string) []byte {
		return []byte(`{"source":"` + feedback.Source + `","detail-type":"` + detailType + `","detail":{}}`)
	}
	for _, dt := range append(slices.Clone(local.FeedbackDetailTypes), "Email Opened", "Email Clicked", "Email Subscribed") {
		_, err := feedback.Parse(body(dt))
		var fe *feedback.Error
		ignored := errors.As(err, &fe) && errors.Is(err, feedback.ErrNotOurs) && strings.Contains(fe.Why, "detail-type")
		if ruled := slices.Contains(local.FeedbackDetailTypes, dt); ruled == ignored {
			t.Errorf("%q: in the rule %v, but the function ignores it by its detail-type: %v", dt, ruled, err)
		}
	}
}

// startSESSystem starts the local system for a stage that runs every
// provider, ses among them, on the stand-ins nudge local exec started.
func startSESSystem(t testing.TB, prefix string) *local.System {
	return startStage(t, prefix, local.StandInStage(deployment.Dev()))
}

// TestSESFeedbackReachesTheLedger: the path the stack builds for SES's
// sending events, run locally: e-mails sent as the SES driver sends them
// (its Sender, with the stage's configuration set, to the SES stand-in
// behind the stand-in for its event publishing) to the mailbox simulator's
// addresses give SES's events on the default bus, which the rule delivers
// to the feedback queue, which the mapping feeds to the feedback function
// under the emulator, which records them on their deliveries (not the Send
// event of one already recorded sent with that message id: redundant,
// FeedbackRedundant, not written): a bounce and
// a suppressed address bounced for good, a complaint complained of, the
// others delivered; a delivery never sent has no feedback. A stage without
// ses has no feedback queue.
func TestSESFeedbackReachesTheLedger(t *testing.T) {
	standintest.AWSConfig(t)
	bins := standintest.Bootstraps(t, "consumer", "enqueue", "outcomes", "feedback")
	sys := startSESSystem(t, "fb")
	ctx := context.Background()
	if res := sys.Resources; !strings.HasSuffix(res.FeedbackURL, "/"+local.FeedbackQueueName(sys.Stage)) || res.FeedbackARN == "" {
		t.Fatalf("feedback queue %q (%q); want %s", sys.Resources.FeedbackURL, sys.Resources.FeedbackARN, local.FeedbackQueueName(sys.Stage))
	}
	attrs, err := sys.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(sys.Resources.FeedbackURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameVisibilityTimeout}})
	if err != nil || attrs.Attributes["VisibilityTimeout"] != "180" {
		t.Errorf("the feedback queue's attributes %v (%v); want a visibility of 6 × the function's 30 s", attrs, err)
	}
	h, err := sys.StartHarness(ctx, local.HarnessConfig{Bootstraps: bins, Consumers: 1, PollWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Feedback == nil || h.FeedbackMapping == nil || h.Feedback.Name != "feedback" {
		t.Fatalf("feedback function %v, mapping %v; want both for a stage that runs ses", h.Feedback, h.FeedbackMapping)
	}
	led, err := ledger.New(sys.DB, ledger.Config{Table: sys.Resources.Table, Shards: sys.Stage.Shards})
	if err != nil {
		t.Fatal(err)
	}
	client, _, err := local.ProviderClients(ctx, sys.SESSendEndpoint(), sys.SQSEndpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	sender, err := ses.New(ses.Config{Client: client, From: ses.LocalSender, ConfigurationSet: ses.ConfigurationSet(sys.Stage.Name),
		TemplatePrefix: ses.TemplatePrefix(sys.Stage.Name)})
	if err != nil {
		t.Fatal(err)
	}

	type want struct {
		kind      ledger.FeedbackKind
		permanent bool
		detail    string
	}
	cases := map[string]want{
		sesevents.Success:           {ledger.FeedbackDelivered, false, ""},
		sesevents.OutOfOffice:       {ledger.FeedbackDelivered, false, ""},
		sesevents.Bounce:            {ledger.FeedbackBounced, true, "Permanent/General"},
		sesevents.SuppressionList:   {ledger.FeedbackBounced, true, "Permanent/OnAccountSuppressionList"},
		sesevents.Complaint:         {ledger.FeedbackComplained, false, ""},
		"someone@customers.example": {ledger.FeedbackDelivered, false, ""},
	}
	due := time.Now().UTC().Add(-time.Second)
	keyOf := func(address string) message.DeliveryKey {
		id := "rem-fb-" + strings.NewReplacer("@", "-", ".", "-").Replace(address)
		return message.DeliveryKey{ReminderID: id, Channel: "email", Provider: ses.Name}
	}
	create := func(k message.DeliveryKey) {
		t.Helper()
		if err := led.Create(ctx, ledger.Delivery{ReminderID: k.ReminderID, AccountRef: "acct-fb", Channel: k.Channel, Provider: k.Provider,
			RecipientRef: "r", TemplateRef: "renewal-notice", DueAt: due, ExpiresAt: due.Add(time.Hour), Status: ledger.StatusQueued}); err != nil {
			t.Fatal(err)
		}
	}
	for address := range cases {
		k := keyOf(address)
		create(k)
		d, err := led.Claim(ctx, ledger.Claim{Key: k, Token: "tok", LeaseUntil: time.Now().Add(time.Minute), DueBy: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		receipt, err := sender.Send(ctx, provider.Request{DeliveryKey: k.String(), ReminderID: k.ReminderID, Channel: k.Channel, RecipientRef: "r",
			TemplateRef: "renewal-notice", DueAt: due, Attempt: 1, Address: address,
			TemplateData: map[string]string{"plan": "Pro", "reference": k.ReminderID}}, k.String())
		if err != nil || receipt.ID == "" {
			t.Fatalf("send to %s: %v (receipt %q)", address, err, receipt.ID)
		}
		if _, err := led.Complete(ctx, d, receipt.ID); err != nil {
			t.Fatal(err)
		}
	}
	unsent := message.DeliveryKey{ReminderID: "rem-fb-unsent", Channel: "email", Provider: ses.Name}
	create(unsent)

	// Past the feedback queue's visibility timeout: a receive the local
	// mapping lost (fauxqs closes a long poll's connection now and then)
	// hides its records until then.
	drain, cancel := context.WithTimeout(ctx, deployment.VisibilityFactor*sys.Stage.FeedbackTimeout+time.Minute)
	defer cancel()
	if err := h.DrainFeedback(drain); err != nil {
		t.Fatal(err)
	}
	if d, err := nudgestatus.QueueDepth(ctx, sys.SQS, sys.Resources.FeedbackURL); err != nil || d.Total() != 0 {
		t.Errorf("the feedback queue holds %+v after the drain (%v)", d, err)
	}
	for address, w := range cases {
		d, err := led.Get(ctx, keyOf(address))
		if err != nil {
			t.Fatal(err)
		}
		fb := d.Feedback
		if fb.Kind != w.kind || fb.Permanent != w.permanent || !strings.HasPrefix(fb.Detail, w.detail) || d.Failed() != (w.kind != ledger.FeedbackDelivered) ||
			d.Status != ledger.StatusSent || len(d.FeedbackSeen) < 1 {
			t.Errorf("%s: status %s, feedback %+v, failed %v, %d events seen; want %s sent, %+v", address, d.Status, fb, d.Failed(), len(d.FeedbackSeen), address, w)
		}
	}
	if d, err := led.Get(ctx, unsent); err != nil || d.Feedback.Kind != "" || len(d.FeedbackSeen) != 0 {
		t.Errorf("the delivery never sent: feedback %+v, %d seen (%v); want none", d.Feedback, len(d.FeedbackSeen), err)
	}
	if st := h.FeedbackMapping.Stats(); st.Invocations == 0 || st.BatchFailures != 0 || st.Deleted < int64(2*len(cases)) {
		t.Errorf("the feedback mapping: %+v; want every event acknowledged, no batch failed", st)
	}

	// A consumer's probe, sent a mark's spacing after the last e-mail (a
	// quiet stage): its report moves the feedback mark past it, and no
	// delivery holds it.
	time.Sleep(feedback.MarkEvery)
	probeAt := time.Now().UTC()
	probe := ledger.ProbeKey(ses.Name, "email", probeAt)
	if _, err := sender.Probe(ctx, probe.String()); err != nil {
		t.Fatal(err)
	}
	for {
		mark, err := led.FeedbackMark(ctx, ses.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !mark.Before(probeAt.Add(-consumer.RecordSkew)) {
			break
		}
		if drain.Err() != nil {
			t.Fatalf("the feedback mark %v never reached the probe sent at %v", mark, probeAt)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := led.Get(ctx, probe); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the probe's key in the ledger: %v, want not found", err)
	}

	// A stage without ses: no feedback queue, function or rule.
	plain := startSystem(t, "nofb")
	if plain.Resources.FeedbackURL != "" {
		t.Errorf("a stage running %v has a feedback queue %s", plain.Stage.Providers, plain.Resources.FeedbackURL)
	}
}
