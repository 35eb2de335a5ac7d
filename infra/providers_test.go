package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/internal/provider/sns"

	"github.com/aws/jsii-runtime-go"

	"github.com/nudgehq/nudge/internal/deployment"
)

func allProviders() deployment.Stage {
	s := deployment.Dev()
	s.Providers = []string{"webhook", "ses", "sns"}
	s.ProviderSettings = map[string]string{ses.SettingFrom: "reminders@mail.example.com"}
	return s
}

// TestTheProvidersResources checks what a stage running SES and SNS gets:
// the repository's templates, a configuration set that suppresses bounced
// and complaining addresses, a topic, the consumer's settings, permissions
// scoped to exactly those, and the paused-account alarm.
func TestTheProvidersResources(t *testing.T) {
	s := allProviders()
	n, tpl := synth(t, s)
	tp := toJSON(t, tpl)

	want, err := ses.ReadTemplates(os.DirFS(filepath.Join("..", "templates", "email")))
	if err != nil || len(want) == 0 {
		t.Fatalf("the repository's templates: %v, %v", want, err)
	}
	if got := len(tp.resources("AWS::SES::Template")); got != len(want) {
		t.Errorf("%d SES templates deployed, the repository holds %d", got, len(want))
	}
	for _, w := range want {
		found := false
		for _, r := range tp.resources("AWS::SES::Template") {
			tplProps := props(r)["Template"].(map[string]any)
			if tplProps["TemplateName"] == ses.TemplatePrefix(s.Name)+w.Name {
				found = tplProps["SubjectPart"] == w.Subject && tplProps["TextPart"] == w.Text
			}
		}
		if !found {
			t.Errorf("template %s is not deployed as %s%s with its subject and text", w.Name, ses.TemplatePrefix(s.Name), w.Name)
		}
	}
	set := props(tp.one(t, "AWS::SES::ConfigurationSet", "Name", ses.ConfigurationSet(s.Name)))
	reasons, _ := json.Marshal(set["SuppressionOptions"])
	if !strings.Contains(string(reasons), "BOUNCE") || !strings.Contains(string(reasons), "COMPLAINT") {
		t.Errorf("the configuration set suppresses %s; want bounces and complaints", reasons)
	}
	props(tp.one(t, "AWS::SNS::Topic", "TopicName", sns.TopicName(s.Name)))

	// SES's record of each e-mail, for the review of an ambiguous one: the
	// set's events go to EventBridge, and a rule writes them to a log
	// group without the addresses they carry.
	if len(tp.resources("AWS::SES::ConfigurationSetEventDestination")) != 1 {
		t.Error("the configuration set publishes no sending events")
	}
	props(tp.one(t, "AWS::Logs::LogGroup", "LogGroupName", "/nudge/"+s.Name+"/email-events"))
	checkEmailEventsPolicy(t, s, tp)
	for _, r := range tp.resources("AWS::Events::Rule") {
		b, _ := json.Marshal(props(r))
		if !strings.Contains(string(b), "aws.ses") || props(r)["Name"] == feedbackRuleName(s) { // the feedback rule: feedback_test.go
			continue
		}
		for _, leak := range []string{"destination", "commonHeaders", "headers", "source\":\"$"} {
			if strings.Contains(string(b), "$.detail.mail."+leak) {
				t.Errorf("the e-mail events rule copies %s, which holds addresses: %s", leak, b)
			}
		}
		if !strings.Contains(string(b), ses.TagReminder) {
			t.Errorf("the e-mail events rule does not keep the reminder: %s", b)
		}
		// EventBridge delivers nothing to a log group named by the ARN
		// form that ends in ":*".
		target, _ := json.Marshal(props(r)["Targets"].([]any)[0].(map[string]any)["Arn"])
		if strings.Contains(string(target), ":*") || strings.Contains(string(target), "EmailEvents") && strings.Contains(string(target), "Fn::GetAtt") {
			t.Errorf("the rule's target is the log group's ARN with \":*\" (GetAtt Arn): %s", target)
		}
		if !strings.Contains(string(target), ":log-group:") {
			t.Errorf("the rule's target is not a log-group ARN: %s", target)
		}
	}

	consumer := props(tp.one(t, "AWS::Lambda::Function", "FunctionName", "nudge-"+s.Name+"-consumer"))
	env := consumer["Environment"].(map[string]any)["Variables"].(map[string]any)
	for k, v := range map[string]string{"NUDGE_PROVIDERS": "webhook,ses,sns", "NUDGE_SES_FROM": s.ProviderSettings[ses.SettingFrom], "NUDGE_SES_CONFIGURATION_SET": ses.ConfigurationSet(s.Name),
		"NUDGE_SES_TEMPLATE_PREFIX": ses.TemplatePrefix(s.Name), "NUDGE_SES_RATE": "14", "NUDGE_PACED_CONCURRENCY": "2"} {
		if env[k] != v {
			t.Errorf("consumer %s = %v, want %s", k, env[k], v)
		}
	}
	if _, ok := env["NUDGE_SNS_TOPIC_ARN"]; !ok {
		t.Error("the consumer is not told the topic")
	}

	// The consumer may send as the identity, with the stage's templates,
	// through its configuration set, and publish to the topic: no wildcard
	// beyond the template prefix.
	var send, publish string
	for _, p := range tp.resources("AWS::IAM::Policy") {
		for _, st := range props(p)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			b, _ := json.Marshal(st)
			switch {
			case strings.Contains(string(b), "ses:SendEmail"):
				send = string(b)
			case strings.Contains(string(b), "sns:Publish"):
				publish = string(b)
			}
		}
	}
	for _, part := range []string{"identity/mail.example.com", `configuration-set/",{"Ref":"EmailConfigurationSet`, "template/" + ses.TemplatePrefix(s.Name) + "*"} {
		if !strings.Contains(send, part) {
			t.Errorf("the consumer's SES grant lacks %s: %s", part, send)
		}
	}
	if strings.Contains(send, `"Resource":"*"`) || strings.Contains(send, "identity/*") {
		t.Errorf("the SES grant is not scoped: %s", send)
	}
	if !strings.Contains(publish, "DeliveryTopic") {
		t.Errorf("the consumer's publish grant is not on the delivery topic: %s", publish)
	}
	tp.one(t, "AWS::CloudWatch::Alarm", "AlarmName", "nudge-"+s.Name+"-provider-paused")
	if n.DeliveryTopic == nil || len(n.EmailTemplates) != len(want) {
		t.Fatal("the stack does not expose its topic and templates")
	}
	if msgs := nagFindings(t, n); len(msgs) > 0 {
		t.Fatalf("%d cdk-nag findings:\n%s", len(msgs), strings.Join(msgs, "\n"))
	}
}

