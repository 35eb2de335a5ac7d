package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-lambda-go/events"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/feedback"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/provider/ses"
)

// sesStage is a stage that runs ses (and the webhook): the feedback path's.
func sesStage(s deployment.Stage) deployment.Stage {
	s.Providers = []string{"webhook", "ses"}
	s.ProviderSettings = map[string]string{ses.SettingFrom: "reminders@mail.example.com"}
	return s
}

// feedbackIDs are the logical ids of the feedback resources of a synthesized stack.
type feedbackIDs struct{ fn, role, logs, table, queue, dlq, rule string }

func feedbackIDsOf(t *testing.T, n *NudgeStack) feedbackIDs {
	t.Helper()
	var ids feedbackIDs
	must(t, func() {
		id := func(c awscdk.CfnElement) string { return *n.Stack.GetLogicalId(c) }
		ids.fn = id(n.Feedback.Node().DefaultChild().(awscdk.CfnElement))
		ids.role = id(n.Feedback.Role().Node().DefaultChild().(awscdk.CfnElement))
		ids.table = id(n.Table.Node().DefaultChild().(awscdk.CfnElement))
		ids.queue = id(n.FeedbackQueue.Node().DefaultChild().(awscdk.CfnElement))
		ids.dlq = id(n.FeedbackDLQ.Node().DefaultChild().(awscdk.CfnElement))
		ids.rule = id(n.FeedbackRule.Node().DefaultChild().(awscdk.CfnElement))
		ids.logs = id(n.Stack.Node().FindChild(str("FeedbackLogs")).Node().DefaultChild().(awscdk.CfnElement))
	})
	return ids
}

