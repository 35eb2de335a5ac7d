package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsses"
	"github.com/aws/jsii-runtime-go"
	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/provider/ses"
)

// sesParts is the SES provider's part: the templates from templates/email,
// the configuration set and its events, the consumer's, the intake's and
// the operator's rights on them, the way SES's events come back into the
// ledger (feedback.go), and the alarms on paused sending and on that way.
func sesParts() *providerParts {
	var templates []ses.Template
	var buildDir string
	return &providerParts{
		reports: true, // its events, recorded by the feedback function
		resources: func(n *NudgeStack, s deployment.Stage, props *NudgeStackProps) map[string]string {
			templates = readEmailTemplates(s, props.templatesDir())
			buildDir = props.BuildDir
			return map[string]string{ses.ResourceTemplates: ses.CatalogOf(templates).String()}
		},
		operated: func(n *NudgeStack, s deployment.Stage) {
			// The configuration set publishes its events to the account's
			// default bus: the e-mail events log and the feedback queue
			// both take them from there.
			bus := awsevents.EventBus_FromEventBusName(n.Stack, str("DefaultBus"), str(deployment.DefaultBus))
			n.email(s, templates, bus)
			n.feedback(s, buildDir, bus)
		},
		alarms: func(n *NudgeStack, s deployment.Stage, add alarmFunc) {
			paused := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: str("Nudge"), MetricName: str(consumer.MetricPaused),
				DimensionsMap: &map[string]*string{"Function": str("consumer"), "Provider": str(ses.Name)}, Statistic: str("Sum"), Period: awscdk.Duration_Minutes(num(1))})
			add("provider-paused", "SES refused sends because the account's sending is paused or suspended: e-mails wait in retries with an hour's backoff. Check the SES console (account dashboard, reputation) and resume sending.",
				paused, 0, 1, 0, awscloudwatch.TreatMissingData_NOT_BREACHING)
			n.feedbackAlarms(s, add)
		},
	}
}

// readEmailTemplates reads the templates the stage deploys from dir, and
// stops the synthesis on one SES cannot take, or on more than the intake's
// environment can list (ses.Catalog.CheckSize): Lambda would
// refuse that environment at deploy time, after other changes had begun.
func readEmailTemplates(s deployment.Stage, dir string) []ses.Template {
	templates, err := ses.ReadTemplates(os.DirFS(dir))
	if err != nil {
		panic(err)
	}
	if len(templates) == 0 {
		panic(fmt.Errorf("the stage runs ses, but %s holds no template: add one (templates/email/README.md)", dir))
	}
	for _, t := range templates {
		if name := ses.TemplatePrefix(s.Name) + t.Name; len(name) > ses.MaxTemplateName {
			panic(fmt.Errorf("template %s is named %s in stage %q: %d characters, over SES's %d; shorten the folder's name", t.Name, name, s.Name, len(name), ses.MaxTemplateName))
		}
	}
	if err := ses.CatalogOf(templates).CheckSize(); err != nil {
		panic(err)
	}
	return templates
}

// email deploys the SES side of the ses provider: the templates from the
// repository, a configuration set that suppresses addresses that bounced
// or complained and publishes its events to bus (the default bus), and
// the consumer's permission to send as the stage's identity, with those
// templates, through that set, and nothing else.
func (n *NudgeStack) email(s deployment.Stage, templates []ses.Template, bus awsevents.IEventBus) {
	n.TemplatePrefix = ses.TemplatePrefix(s.Name)
	for _, t := range templates {
		tpl := &awsses.CfnTemplate_TemplateProperty{TemplateName: str(ses.TemplatePrefix(s.Name) + t.Name), SubjectPart: str(t.Subject)}
		if t.HTML != "" {
			tpl.HtmlPart = str(t.HTML)
		}
		if t.Text != "" {
			tpl.TextPart = str(t.Text)
		}
		n.EmailTemplates = append(n.EmailTemplates, awsses.NewCfnTemplate(n.Stack, str("EmailTemplate-"+t.Name), &awsses.CfnTemplateProps{Template: tpl}))
		// The intake's list names the templates (NUDGE_SES_TEMPLATES): its
		// configuration changes after SES has them, never before.
		n.Intake.Node().AddDependency(n.EmailTemplates[len(n.EmailTemplates)-1])
	}
	set := awsses.NewConfigurationSet(n.Stack, str("EmailConfigurationSet"), &awsses.ConfigurationSetProps{
		ConfigurationSetName: str(ses.ConfigurationSet(s.Name)),
		SuppressionReasons:   awsses.SuppressionReasons_BOUNCES_AND_COMPLAINTS,
		ReputationMetrics:    jsii.Bool(true),
		SendingEnabled:       jsii.Bool(true),
	})
	n.emailEvents(s, set, bus)
	arn := func(resource, name string) *string {
		return n.Stack.FormatArn(&awscdk.ArnComponents{Service: str("ses"), Resource: str(resource), ResourceName: str(name)})
	}
	// The feedback mark the consumer reads before it sends an ambiguous
	// e-mail again (ledger.FeedbackMark), in the table's registry alone.
	n.Consumer.AddToRolePolicy(registryAccess([]string{"dynamodb:GetItem"}, n.Table.TableArn()))
	n.Consumer.AddToRolePolicy(allow([]string{"ses:SendEmail", "ses:SendTemplatedEmail"},
		arn("identity", ses.IdentityName(s.Provider(ses.Name, nil))), arn("configuration-set", *set.ConfigurationSetName()), arn("template", ses.TemplatePrefix(s.Name)+"*")))
	n.Operator.AddStatements(allow([]string{"ses:GetEmailTemplate"}, arn("template", ses.TemplatePrefix(s.Name)+"*")))
	// The intake knows the stack's templates from its environment; it asks
	// SES about another name (one created outside the stack) at most once a
	// minute (ses.DeployedTemplates).
	n.Intake.AddToRolePolicy(allow([]string{"ses:GetEmailTemplate"}, arn("template", ses.TemplatePrefix(s.Name)+"*")))
}