func TestAStageWithoutTheWebhookHasNoWebhookParameters(t *testing.T) {
	s := allProviders()
	s.Providers = []string{"ses"}
	_, tpl := synth(t, s)
	tp := toJSON(t, tpl)
	if params, _ := tp["Parameters"].(map[string]any); params["WebhookUrl"] != nil {
		t.Error("a stage without the webhook asks for its URL")
	}
	if rules, _ := tp["Rules"].(map[string]any); rules["WebhookIsSet"] != nil {
		t.Error("a stage without the webhook requires it at deploy")
	}
}

func TestAnExistingTopicIsUsedNotCreated(t *testing.T) {
	s := allProviders()
	s.ProviderSettings[sns.SettingTopicARN] = "arn:aws:sns:us-east-1:123456789012:team-senders"
	_, tpl := synth(t, s)
	must(t, func() { tpl.ResourceCountIs(jsii.String("AWS::SNS::Topic"), jsii.Number(1)) }) // the alarm topic alone
	tp := toJSON(t, tpl)
	consumer := props(tp.one(t, "AWS::Lambda::Function", "FunctionName", "nudge-"+s.Name+"-consumer"))
	if env := consumer["Environment"].(map[string]any)["Variables"].(map[string]any); env["NUDGE_SNS_TOPIC_ARN"] != s.ProviderSettings[sns.SettingTopicARN] {
		t.Errorf("NUDGE_SNS_TOPIC_ARN = %v", env["NUDGE_SNS_TOPIC_ARN"])
	}
}