// TestTheFeedbackPath checks, for dev and prod running ses, the way SES's
// events come back: the queue and its DLQ, the rule on the default bus
// (source, detail-types, the stage's configuration set) targeting the
// queue, the queue policy that lets that rule alone send, the function
// (sizes, environment, log group), its SQS mapping, its role (exactly the
// ledger's two calls on reminders' partitions, the mapping's grant, its
// logs), the outputs, and cdk-nag.
func TestTheFeedbackPath(t *testing.T) {
	prod := deployment.Prod()
	prod.AlarmEmail = "oncall@example.com"
	for _, s := range []deployment.Stage{sesStage(deployment.Dev()), sesStage(prod)} {
		t.Run(s.Name, func(t *testing.T) {
			n, tpl := synth(t, s)
			tp := toJSON(t, tpl)
			ids := feedbackIDsOf(t, n)
			queueArn := `{"Fn::GetAtt":["` + ids.queue + `","Arn"]}`
			deletion := map[bool]string{true: "Retain", false: "Delete"}[s.RetainData]

			// The queue: encrypted, TLS only, visibility 6 × the function's
			// timeout, 4 days, 5 receives to the DLQ.
			qr := tp.one(t, "AWS::SQS::Queue", "QueueName", "nudge-"+s.Name+"-feedback")
			q := props(qr)
			if q["SqsManagedSseEnabled"] != true || num64(t, q["VisibilityTimeout"]) != 6*s.FeedbackTimeout.Seconds() ||
				num64(t, q["MessageRetentionPeriod"]) != deployment.WorkRetention.Seconds() || qr["DeletionPolicy"] != deletion {
				t.Errorf("the feedback queue: %s (deletion %v); want SSE-SQS, visibility %v s, 4 days, %s", asJSON(q), qr["DeletionPolicy"],
					6*s.FeedbackTimeout.Seconds(), deletion)
			}
			if got, want := asJSON(q["RedrivePolicy"]), `{"deadLetterTargetArn":{"Fn::GetAtt":["`+ids.dlq+`","Arn"]},"maxReceiveCount":5}`; got != want {
				t.Errorf("the feedback queue's redrive policy %s, want %s", got, want)
			}
			if vis := num64(t, q["VisibilityTimeout"]); vis < s.FeedbackTimeout.Seconds()+feedbackBatchingWindow.Seconds() {
				t.Errorf("visibility %v s does not span the function's timeout and the batching window", vis)
			}
			dr := tp.one(t, "AWS::SQS::Queue", "QueueName", "nudge-"+s.Name+"-feedback-dlq")
			dlq := props(dr)
			if dlq["SqsManagedSseEnabled"] != true || num64(t, dlq["MessageRetentionPeriod"]) != 14*24*3600 || dr["DeletionPolicy"] != deletion ||
				dlq["RedrivePolicy"] != nil {
				t.Errorf("the feedback DLQ: %s (deletion %v); want SSE-SQS, 14 days, no redrive of its own", asJSON(dlq), dr["DeletionPolicy"])
			}
			if allow := asJSON(dlq["RedriveAllowPolicy"]); !strings.Contains(allow, `"redrivePermission":"byQueue"`) ||
				!strings.Contains(allow, `":nudge-`+s.Name+`-feedback"]]}]`) {
				t.Errorf("the feedback DLQ's RedriveAllowPolicy %s does not name the feedback queue alone", allow)
			}
			for _, id := range []string{ids.queue, ids.dlq} {
				tls := false
				for _, p := range tp.resources("AWS::SQS::QueuePolicy") {
					doc := asJSON(props(p)["PolicyDocument"])
					if asJSON(props(p)["Queues"]) == `[{"Ref":"`+id+`"}]` && strings.Contains(doc, `{"Bool":{"aws:SecureTransport":"false"}}`) {
						tls = true
					}
				}
				if !tls {
					t.Errorf("queue %s does not refuse requests without TLS", id)
				}
			}

			// The rule: on the default bus, SES's seven sending events of
			// the stage's configuration set, to the queue.
			rule := props(tp.resources("AWS::Events::Rule")[ids.rule])
			wantPattern := `{"detail":{"mail":{"tags":{"ses:configuration-set":["nudge-` + s.Name + `"]}}},` +
				`"detail-type":["Email Sent","Email Delivered","Email Bounced","Email Complaint Received","Email Rejected",` +
				`"Email Delivery Delayed","Email Rendering Failed"],` +
				`"source":["aws.ses"]}`
			if got := asJSON(rule["EventPattern"]); got != wantPattern {
				t.Errorf("the feedback rule's pattern %s, want %s", got, wantPattern)
			}
			targets := asList(rule["Targets"])
			if rule["EventBusName"] != "default" || rule["Name"] != "nudge-"+s.Name+"-ses-feedback" || rule["State"] != "ENABLED" || len(targets) != 1 ||
				asJSON(targets[0].(map[string]any)["Arn"]) != queueArn {
				t.Errorf("the feedback rule: %s; want nudge-%s-ses-feedback on the default bus, to the feedback queue alone", asJSON(rule), s.Name)
			}
			// What EventBridge cannot deliver waits in the feedback DLQ, which
			// it may send to for this rule alone.
			dlqArn := `{"Fn::GetAtt":["` + ids.dlq + `","Arn"]}`
			if len(targets) == 1 && asJSON(targets[0].(map[string]any)["DeadLetterConfig"]) != `{"Arn":`+dlqArn+`}` {
				t.Errorf("the feedback rule's target has dead-letter config %s; want the feedback DLQ", asJSON(targets[0].(map[string]any)["DeadLetterConfig"]))
			}
			dlqSends := 0
			for _, p := range tp.resources("AWS::SQS::QueuePolicy") {
				if asJSON(props(p)["Queues"]) != `[{"Ref":"`+ids.dlq+`"}]` {
					continue
				}
				for _, st := range asList(props(p)["PolicyDocument"].(map[string]any)["Statement"]) {
					st := st.(map[string]any)
					if st["Effect"] != "Allow" {
						continue
					}
					dlqSends++
					if asJSON(st["Principal"]) != `{"Service":"events.amazonaws.com"}` || !slices.Contains(statementActions(st), "sqs:SendMessage") ||
						!strings.Contains(asJSON(st["Condition"]), ids.rule) {
						t.Errorf("the feedback DLQ allows %s; want SendMessage for events.amazonaws.com, for the feedback rule alone", asJSON(st))
					}
				}
			}
			if dlqSends != 1 {
				t.Errorf("%d statements allow something on the feedback DLQ, want EventBridge's alone", dlqSends)
			}
			// EventBridge may send to the queue for this rule alone.
			sends := 0
			for _, p := range tp.resources("AWS::SQS::QueuePolicy") {
				if asJSON(props(p)["Queues"]) != `[{"Ref":"`+ids.queue+`"}]` {
					continue
				}
				for _, st := range asList(props(p)["PolicyDocument"].(map[string]any)["Statement"]) {
					st := st.(map[string]any)
					if st["Effect"] != "Allow" {
						continue
					}
					sends++
					if asJSON(st["Principal"]) != `{"Service":"events.amazonaws.com"}` || !slices.Contains(statementActions(st), "sqs:SendMessage") ||
						asJSON(st["Resource"]) != queueArn ||
						asJSON(st["Condition"]) != `{"ArnEquals":{"aws:SourceArn":{"Fn::GetAtt":["`+ids.rule+`","Arn"]}}}` {
						t.Errorf("the feedback queue allows %s; want SendMessage for events.amazonaws.com, for the feedback rule alone", asJSON(st))
					}
				}
			}
			if sends != 1 {
				t.Errorf("%d statements allow something on the feedback queue, want EventBridge's alone", sends)
			}

			// The function.
			fr := tp.one(t, "AWS::Lambda::Function", "FunctionName", "nudge-"+s.Name+"-feedback")
			fn := props(fr)
			if num64(t, fn["MemorySize"]) != float64(s.FeedbackMemoryMB) || num64(t, fn["Timeout"]) != s.FeedbackTimeout.Seconds() ||
				fn["Runtime"] != "provided.al2023" || asJSON(fn["Architectures"]) != `["arm64"]` || fn["Handler"] != "bootstrap" ||
				fn["ReservedConcurrentExecutions"] != nil {
				t.Errorf("the feedback function: %s; want %d MB, %v, provided.al2023 on arm64, no reservation",
					asJSON(fn), s.FeedbackMemoryMB, s.FeedbackTimeout)
			}
			wantEnv := map[string]any{}
			for k, v := range s.FeedbackEnv(deployment.Resources{Table: "TABLE"}) {
				wantEnv[k] = v
			}
			wantEnv["NUDGE_TABLE"] = map[string]any{"Ref": ids.table}
			if got := asJSON(fn["Environment"].(map[string]any)["Variables"]); got != asJSON(wantEnv) {
				t.Errorf("the feedback function's environment %s, want %s (Stage.FeedbackEnv)", got, asJSON(wantEnv))
			}
			logs := props(tp.one(t, "AWS::Logs::LogGroup", "LogGroupName", "/aws/lambda/nudge-"+s.Name+"-feedback"))
			logging := asJSON(fn["LoggingConfig"])
			if num64(t, logs["RetentionInDays"]) != float64(s.LogRetentionDays) || logging != `{"LogFormat":"JSON","LogGroup":{"Ref":"`+ids.logs+`"}}` {
				t.Errorf("the feedback log group keeps %v days (want %d); the function logs %s", logs["RetentionInDays"], s.LogRetentionDays, logging)
			}

			// Its mapping on the queue.
			var m map[string]any
			for _, r := range tp.resources("AWS::Lambda::EventSourceMapping") {
				if asJSON(props(r)["FunctionName"]) == `{"Ref":"`+ids.fn+`"}` {
					if m != nil {
						t.Fatal("the feedback function has two event source mappings")
					}
					m = props(r)
				}
			}
			if m == nil {
				t.Fatal("the feedback function has no event source mapping")
			}
			for key, want := range map[string]string{
				"EventSourceArn":                 queueArn,
				"BatchSize":                      `10`,
				"MaximumBatchingWindowInSeconds": `1`,
				"FunctionResponseTypes":          `["ReportBatchItemFailures"]`,
				"ScalingConfig":                  `{"MaximumConcurrency":2}`,
			} {
				if got := asJSON(m[key]); got != want {
					t.Errorf("the feedback mapping's %s = %s, want %s", key, got, want)
				}
			}
			if m["Enabled"] == false || m["FilterCriteria"] != nil {
				t.Errorf("the feedback mapping: %s; want enabled, unfiltered (the rule chooses the events)", asJSON(m))
			}

			checkFeedbackRole(t, tp, ids)

			outputs := tp["Outputs"].(map[string]any)
			for name, value := range map[string]string{
				"FeedbackQueueUrl":           `{"Ref":"` + ids.queue + `"}`,
				"FeedbackDeadLetterQueueUrl": `{"Ref":"` + ids.dlq + `"}`,
			} {
				if o, ok := outputs[name].(map[string]any); !ok || asJSON(o["Value"]) != value {
					t.Errorf("output %s = %v, want %s", name, o, value)
				}
			}
			if msgs := nagFindings(t, n); len(msgs) > 0 {
				t.Fatalf("%d cdk-nag findings:\n%s", len(msgs), strings.Join(msgs, "\n"))
			}
		})
	}
}

