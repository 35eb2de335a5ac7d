package ses_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/failure/awsfailure"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/provider/awscall"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// sesFixture is an SES provider on the SES stand-in, behind a fault front
// that answers for addresses whose local part names a fault.
type sesFixture struct {
	ses      *ses.Sender
	endpoint string // the stand-in's, for its store
	prefix   string
}

// sesFaults are what the fault front answers, by the recipient's local
// part: the answers real SES gives and the stand-in cannot.
var sesFaults = map[string]standin.Fault{
	"throttled":   {Status: 429, Code: "TooManyRequestsException", Message: "Too Many Requests"},
	"maxrate":     {Status: 400, Code: "LimitExceededException", Message: "Maximum sending rate exceeded."},
	"quota":       {Status: 400, Code: "LimitExceededException", Message: "Daily message quota exceeded."},
	"rejected":    {Status: 400, Code: "MessageRejected", Message: "Email address is not valid: bad-address@example.com"},
	"suppressed":  {Status: 400, Code: "MessageRejected", Message: "The address suppressed@example.com is on the account-level suppression list"},
	"unverified":  {Status: 400, Code: "MessageRejected", Message: "Email address is not verified. The following identities failed the check in region US-EAST-1: unverified@example.com"},
	"paused":      {Status: 400, Code: "SendingPausedException", Message: "Sending is paused for this account."},
	"suspended":   {Status: 400, Code: "AccountSuspendedException", Message: "Account suspended."},
	"mailfrom":    {Status: 400, Code: "MailFromDomainNotVerifiedException", Message: "MAIL FROM domain not verified"},
	"internal":    {Status: 500, Code: "InternalFailure", Message: "internal error"},
	"unavailable": {Status: 503, Code: "ServiceUnavailable", Message: "unavailable"},
	"drop":        {Drop: true},
	"hang":        {Hang: true},
}