func TestProviderSettingsFromContext(t *testing.T) {
	ctx := map[string]any{"providers": "ses, sns,ses", "sesFrom": "a@example.com", "sesRate": "40", "sesAmbiguous": "retry"}
	s, err := StageFromContext(func(k string) any { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Providers, ",") != "ses,sns" || s.Rates["ses"] != 40 || s.ProviderSettings[ses.SettingFrom] != "a@example.com" || s.Ambiguous["ses"] != "retry" {
		t.Fatalf("stage %+v", s)
	}
	for _, bad := range []map[string]any{
		{"providers": "ses"},                 // no sender
		{"providers": "pigeon"},              // unknown
		{"providers": "sns", "sesRate": "x"}, // not a number
		{"providers": "sns", "snsAmbiguous": "maybe"},
	} {
		if _, err := StageFromContext(func(k string) any { return bad[k] }); err == nil {
			t.Errorf("context %v accepted", bad)
		}
	}
}

// checkEmailEventsPolicy: the e-mail events log group's resource policy
// lets EventBridge alone (events.amazonaws.com, no other principal) create
// streams, and only the stack's own rule (aws:SourceArn) put events.
func checkEmailEventsPolicy(t *testing.T, s deployment.Stage, tp template) {
	t.Helper()
	policy := props(tp.one(t, "AWS::Logs::ResourcePolicy", "PolicyName", "nudge-"+s.Name+"-email-events"))
	sub, ok := policy["PolicyDocument"].(map[string]any)["Fn::Sub"].([]any)
	if !ok || len(sub) != 2 {
		t.Fatalf("the e-mail events policy is not an Fn::Sub of the document and its ARNs: %s", asJSON(policy))
	}
	var doc struct {
		Statement []struct {
			Principal map[string]any
			Action    any
			Resource  string
			Condition map[string]map[string]string
		}
	}
	if err := json.Unmarshal([]byte(sub[0].(string)), &doc); err != nil {
		t.Fatalf("the e-mail events policy: %v: %s", err, sub[0])
	}
	var ruleID string
	for id, r := range tp.resources("AWS::Events::Rule") {
		if strings.Contains(asJSON(props(r)), "aws.ses") && props(r)["Name"] != feedbackRuleName(s) {
			ruleID = id
		}
	}
	vars := asJSON(sub[1])
	if !strings.Contains(vars, `"RuleArn":{"Fn::GetAtt":["`+ruleID+`","Arn"]}`) || !strings.Contains(vars, `"Arn":{"Fn::GetAtt":["EmailEvents`) {
		t.Errorf("the policy's ${RuleArn} is not the e-mail events rule %s, or ${Arn} not the log group: %s", ruleID, vars)
	}
	puts := 0
	for _, st := range doc.Statement {
		if asJSON(st.Principal) != `{"Service":"events.amazonaws.com"}` {
			t.Errorf("the e-mail events policy names %s; want events.amazonaws.com alone", asJSON(st.Principal))
		}
		if st.Resource != "${Arn}" {
			t.Errorf("the e-mail events policy grants on %s; want the log group", st.Resource)
		}
		switch asJSON(st.Action) {
		case `"logs:CreateLogStream"`:
		case `"logs:PutLogEvents"`:
			puts++
			if st.Condition["ArnEquals"]["aws:SourceArn"] != "${RuleArn}" {
				t.Errorf("logs:PutLogEvents is allowed to any source: %s; want aws:SourceArn = the stack's rule", asJSON(st.Condition))
			}
		default:
			t.Errorf("the e-mail events policy allows %s", asJSON(st.Action))
		}
	}
	if puts != 1 {
		t.Errorf("%d statements allow logs:PutLogEvents; want 1", puts)
	}
}