// checkFeedbackRole: the feedback role may GetItem and UpdateItem on the
// ledger table (no index), in reminders' partitions only, receive and
// delete on its queue (the mapping's grant) and write its logs; nothing
// else, and no other role may read or write its queue.
func checkFeedbackRole(t *testing.T, tp template, ids feedbackIDs) {
	t.Helper()
	granted := map[string]bool{}
	for _, st := range roleStatements(tp, ids.role) {
		res := asJSON(st["Resource"])
		for _, a := range statementActions(st) {
			granted[a] = true
			var want string
			switch a {
			case "dynamodb:GetItem", "dynamodb:UpdateItem":
				want = `{"Fn::GetAtt":["` + ids.table + `","Arn"]}`
				cond := asJSON(st["Condition"])
				reminders := cond == `{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["REM#*"]},"Null":{"dynamodb:LeadingKeys":"false"}}`
				// The feedback mark: an UpdateItem of the registry's item.
				registry := a == "dynamodb:UpdateItem" &&
					cond == `{"ForAllValues:StringEquals":{"dynamodb:LeadingKeys":["NUDGE"]},"Null":{"dynamodb:LeadingKeys":"false"}}`
				if !reminders && !registry {
					t.Errorf("the feedback role's %s is not limited to reminders' partitions (or, for the mark, the registry's): %s", a, cond)
				}
			case "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl", "sqs:DeleteMessage", "sqs:GetQueueAttributes":
				want = `{"Fn::GetAtt":["` + ids.queue + `","Arn"]}`
			case "logs:CreateLogStream", "logs:PutLogEvents":
				want = `{"Fn::GetAtt":["` + ids.logs + `","Arn"]}`
			default:
				t.Errorf("the feedback role allows %s on %s", a, res)
				continue
			}
			if res != want {
				t.Errorf("the feedback role's %s is on %s, want %s", a, res, want)
			}
		}
	}
	var got []string
	for a := range granted {
		got = append(got, a)
	}
	slices.Sort(got)
	want := []string{"dynamodb:GetItem", "dynamodb:UpdateItem", "logs:CreateLogStream", "logs:PutLogEvents",
		"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}
	if !slices.Equal(got, want) {
		t.Errorf("the feedback role allows %v, want exactly %v", got, want)
	}
	for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"} {
		for id, p := range tp.resources(typ) {
			if strings.Contains(asJSON(props(p)["Roles"]), `"Ref":"`+ids.role+`"`) {
				continue
			}
			if doc := asJSON(props(p)["PolicyDocument"]); strings.Contains(doc, ids.queue) || strings.Contains(doc, ids.dlq) {
				t.Errorf("%s %s grants on the feedback queues: %s", typ, id, doc)
			}
		}
	}
}