// emailEvents keeps SES's record of each e-mail, which an operator reads
// before redriving one dead-lettered as ambiguous: the configuration set
// publishes its sending events to the default event bus, and a rule writes
// one line per event to the log group /nudge/<stage>/email-events. The
// line holds the event's type, SES's message id and the reminder and
// attempt (from the send's tags), never the addresses the event carries.
func (n *NudgeStack) emailEvents(s deployment.Stage, set awsses.ConfigurationSet, bus awsevents.IEventBus) {
	set.AddEventDestination(str("ToEventBridge"), &awsses.ConfigurationSetEventDestinationOptions{
		Destination: awsses.EventDestination_EventBus(bus),
		Events: &[]awsses.EmailSendingEvent{awsses.EmailSendingEvent_SEND, awsses.EmailSendingEvent_DELIVERY, awsses.EmailSendingEvent_BOUNCE,
			awsses.EmailSendingEvent_COMPLAINT, awsses.EmailSendingEvent_REJECT, awsses.EmailSendingEvent_RENDERING_FAILURE, awsses.EmailSendingEvent_DELIVERY_DELAY},
	})
	removal := awscdk.RemovalPolicy_DESTROY
	if s.RetainData {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	logs := awslogs.NewLogGroup(n.Stack, str("EmailEvents"), &awslogs.LogGroupProps{
		LogGroupName: str("/nudge/" + s.Name + "/email-events"), Retention: retention(s.LogRetentionDays), RemovalPolicy: removal,
	})
	n.EmailEvents = logs
	rule := awsevents.NewCfnRule(n.Stack, str("EmailEventsRule"), &awsevents.CfnRuleProps{
		Description: str("Nudge " + s.Name + ": SES sending events of the configuration set, one line each, without addresses"),
		EventPattern: map[string]any{"source": []string{"aws.ses"},
			"detail": map[string]any{"mail": map[string]any{"tags": map[string]any{"ses:configuration-set": []string{ses.ConfigurationSet(s.Name)}}}}},
		Targets: &[]*awsevents.CfnRule_TargetProperty{{
			// The log group's ARN without the ":*" LogGroupArn ends with:
			// EventBridge accepts that form and then delivers nothing.
			Id: str("EmailEventsLog"), Arn: n.Stack.FormatArn(&awscdk.ArnComponents{Service: str("logs"), Resource: str("log-group"),
				ResourceName: logs.LogGroupName(), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME}),
			InputTransformer: &awsevents.CfnRule_InputTransformerProperty{
				InputPathsMap: &map[string]*string{
					"time": str("$.time"), "type": str("$.detail.eventType"), "id": str("$.detail.mail.messageId"),
					"reminder": str("$.detail.mail.tags." + ses.TagReminder + "[0]"), "attempt": str("$.detail.mail.tags." + ses.TagAttempt + "[0]"),
					"bounce": str("$.detail.bounce.bounceSubType"),
				},
				InputTemplate: str(`{"timestamp": <time>, "message": "<type> messageId=<id> reminder=<reminder> attempt=<attempt> bounce=<bounce>"}`),
			},
		}},
	})
	// EventBridge writes to the log group under this resource policy, as
	// events.amazonaws.com (delivery.logs.amazonaws.com, which AWS's sample
	// also names, is the service of vended logs, not EventBridge's). Only
	// this rule may put events: aws:SourceArn is the rule's ARN, which names
	// this account too, so an aws:SourceAccount beside it would add nothing
	// but the risk of a key EventBridge's request may lack. EventBridge's
	// CreateLogStream carries no source, so that statement cannot take the
	// condition (AWS's serverless-patterns sample split its policy for
	// this); a stream anyone else created receives no event.
	policy, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []map[string]any{{
		"Sid": "EventBridgeCreatesStreams", "Effect": "Allow", "Principal": map[string]any{"Service": "events.amazonaws.com"},
		"Action": "logs:CreateLogStream", "Resource": "LOG_GROUP_ARN",
	}, {
		"Sid": "TheRulePutsEvents", "Effect": "Allow", "Principal": map[string]any{"Service": "events.amazonaws.com"},
		"Action": "logs:PutLogEvents", "Resource": "LOG_GROUP_ARN",
		"Condition": map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": "RULE_ARN"}},
	}}})
	doc := strings.NewReplacer(`"LOG_GROUP_ARN"`, `"${Arn}"`, `"RULE_ARN"`, `"${RuleArn}"`).Replace(string(policy))
	awslogs.NewCfnResourcePolicy(n.Stack, str("EmailEventsPolicy"), &awslogs.CfnResourcePolicyProps{
		PolicyName:     str("nudge-" + s.Name + "-email-events"),
		PolicyDocument: awscdk.Fn_Sub(str(doc), &map[string]*string{"Arn": logs.LogGroupArn(), "RuleArn": rule.AttrArn()}),
	})
}