func newSESFixture(t *testing.T) sesFixture {
	t.Helper()
	client, endpoint := standintest.SES(t)
	prefix := standintest.Name("t") + "-"
	for _, tpl := range []ses.Template{{Name: "renewal", Subject: "Your {{plan}} plan renews on {{renewsOn}}", Text: "Plan {{plan}}, {{renewsOn}}.", HTML: "<p>Plan {{plan}}</p>"}} {
		if _, err := client.CreateEmailTemplate(context.Background(), &sesv2.CreateEmailTemplateInput{
			TemplateName:    aws.String(prefix + tpl.Name),
			TemplateContent: &sestypes.EmailTemplateContent{Subject: aws.String(tpl.Subject), Text: aws.String(tpl.Text), Html: aws.String(tpl.HTML)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	front, err := standin.NewFaultFront(endpoint, func(r *http.Request, body []byte) *standin.Fault {
		var in struct {
			Destination struct{ ToAddresses []string }
		}
		_ = json.Unmarshal(body, &in)
		for _, to := range in.Destination.ToAddresses {
			local, _, _ := strings.Cut(to, "@")
			kind, _, _ := strings.Cut(local, "+")
			if f, ok := sesFaults[kind]; ok {
				return &f
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = front.Close() })
	cfg := standintest.AWSConfig(t)
	viaFront := sesv2.NewFromConfig(cfg, func(o *sesv2.Options) { o.BaseEndpoint = aws.String(front.Endpoint) })
	p, err := ses.New(ses.Config{Client: viaFront, From: "reminders@nudge.example", ConfigurationSet: "nudge-test",
		TemplatePrefix: prefix, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return sesFixture{ses: p, endpoint: endpoint, prefix: prefix}
}

// sentTo returns the e-mails the stand-in accepted for address.
func (f sesFixture) sentTo(t *testing.T, address string) []standin.SentEmail {
	t.Helper()
	all, err := standin.SentEmails(context.Background(), f.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var out []standin.SentEmail
	for _, e := range all {
		if len(e.Destination.To) == 1 && e.Destination.To[0] == address {
			out = append(out, e)
		}
	}
	return out
}

func TestSESSendsTheStoredTemplateWithTheDeliveryKeyHeader(t *testing.T) {
	f := newSESFixture(t)
	addr := standintest.Name("ana") + "@example.com"
	key := "rem-ses-1:email:ses"
	receipt, err := f.ses.Send(context.Background(), provider.Request{
		DeliveryKey: key, ReminderID: "rem-ses-1", Channel: "email", TemplateRef: "renewal", Address: addr,
		TemplateData: map[string]string{"plan": "Pro", "renewsOn": "2026-12-31"},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	sent := f.sentTo(t, addr)
	if len(sent) != 1 {
		t.Fatalf("the stand-in holds %d e-mails to the address, want 1", len(sent))
	}
	e := sent[0]
	if e.Subject != "Your Pro plan renews on 2026-12-31" || !strings.Contains(e.Body.Text, "Plan Pro, 2026-12-31.") {
		t.Errorf("rendered %q / %q; the template data did not reach the template", e.Subject, e.Body.Text)
	}
	if got := e.Header(ses.HeaderDeliveryKey); got != key {
		t.Errorf("header %s = %q, want %q", ses.HeaderDeliveryKey, got, key)
	}
	if e.From != "reminders@nudge.example" || receipt.ID != e.MessageID {
		t.Errorf("from %q, receipt %q, message id %q", e.From, receipt.ID, e.MessageID)
	}
}

// TestSESFailureTable sends through the stand-in (the missing template, a
// template that cannot render) and its fault front (SES's other answers),
// and checks each outcome and that no error text carries the address.
// sesRow is a row of SES's failure table: the fault (the recipient's
// local part the fault front answers for), the driver's row it is, and what
// the answer must become.
type sesRow struct {
	local, template, answer string
	kind                    failure.Kind
	class                   failure.Class
	after                   time.Duration // the least Retry-After wanted
	sent                    bool          // whether the stand-in accepted it
}

// sesTable is the driver's classification table (ses.Driver.Contract), row
// by row, as TestSESFailureTable makes each answer happen.
var sesTable = []sesRow{
	{"missing-template", "no-such-template", "NotFoundException: no such template, identity or configuration set", failure.KindPermanent, failure.ClassConfig, 0, false},
	{"throttled", "renewal", "TooManyRequestsException", failure.KindRetry, failure.ClassThrottled, 0, false},
	{"maxrate", "renewal", "LimitExceededException: maximum sending rate", failure.KindRetry, failure.ClassThrottled, 0, false},
	{"quota", "renewal", "LimitExceededException: daily quota (retried after LongBackoff)", failure.KindRetry, failure.ClassThrottled, time.Hour, false},
	{"rejected", "renewal", "MessageRejected", failure.KindPermanent, failure.ClassRejected, 0, false},
	{"suppressed", "renewal", "MessageRejected: on the suppression list", failure.KindPermanent, failure.ClassSuppressed, 0, false},
	{"unverified", "renewal", "MessageRejected: address not verified", failure.KindPermanent, failure.ClassConfig, 0, false},
	{"mailfrom", "renewal", "MailFromDomainNotVerifiedException", failure.KindPermanent, failure.ClassConfig, 0, false},
	{"paused", "renewal", "SendingPausedException (retried after LongBackoff)", failure.KindRetry, failure.ClassPaused, time.Hour, false},
	{"suspended", "renewal", "AccountSuspendedException (retried after LongBackoff)", failure.KindRetry, failure.ClassPaused, time.Hour, false},
	{"internal", "renewal", "500 InternalFailure", failure.KindAmbiguous, failure.ClassServer, 0, false},
	{"unavailable", "renewal", "503 ServiceUnavailable", failure.KindRetry, failure.ClassServer, 0, false},
	{"drop", "renewal", "accepted, the answer lost", failure.KindAmbiguous, failure.ClassNetwork, 0, true},
	{"hang", "renewal", "no answer in the timeout, after the request was written", failure.KindAmbiguous, failure.ClassTimeout, 0, false},
}

// TestTheDeclaredTableIsTheTestedOne: every row of the driver's
// classification table is a row TestSESFailureTable makes happen against
// the stand-in, with the same outcome, and no tested row is undeclared.
func TestTheDeclaredTableIsTheTestedOne(t *testing.T) {
	tested := map[string]sesRow{}
	for _, r := range sesTable {
		tested[r.answer] = r
	}
	declared := map[string]bool{}
	for _, d := range ses.Driver.Contract.Classification {
		declared[d.Answer] = true
		if r, ok := tested[d.Answer]; !ok || r.kind != d.Kind || r.class != d.Class {
			t.Errorf("declared %q → %v/%s; the failure table has %+v", d.Answer, d.Kind, d.Class, r)
		}
	}
	for answer := range tested {
		if !declared[answer] {
			t.Errorf("the failure table tests %q, which the driver does not declare", answer)
		}
	}
}

func TestSESFailureTable(t *testing.T) {
	f := newSESFixture(t)
	rows := sesTable
	for _, r := range rows {
		t.Run(r.local, func(t *testing.T) {
			addr := r.local + "+" + standintest.Name("x") + "@example.com"
			key := "rem-" + r.local + ":email:ses"
			_, err := f.ses.Send(context.Background(), provider.Request{DeliveryKey: key, ReminderID: "rem-" + r.local, Channel: "email",
				TemplateRef: r.template, Address: addr, TemplateData: map[string]string{"plan": "Pro", "renewsOn": "soon"}}, key)
			if err == nil {
				t.Fatal("sent; want a failure")
			}
			o := awsfailure.Default.Classify(err)
			if o.Kind != r.kind || o.Class != r.class || o.RetryAfter < r.after {
				t.Errorf("%v: classified %v/%s after %v; want %v/%s after at least %v", err, o.Kind, o.Class, o.RetryAfter, r.kind, r.class, r.after)
			}
			msg := strings.ToLower(err.Error())
			if strings.Contains(msg, strings.ToLower(addr)) || strings.Contains(msg, "@example.com") {
				t.Errorf("the error carries an address: %v", err)
			}
			if got := len(f.sentTo(t, addr)); (got == 1) != r.sent || got > 1 {
				t.Errorf("the stand-in accepted %d e-mails; want sent=%v", got, r.sent)
			}
		})
	}
}

func TestSESWithoutAnAddressIsAConfigFailureAndSendsNothing(t *testing.T) {
	f := newSESFixture(t)
	_, err := f.ses.Send(context.Background(), provider.Request{DeliveryKey: "rem-1:email:ses", ReminderID: "rem-1", Channel: "email", TemplateRef: "renewal"}, "rem-1:email:ses")
	if o := awsfailure.Default.Classify(err); o.Kind != failure.KindPermanent || o.Class != failure.ClassConfig {
		t.Fatalf("%v classified %v/%s, want permanent config", err, o.Kind, o.Class)
	}
}

func TestSESTemplatesAnswersFromTheStandIn(t *testing.T) {
	f := newSESFixture(t)
	client, _ := standintest.SES(t)
	check := &ses.TemplateLookup{Client: client, Prefix: f.prefix}
	for ref, want := range map[string]bool{"renewal": true, "no-such-template": false} {
		vars, got, err := check.TemplateVariables(context.Background(), ref)
		if err != nil || got != want {
			t.Errorf("TemplateVariables(%q) = %v, %v; want %v", ref, got, err, want)
		}
		if want && strings.Join(vars, ",") != "plan,renewsOn" {
			t.Errorf("the template renders %v; want plan, renewsOn", vars)
		}
	}
	// Asked again, it answers from what it learned, found or not.
	counting := &countingTemplates{TemplateReader: client}
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	check = &ses.TemplateLookup{Client: counting, Prefix: f.prefix, Now: func() time.Time { return now }}
	for range 3 {
		for _, ref := range []string{"renewal", "no-such-template"} {
			if _, _, err := check.TemplateVariables(context.Background(), ref); err != nil {
				t.Fatal(err)
			}
		}
	}
	if counting.calls.Load() != 2 {
		t.Errorf("%d reads of SES for two templates asked three times each; want 2", counting.calls.Load())
	}
	// A warm intake learns of a template deployed since it asked: the
	// answers are forgotten after Remember (5 minutes).
	now = now.Add(5 * time.Minute)
	if _, _, err := check.TemplateVariables(context.Background(), "no-such-template"); err != nil {
		t.Fatal(err)
	}
	if counting.calls.Load() != 3 {
		t.Errorf("%d reads of SES after the answers aged 5 minutes; want 3 (asked again)", counting.calls.Load())
	}
}

type countingTemplates struct {
	ses.TemplateReader
	calls atomic.Int32
}

func (c *countingTemplates) GetEmailTemplate(ctx context.Context, in *sesv2.GetEmailTemplateInput, o ...func(*sesv2.Options)) (*sesv2.GetEmailTemplateOutput, error) {
	c.calls.Add(1)
	return c.TemplateReader.GetEmailTemplate(ctx, in, o...)
}

func TestTheProvidersTurnOffTheSDKsRetries(t *testing.T) {
	// A send the SDK repeated on its own would be a second e-mail behind
	// the ledger's back: a 500 must reach the stand-in once.
	var calls atomic.Int32
	front, err := standin.NewFaultFront("http://127.0.0.1:1", func(*http.Request, []byte) *standin.Fault {
		calls.Add(1)
		return &standin.Fault{Status: 500, Code: "InternalFailure", Message: "boom"}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	cfg := standintest.AWSConfig(t)
	client := sesv2.NewFromConfig(cfg, func(o *sesv2.Options) { o.BaseEndpoint = aws.String(front.Endpoint) })
	p, _ := ses.New(ses.Config{Client: client, From: "a@nudge.example"})
	_, err = p.Send(context.Background(), provider.Request{Address: "b@example.com", TemplateRef: "t"}, "k")
	if ae := new(awscall.AnswerError); !errors.As(err, &ae) || calls.Load() != 1 {
		t.Fatalf("err %v after %d calls; want one call answered 500", err, calls.Load())
	}
}

// TestSESProbeSendsAPlainEmailToTheSimulatorUnderItsKey: the probe needs
// no template, goes to the mailbox simulator's success address under its
// key (the header the feedback function reads), and needs the
// configuration set, without which SES reports nothing.
func TestSESProbeSendsAPlainEmailToTheSimulatorUnderItsKey(t *testing.T) {
	f := newSESFixture(t)
	key := standintest.Name("nudge-probe-1") + ":email:ses"
	receipt, err := f.ses.Probe(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var found []standin.SentEmail
	for _, e := range f.sentTo(t, ses.ProbeAddress) {
		if e.Header(ses.HeaderDeliveryKey) == key {
			found = append(found, e)
		}
	}
	if len(found) != 1 || found[0].MessageID != receipt.ID || found[0].Subject == "" {
		t.Fatalf("the stand-in holds %d probes under %s (receipt %q), want 1 with its message id and a subject", len(found), key, receipt.ID)
	}
	bare, err := ses.New(ses.Config{Client: sesv2.NewFromConfig(standintest.AWSConfig(t)), From: "reminders@nudge.example"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bare.Probe(context.Background(), key)
	if o := awsfailure.Default.Classify(err); err == nil || o.Class != failure.ClassConfig || !strings.Contains(err.Error(), ses.EnvConfigurationSet) {
		t.Fatalf("a probe without a configuration set: %v (%+v); want a config error naming %s", err, o, ses.EnvConfigurationSet)
	}
}