// TestTheFeedbackAlarms: a message in the feedback DLQ (1 minute), the
// function's errors (2 of 5 minutes), FeedbackUndecodable (1 minute), the
// rule's FailedInvocations (1 minute) and the feedback path stopped
// (e-mails sent, nothing recorded, in 30 minutes), each acting on the
// alarm topic and with its runbook in docs/operations.md.
func TestTheFeedbackAlarms(t *testing.T) {
	s := sesStage(deployment.Dev())
	n, tpl := synth(t, s)
	tp := toJSON(t, tpl)
	ids := feedbackIDsOf(t, n)
	runbook, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	alarm := func(name string) map[string]any {
		t.Helper()
		a := props(tp.one(t, "AWS::CloudWatch::Alarm", "AlarmName", "nudge-dev-"+name))
		if !regexp.MustCompile(`(?m)^### (.+, )?` + regexp.QuoteMeta(name) + `(, .+)?$`).Match(runbook) {
			t.Errorf("alarm %s has no runbook section in docs/operations.md", name)
		}
		linked := strings.Contains(fmt.Sprint(a["AlarmDescription"]), "docs/operations.md#"+name)
		if !linked || len(asList(a["AlarmActions"])) != 1 || len(asList(a["OKActions"])) != 1 {
			t.Errorf("alarm %s: description %v, actions %v, %v; want its runbook linked and the alarm topic told",
				name, a["AlarmDescription"], a["AlarmActions"], a["OKActions"])
		}
		return a
	}
	check := func(name string, a map[string]any, periods, datapoints float64) {
		t.Helper()
		if num64(t, a["Threshold"]) != 0 || num64(t, a["EvaluationPeriods"]) != periods || num64(t, a["DatapointsToAlarm"]) != datapoints ||
			a["ComparisonOperator"] != "GreaterThanThreshold" || a["TreatMissingData"] != "notBreaching" {
			t.Errorf("alarm %s: %s; want > 0 in %v of %v periods, missing data not breaching", name, asJSON(a), datapoints, periods)
		}
	}

	a := alarm("feedback-dlq-not-empty")
	metrics := asJSON(a["Metrics"])
	if !strings.Contains(metrics, `"Expression":"FILL(v, 0) + FILL(h, 0)"`) || strings.Count(metrics, `{"Fn::GetAtt":["`+ids.dlq+`","QueueName"]}`) != 2 ||
		!strings.Contains(metrics, `"ApproximateNumberOfMessagesVisible"`) || !strings.Contains(metrics, `"ApproximateNumberOfMessagesNotVisible"`) {
		t.Errorf("alarm feedback-dlq-not-empty: %s; want the feedback DLQ's visible and in-flight messages", metrics)
	}
	check("feedback-dlq-not-empty", a, 1, 1)

	a = alarm("feedback-errors")
	if a["Namespace"] != "AWS/Lambda" || a["MetricName"] != "Errors" || a["Statistic"] != "Sum" || num64(t, a["Period"]) != 60 ||
		asJSON(a["Dimensions"]) != `[{"Name":"FunctionName","Value":{"Ref":"`+ids.fn+`"}}]` {
		t.Errorf("alarm feedback-errors: %s; want the feedback function's Errors summed per minute", asJSON(a))
	}
	check("feedback-errors", a, 5, 2)

	a = alarm("feedback-undecodable")
	if a["Namespace"] != "Nudge" || a["MetricName"] != feedback.MetricUndecodable || a["Statistic"] != "Sum" || num64(t, a["Period"]) != 60 ||
		asJSON(a["Dimensions"]) != `[{"Name":"Function","Value":"feedback"}]` {
		t.Errorf("alarm feedback-undecodable: %s; want Nudge/FeedbackUndecodable of Function feedback per minute", asJSON(a))
	}
	check("feedback-undecodable", a, 1, 1)

	a = alarm("feedback-rule-failed")
	rule := props(tp.resources("AWS::Events::Rule")[ids.rule])
	if a["Namespace"] != "AWS/Events" || a["MetricName"] != "FailedInvocations" || a["Statistic"] != "Sum" || num64(t, a["Period"]) != 60 ||
		asJSON(a["Dimensions"]) != `[{"Name":"RuleName","Value":"`+fmt.Sprint(rule["Name"])+`"}]` {
		t.Errorf("alarm feedback-rule-failed: %s; want AWS/Events FailedInvocations of the rule %v per minute", asJSON(a), rule["Name"])
	}
	check("feedback-rule-failed", a, 1, 1)

	// The mark: the feedback function's failed writes and the consumer's
	// failed reads (Provider=ses).
	a = alarm("feedback-mark-failed")
	metrics = asJSON(a["Metrics"])
	if !strings.Contains(metrics, `"Expression":"FILL(r, 0) + FILL(w, 0)"`) && !strings.Contains(metrics, `"Expression":"FILL(w, 0) + FILL(r, 0)"`) ||
		!strings.Contains(metrics, `"MetricName":"`+feedback.MetricMarkFailed+`"`) || !strings.Contains(metrics, `"MetricName":"`+consumer.MetricFeedbackMarkUnread+`"`) ||
		!strings.Contains(metrics, `{"Name":"Provider","Value":"ses"}`) {
		t.Errorf("alarm feedback-mark-failed: %s; want the feedback function's FeedbackMarkFailed and the consumer's FeedbackMarkUnread of ses", metrics)
	}
	check("feedback-mark-failed", a, 5, 3)

	// The consumer's probes (a quiet stage): two failed in an hour.
	a = alarm("feedback-probe-failed")
	if a["Namespace"] != "Nudge" || a["MetricName"] != consumer.MetricProbe || a["Statistic"] != "Sum" || num64(t, a["Period"]) != 3600 ||
		num64(t, a["Threshold"]) != 1 || num64(t, a["EvaluationPeriods"]) != 1 || a["ComparisonOperator"] != "GreaterThanThreshold" ||
		!strings.Contains(asJSON(a["Dimensions"]), `{"Name":"Outcome","Value":"failed"}`) || !strings.Contains(asJSON(a["Dimensions"]), `{"Name":"Provider","Value":"ses"}`) {
		t.Errorf("alarm feedback-probe-failed: %s; want the consumer's FeedbackProbe of ses, Outcome failed, more than 1 in an hour", asJSON(a))
	}

	// The path stopped: one 30-minute window with e-mails sent (the
	// consumer's Sent, Channel=email) and nothing recorded.
	a = alarm("feedback-stopped")
	check("feedback-stopped", a, 1, 1)
	byID := map[string]map[string]any{}
	for _, m := range asList(a["Metrics"]) {
		byID[fmt.Sprint(m.(map[string]any)["Id"])] = m.(map[string]any)
	}
	var expr map[string]any
	for _, m := range byID {
		if m["Expression"] != nil {
			expr = m
		}
	}
	const wantExpr = "IF(FILL(sent, 0) > 0 AND FILL(recorded, 0) + FILL(redundant, 0) + FILL(settled, 0) == 0, 1, 0)"
	if expr == nil || expr["Expression"] != wantExpr || expr["ReturnData"] != true || len(byID) != 5 {
		t.Fatalf("alarm feedback-stopped: %s; want %s of sent, recorded, redundant and settled", asJSON(a["Metrics"]), wantExpr)
	}
	for id, want := range map[string]string{
		"sent": `{"Metric":{"Dimensions":[{"Name":"Channel","Value":"email"},{"Name":"Function","Value":"consumer"}],"MetricName":"` + consumer.MetricSent +
			`","Namespace":"Nudge"},"Period":1800,"Stat":"Sum"}`,
		"recorded": `{"Metric":{"Dimensions":[{"Name":"Function","Value":"feedback"}],"MetricName":"` + feedback.MetricRecorded +
			`","Namespace":"Nudge"},"Period":1800,"Stat":"Sum"}`,
		"redundant": `{"Metric":{"Dimensions":[{"Name":"Function","Value":"feedback"}],"MetricName":"` + feedback.MetricRedundant +
			`","Namespace":"Nudge"},"Period":1800,"Stat":"Sum"}`,
		"settled": `{"Metric":{"Dimensions":[{"Name":"Function","Value":"feedback"}],"MetricName":"` + feedback.MetricSettled +
			`","Namespace":"Nudge"},"Period":1800,"Stat":"Sum"}`,
	} {
		m, ok := byID[id]
		if !ok || asJSON(m["MetricStat"]) != want || m["ReturnData"] != false {
			t.Errorf("alarm feedback-stopped's %s: %s; want %s", id, asJSON(m), want)
		}
	}
	if feedbackStoppedWindow != 30*time.Minute {
		t.Errorf("the feedback-stopped window is %v; docs/infrastructure.md and docs/operations.md say 30 minutes", feedbackStoppedWindow)
	}
}

// TestAStageWithoutSESHasNoFeedback: a stage that does not run ses has no
// feedback queue, DLQ, rule, function, mapping, alarm or output.
func TestAStageWithoutSESHasNoFeedback(t *testing.T) {
	other := allProviders()
	other.Providers = []string{"webhook", "sns"}
	for _, s := range []deployment.Stage{deployment.Dev(), other} {
		t.Run(strings.Join(s.Providers, ","), func(t *testing.T) {
			n, tpl := synth(t, s)
			if n.Feedback != nil || n.FeedbackQueue != nil || n.FeedbackDLQ != nil || n.FeedbackRule != nil {
				t.Error("the stack has feedback resources without ses")
			}
			raw := asJSON(map[string]any(toJSON(t, tpl)))
			for _, leak := range []string{"feedback", "Feedback", "aws.ses"} {
				if strings.Contains(raw, leak) {
					t.Errorf("the template of a stage running %v mentions %q", s.Providers, leak)
				}
			}
		})
	}
}

// TestTheFeedbackRuleAgreesWithTheFunction evaluates the rule's pattern,
// as EventBridge does, against SES's events (internal/feedback's
// fixtures, modelled on SES's documented examples): it passes exactly the
// events the function records for the stage, and none of another stage's
// configuration set. Its detail-types are those of the SES event types
// the configuration set publishes.
func TestTheFeedbackRuleAgreesWithTheFunction(t *testing.T) {
	s := sesStage(deployment.Dev())
	n, tpl := synth(t, s)
	tp := toJSON(t, tpl)
	pattern := props(tp.resources("AWS::Events::Rule")[feedbackIDsOf(t, n).rule])["EventPattern"]
	if pattern == nil {
		t.Fatal("the feedback rule has no pattern")
	}

	files, err := filepath.Glob("../internal/feedback/testdata/*.json")
	if err != nil || len(files) < len(sesDetailTypes) {
		t.Fatalf("the fixtures: %v, %v", files, err)
	}
	recorded := map[string]bool{}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, stage := range []string{"dev", "prod"} {
			b := bytes.ReplaceAll(body, []byte(`"nudge-dev"`), []byte(`"nudge-`+stage+`"`))
			var event any
			if err := json.Unmarshal(b, &event); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			e, err := feedback.Parse(b)
			if err == nil {
				err = e.OfStage(s.Name)
			}
			if err != nil && !errors.Is(err, feedback.ErrNotOurs) {
				t.Fatalf("%s (%s): %v", file, stage, err)
			}
			if got := matches(t, pattern, event); got != (err == nil) {
				t.Errorf("%s with the configuration set nudge-%s: the dev rule passes it %v, the dev function records it %v",
					filepath.Base(file), stage, got, err == nil)
			}
			if err == nil {
				recorded[e.DetailType] = true
			}
		}
	}
	var types []string
	for dt := range recorded {
		types = append(types, dt)
	}
	if !sameSet(types, sesDetailTypes) {
		t.Errorf("the function records the detail-types %v; the rule lists %v", types, sesDetailTypes)
	}

	// The configuration set publishes the SES event type of each
	// detail-type, and nothing the rule would drop.
	var published []string
	for _, d := range tp.resources("AWS::SES::ConfigurationSetEventDestination") {
		dest := props(d)["EventDestination"].(map[string]any)
		for _, x := range asList(dest["MatchingEventTypes"]) {
			published = append(published, x.(string))
		}
	}
	if want := []string{"send", "delivery", "bounce", "complaint", "reject", "renderingFailure", "deliveryDelay"}; !sameSet(published, want) {
		t.Errorf("the configuration set publishes %v; the feedback rule takes the detail-types of %v", published, want)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestTheFeedbackFunctionEmitsTheAlarmedMetrics runs the feedback handler
// on an SES Send event of a delivery the ledger holds and on a body it
// cannot read: FeedbackRecorded and FeedbackUndecodable, which the
// alarms read, are written in namespace Nudge with the dimension set
// Function=feedback alone (the alarms name no Kind).
func TestTheFeedbackFunctionEmitsTheAlarmedMetrics(t *testing.T) {
	led, err := ledger.NewMemory(ledger.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	due := time.Date(2026, 11, 30, 8, 59, 0, 0, time.UTC)
	d := ledger.Delivery{ReminderID: "rem-184.a", Channel: "email", Provider: "ses", Address: "ana.lima@example.com", RecipientRef: "acct-1/contact-2",
		TemplateRef: "renewal-notice", DueAt: due, ExpiresAt: due.Add(24 * time.Hour), Status: ledger.StatusQueued}
	if err := led.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	send, err := os.ReadFile("../internal/feedback/testdata/send.json")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	fn, err := feedback.NewFunction(feedback.Config{Ledger: led, Stage: "dev", MetricsOut: &out, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := fn.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: string(send)}, {MessageId: "m-2", Body: `{"source":"aws.ses","detail-type":"Email Sent","detail":7}`},
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the handler: %+v, %v", resp, err)
	}
	alone := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		for _, m := range asList(doc["_aws"].(map[string]any)["CloudWatchMetrics"]) {
			m := m.(map[string]any)
			byFunction := slices.ContainsFunc(asList(m["Dimensions"]), func(d any) bool { return asJSON(d) == `["Function"]` })
			if m["Namespace"] != "Nudge" || doc["Function"] != "feedback" || !byFunction {
				continue
			}
			for _, x := range asList(m["Metrics"]) {
				name := x.(map[string]any)["Name"].(string)
				alone[name] += doc[name].(float64)
			}
		}
	}
	for _, name := range []string{feedback.MetricRecorded, feedback.MetricUndecodable} {
		if alone[name] != 1 {
			t.Errorf("the feedback function wrote %s = %v by Function alone, want 1 (it wrote %v)", name, alone[name], alone)
		}
	}
}

// TestContextSetsTheFeedbackFunction: feedbackMemory and feedbackTimeout,
// with the stage's scoping and the same errors as the other keys; the
// queue's visibility follows the timeout.
func TestContextSetsTheFeedbackFunction(t *testing.T) {
	ctx := map[string]any{"feedbackMemory": "256", "feedbackTimeout": "60", "prod:feedbackTimeout": "90", "alarmEmail": "oncall@example.com"}
	for stage, timeout := range map[string]time.Duration{"dev": time.Minute, "prod": 90 * time.Second} {
		s, err := StageFromContext(func(k string) any {
			if k == "stage" {
				return stage
			}
			return ctx[k]
		})
		if err != nil || s.FeedbackMemoryMB != 256 || s.FeedbackTimeout != timeout {
			t.Errorf("%s: stage %+v, %v; want 256 MB, %v", stage, s, err, timeout)
		}
	}
	for bad, want := range map[string]string{
		"feedbackMemory=a lot": `context feedbackMemory="a lot" is not a whole number`,
		"feedbackTimeout=ten":  `context feedbackTimeout="ten" is not a whole number of seconds`,
		"feedbackMemory=64":    "the feedback function needs a timeout of 1 s to 15 minutes and 128 to 10240 MB",
		"feedbackTimeout=1000": "the feedback function needs a timeout of 1 s to 15 minutes",
	} {
		k, v, _ := strings.Cut(bad, "=")
		if _, err := StageFromContext(func(key string) any { return map[string]any{k: v}[key] }); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error with %q", bad, err, want)
		}
	}
	s := sesStage(deployment.Dev())
	s.FeedbackTimeout = time.Minute
	_, tpl := synth(t, s)
	if q := props(toJSON(t, tpl).one(t, "AWS::SQS::Queue", "QueueName", "nudge-dev-feedback")); num64(t, q["VisibilityTimeout"]) != 360 {
		t.Errorf("with a 60 s feedback timeout the queue's visibility is %v s, want 360", q["VisibilityTimeout"])
	}
}
