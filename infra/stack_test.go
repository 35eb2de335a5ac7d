package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/nudgehq/nudge/internal/deployment"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// synth builds the stack for a stage and returns its template.
func synth(t *testing.T, s deployment.Stage) (*NudgeStack, assertions.Template) {
	t.Helper()
	return synthWith(t, s, Options{})
}

// synthWith builds the stack for a stage with options.
func synthWith(t *testing.T, s deployment.Stage, o Options) (*NudgeStack, assertions.Template) {
	t.Helper()
	var n *NudgeStack
	var tpl assertions.Template
	must(t, func() {
		app := awscdk.NewApp(nil)
		n = NewNudgeStack(app, "Nudge-"+s.Name, &NudgeStackProps{Stage: s, BuildDir: "../build", Nag: true, Options: o})
		tpl = assertions.Template_FromStack(n.Stack, nil)
	})
	return n, tpl
}

// must turns a panic (how a failed CDK assertion reports) into a test
// failure.
func must(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%v", r)
		}
	}()
	f()
}

func TestNagFindings(t *testing.T) {
	n, _ := synth(t, deployment.Dev())
	if msgs := nagFindings(t, n); len(msgs) > 0 {
		t.Fatalf("%d cdk-nag findings:\n%s", len(msgs), strings.Join(msgs, "\n"))
	}
}

// nagFindings are the cdk-nag errors and warnings on n.
func nagFindings(t *testing.T, n *NudgeStack) []string {
	t.Helper()
	var msgs []string
	must(t, func() {
		a := assertions.Annotations_FromStack(n.Stack)
		nag := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
		for _, m := range append(*a.FindError(jsii.String("*"), nag), *a.FindWarning(jsii.String("*"), nag)...) {
			b, _ := json.Marshal(m) // the path, the rule and its text
			msgs = append(msgs, string(b))
		}
	})
	return msgs
}

// template is a synthesized template as plain JSON.
type template map[string]any

func toJSON(t *testing.T, tpl assertions.Template) template {
	t.Helper()
	var m map[string]any
	must(t, func() { m = *tpl.ToJSON() })
	return m
}

// resources returns the resources of one type, by logical id.
func (tp template) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tp["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if r["Type"] == typ {
			out[id] = r
		}
	}
	return out
}

func props(r map[string]any) map[string]any { return r["Properties"].(map[string]any) }

// one returns the single resource of a type whose properties contain key=value.
func (tp template) one(t *testing.T, typ, key, value string) map[string]any {
	t.Helper()
	for _, r := range tp.resources(typ) {
		if fmt.Sprint(props(r)[key]) == value {
			return r
		}
	}
	t.Fatalf("no %s with %s = %s", typ, key, value)
	return nil
}

func num64(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case float64:
		return x
	case string:
		var f float64
		if _, err := fmt.Sscan(x, &f); err == nil {
			return f
		}
	}
	t.Fatalf("%v is not a number", v)
	return 0
}

// TestInvariants checks, on the synthesized template of each stage, the
// relations the code relies on.
func TestInvariants(t *testing.T) {
	prod := deployment.Prod()
	prod.AlarmEmail = "oncall@example.com"
	for _, s := range []deployment.Stage{deployment.Dev(), prod} {
		t.Run(s.Name, func(t *testing.T) {
			_, tpl := synth(t, s)
			tp := toJSON(t, tpl)
			work := props(tp.one(t, "AWS::SQS::Queue", "QueueName", s.WorkQueueName()))
			dlq := props(tp.one(t, "AWS::SQS::Queue", "QueueName", s.DLQName()))
			consumer := props(tp.one(t, "AWS::Lambda::Function", "FunctionName", "nudge-"+s.Name+"-consumer"))
			env := consumer["Environment"].(map[string]any)["Variables"].(map[string]any)

			if vis, timeout := num64(t, work["VisibilityTimeout"]), num64(t, consumer["Timeout"]); vis < 6*timeout {
				t.Errorf("work queue visibility %vs < 6 × consumer timeout %vs", vis, timeout)
			}
			if env["NUDGE_VISIBILITY_TIMEOUT"] != s.Visibility().String() {
				t.Errorf("consumer told visibility %v, queue has %v", env["NUDGE_VISIBILITY_TIMEOUT"], s.Visibility())
			}
			redrive := work["RedrivePolicy"].(map[string]any)
			if mrc, budget := num64(t, redrive["maxReceiveCount"]), num64(t, env["NUDGE_MAX_ATTEMPTS"]); mrc < budget+3 {
				t.Errorf("maxReceiveCount %v < attempt budget %v + the 3 receives that may not reach the provider", mrc, budget)
			}
			// The enqueue is invoked asynchronously by the schedule: Lambda
			// retries nothing, drops a tick older than a minute, and sends
			// both to the schedule's DLQ, which an alarm watches.
			var dlqID string
			for id, r := range tp.resources("AWS::SQS::Queue") {
				if props(r)["QueueName"] == "nudge-"+s.Name+"-schedule-dlq" {
					dlqID = id
				}
			}
			invokes := tp.resources("AWS::Lambda::EventInvokeConfig")
			if len(invokes) != 1 {
				t.Fatalf("%d asynchronous invocation configs, want the enqueue's", len(invokes))
			}
			for _, r := range invokes {
				p := props(r)
				if num64(t, p["MaximumRetryAttempts"]) != 0 || num64(t, p["MaximumEventAgeInSeconds"]) != 60 ||
					!strings.Contains(fmt.Sprint(p["DestinationConfig"]), dlqID) || !strings.Contains(fmt.Sprint(p["FunctionName"]), "Enqueue") {
					t.Errorf("the enqueue's asynchronous invocation: %v; want no retries, 60 s, failures to %s", p, dlqID)
				}
			}
			// The alarm counts ticks lost per minute (3 of 5), not messages
			// waiting: one lost tick is harmless, and a record nobody
			// purged must not keep it on.
			watched := false
			for _, a := range tp.resources("AWS::CloudWatch::Alarm") {
				p := props(a)
				if strings.Contains(fmt.Sprint(p["Dimensions"]), dlqID) {
					watched = p["MetricName"] == "NumberOfMessagesSent" && num64(t, p["DatapointsToAlarm"]) == 3 && num64(t, p["EvaluationPeriods"]) == 5
				}
			}
			if !watched {
				t.Error("no alarm counts the ticks lost to the schedule's DLQ (NumberOfMessagesSent, 3 of 5 minutes)")
			}
			if d, w := num64(t, dlq["MessageRetentionPeriod"]), num64(t, work["MessageRetentionPeriod"]); d <= w {
				t.Errorf("DLQ retention %v not above work queue retention %v", d, w)
			}
			allow := fmt.Sprint(dlq["RedriveAllowPolicy"])
			if !strings.Contains(allow, "byQueue") || !strings.Contains(allow, ":"+s.WorkQueueName()) {
				t.Errorf("DLQ RedriveAllowPolicy %s does not name the work queue", allow)
			}
			for id, q := range tp.resources("AWS::SQS::Queue") {
				if props(q)["SqsManagedSseEnabled"] != true {
					t.Errorf("queue %s is not encrypted", id)
				}
			}
			tls := 0
			for _, p := range tp.resources("AWS::SQS::QueuePolicy") {
				if strings.Contains(fmt.Sprint(props(p)["PolicyDocument"]), "aws:SecureTransport:false") {
					tls++
				}
			}
			if queues := len(tp.resources("AWS::SQS::Queue")); tls != queues {
				t.Errorf("%d of %d queues enforce TLS", tls, queues)
			}
			for id, fn := range tp.resources("AWS::Lambda::Function") {
				p := props(fn)
				if p["Runtime"] != "provided.al2023" || fmt.Sprint(p["Architectures"]) != "[arm64]" || p["Handler"] != "bootstrap" {
					t.Errorf("function %s: runtime %v, architectures %v", id, p["Runtime"], p["Architectures"])
				}
				if !strings.Contains(fmt.Sprint(p["LoggingConfig"]), "LogFormat:JSON") {
					t.Errorf("function %s logs %v, want JSON", id, p["LoggingConfig"])
				}
			}
			// The consumer's mapping (the outcomes function's, on the stream,
			// is TestTheOutcomesFunction's).
			esm := tp.resources("AWS::Lambda::EventSourceMapping")
			if len(esm) != 2 {
				t.Fatalf("%d event source mappings, want the consumer's and the outcomes function's", len(esm))
			}
			consumers := 0
			for _, m := range esm {
				p := props(m)
				if !strings.Contains(fmt.Sprint(p["FunctionName"]), "Consumer") {
					continue
				}
				consumers++
				if fmt.Sprint(p["FunctionResponseTypes"]) != "[ReportBatchItemFailures]" || num64(t, p["BatchSize"]) != float64(s.BatchSize) ||
					num64(t, p["ScalingConfig"].(map[string]any)["MaximumConcurrency"]) != float64(s.MaxConcurrency) {
					t.Errorf("event source mapping %v", p)
				}
			}
			if consumers != 1 {
				t.Errorf("%d event source mappings of the consumer, want 1", consumers)
			}
			table := tp.one(t, "AWS::DynamoDB::Table", "TableName", s.TableName())
			tprops := props(table)
			if fmt.Sprint(tprops["PointInTimeRecoverySpecification"]) != "map[PointInTimeRecoveryEnabled:true]" || tprops["BillingMode"] != "PAY_PER_REQUEST" ||
				fmt.Sprint(tprops["TimeToLiveSpecification"]) != "map[AttributeName:ttl Enabled:true]" {
				t.Errorf("table: %v", tprops)
			}
			if !strings.Contains(fmt.Sprint(tprops["GlobalSecondaryIndexes"]), "IndexName:due") {
				t.Errorf("table lacks the due index: %v", tprops["GlobalSecondaryIndexes"])
			}
			wantPolicy, wantProtect := "Delete", false
			if s.RetainData {
				wantPolicy, wantProtect = "Retain", true
			}
			if table["DeletionPolicy"] != wantPolicy || (tprops["DeletionProtectionEnabled"] == true) != wantProtect {
				t.Errorf("table deletion policy %v, protection %v; want %s, %v", table["DeletionPolicy"], tprops["DeletionProtectionEnabled"], wantPolicy, wantProtect)
			}
			alarms := tp.resources("AWS::CloudWatch::Alarm")
			if len(alarms) < 8 {
				t.Errorf("%d alarms", len(alarms))
			}
			for id, a := range alarms {
				if acts, _ := props(a)["AlarmActions"].([]any); len(acts) == 0 {
					t.Errorf("alarm %s has no action", id)
				}
			}
			if _, ok := tp.one(t, "AWS::CloudWatch::Alarm", "MetricName", "OverduePending")["Properties"].(map[string]any); !ok {
				t.Error("no OverduePending alarm")
			}
			// Every alarm's runbook is a section of docs/operations.md.
			runbook, err := os.ReadFile("../docs/operations.md")
			if err != nil {
				t.Fatal(err)
			}
			sections := map[string]bool{}
			for _, m := range regexp.MustCompile(`(?m)^### (.+)$`).FindAllStringSubmatch(string(runbook), -1) {
				for _, name := range strings.Split(m[1], ", ") {
					sections[name] = true
				}
			}
			names := map[string]bool{}
			for _, a := range alarms {
				p := props(a)
				name := strings.TrimPrefix(fmt.Sprint(p["AlarmName"]), "nudge-"+s.Name+"-")
				names[name] = true
				if !sections[name] {
					t.Errorf("alarm %s has no runbook section in docs/operations.md", name)
				}
				if !strings.Contains(fmt.Sprint(p["AlarmDescription"]), "docs/operations.md#"+name) {
					t.Errorf("alarm %s does not link its runbook: %v", name, p["AlarmDescription"])
				}
			}
			// A sum in metric math has no value where a term has none: every
			// term of an alarm's sum must be FILLed.
			for id, a := range alarms {
				for _, m := range asList(props(a)["Metrics"]) {
					expr := fmt.Sprint(m.(map[string]any)["Expression"])
					if m.(map[string]any)["Expression"] == nil || !strings.Contains(expr, "+") {
						continue
					}
					for _, term := range strings.Split(expr, "+") {
						if !strings.HasPrefix(strings.TrimSpace(term), "FILL(") {
							t.Errorf("alarm %s sums %q unfilled in %s", id, term, expr)
						}
					}
				}
			}
			for _, want := range []string{"expired", "consumer-duration", "unstarted", "publish-failed", "dynamodb-throttles", "ticks-lost", "overdue-pending", "dlq-not-empty",
				"consumer-errors", "enqueue-errors", "intake-errors", "intake-5xx", "consumer-throttles", "enqueue-throttles", "intake-throttles",
				"outcomes-errors", "outcomes-iterator-age", "outcomes-dlq-not-empty", "outcomes-publish-failed", "outcomes-undecodable"} {
				if !names[want] {
					t.Errorf("no %s alarm", want)
				}
			}
			enqueueFn := props(tp.one(t, "AWS::Lambda::Function", "FunctionName", "nudge-"+s.Name+"-enqueue"))
			if got := enqueueFn["ReservedConcurrentExecutions"]; (s.EnqueueReservedConcurrency == 0) != (got == nil) || got != nil && num64(t, got) != float64(s.EnqueueReservedConcurrency) {
				t.Errorf("enqueue reserved concurrency %v, want %d", got, s.EnqueueReservedConcurrency)
			}
			// The operators' policy: what the CLI calls, on this stage's
			// table and queues only.
			op := props(tp.one(t, "AWS::IAM::ManagedPolicy", "ManagedPolicyName", "nudge-"+s.Name+"-operator"))
			granted := strings.Join(actions(op), " ")
			for _, a := range []string{"dynamodb:Scan", "dynamodb:Query", "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
				"dynamodb:ConditionCheckItem", "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:SendMessage", "sqs:StartMessageMoveTask", "sqs:ListMessageMoveTasks"} {
				if !strings.Contains(granted, a) {
					t.Errorf("the operator policy lacks %s, which the nudge CLI calls", a)
				}
			}
			// Exactly what the CLI calls, nothing more.
			calls := map[string]bool{}
			for _, a := range []string{"dynamodb:Scan", "dynamodb:Query", "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
				"dynamodb:ConditionCheckItem", "sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:SendMessage", "sqs:StartMessageMoveTask", "sqs:ListMessageMoveTasks"} {
				calls[a] = true
			}
			for _, a := range actions(op) {
				if !calls[a] {
					t.Errorf("the operator policy grants %s, which the nudge CLI never calls", a)
				}
			}
			// Its table writes are limited to reminders' partitions: never
			// the enqueue's cursors (CURSOR#…) or the shard registry (NUDGE).
			for _, st := range op["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				acts := fmt.Sprint(st["Action"])
				if !strings.Contains(acts, "PutItem") && !strings.Contains(acts, "UpdateItem") && !strings.Contains(acts, "DeleteItem") {
					continue
				}
				cond := fmt.Sprint(st["Condition"])
				if !strings.Contains(cond, "ForAllValues:StringLike:map[dynamodb:LeadingKeys:[REM#*]]") || !strings.Contains(cond, "Null:map[dynamodb:LeadingKeys:false]") {
					t.Errorf("the operator policy's writes %s are not limited to the REM# partitions: %s", acts, cond)
				}
			}
			// The intake's table writes too: a bug in it cannot move the
			// enqueue's cursors or the shard registry, which it only reads.
			var intakeRole string
			for id, r := range tp.resources("AWS::IAM::Role") {
				if props(r)["Description"] == "Nudge intake function" {
					intakeRole = id
				}
			}
			writes := 0
			for _, st := range roleStatements(tp, intakeRole) {
				acts := strings.Join(statementActions(st), " ")
				cond := fmt.Sprint(st["Condition"])
				limited := strings.Contains(cond, "ForAllValues:StringLike:map[dynamodb:LeadingKeys:[REM#*]]") && strings.Contains(cond, "Null:map[dynamodb:LeadingKeys:false]")
				for _, w := range []string{"PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem", "BatchWriteItem"} {
					if strings.Contains(acts, w) {
						writes++
						if !limited {
							t.Errorf("the intake's %s is not limited to the REM# partitions: %s", acts, cond)
						}
					}
				}
			}
			if writes == 0 {
				t.Errorf("found no table write of the intake's role %q", intakeRole)
			}
			if res := fmt.Sprint(op["PolicyDocument"]); strings.Contains(res, "Resource:*") {
				t.Errorf("the operator policy grants on every resource: %s", res)
			}
			for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::Role", "AWS::IAM::ManagedPolicy"} {
				for id, r := range tp.resources(typ) {
					for _, action := range actions(props(r)) {
						if strings.Contains(action, "*") {
							t.Errorf("%s %s allows the wildcard action %s", typ, id, action)
						}
					}
				}
			}
		})
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// actions lists every Action in a policy or role's inline policies.
func actions(p map[string]any) []string {
	var docs []any
	if d, ok := p["PolicyDocument"]; ok {
		docs = append(docs, d)
	}
	if ps, ok := p["Policies"].([]any); ok {
		for _, x := range ps {
			docs = append(docs, x.(map[string]any)["PolicyDocument"])
		}
	}
	var out []string
	for _, d := range docs {
		for _, st := range d.(map[string]any)["Statement"].([]any) {
			switch a := st.(map[string]any)["Action"].(type) {
			case string:
				out = append(out, a)
			case []any:
				for _, x := range a {
					out = append(out, x.(string))
				}
			}
		}
	}
	return out
}

func TestContextOverridesTheStage(t *testing.T) {
	ctx := map[string]any{"stage": "prod", "consumerMemory": "1024", "batchSize": "50", "batchingWindow": "5", "recordConcurrency": "25", "alarmEmail": "ops@example.com", "retainData": "false",
		"intakeMemory": "512", "intakeTimeout": "20", "intakeReservedConcurrency": "50",
		"intakeFullAccess": "arn:aws:iam::123456789012:role/nudge-support, arn:aws:iam::123456789012:user/ops",
		"sendWindows":      "sms=08:00-21:00 mon-sat"}
	s, err := StageFromContext(func(k string) any { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "prod" || s.ConsumerMemoryMB != 1024 || s.BatchSize != 50 || s.BatchingWindow.Seconds() != 5 || s.AlarmEmail != "ops@example.com" || s.RetainData ||
		s.IntakeMemoryMB != 512 || s.IntakeTimeout.Seconds() != 20 || s.IntakeReservedConcurrency != 50 ||
		len(s.IntakeFullAccess) != 2 || s.IntakeFullAccess[1] != "arn:aws:iam::123456789012:user/ops" || s.SendWindows != "sms=08:00-21:00 mon-sat" {
		t.Fatalf("stage %+v", s)
	}
	for _, bad := range []map[string]any{{"stage": "qa"}, {"shards": "many"}, {"maxAttempts": "20"}, {"retainData": "maybe"},
		{"intakeMemory": "64"}, {"intakeTimeout": "1"}, {"intakeReservedConcurrency": "-1"}, {"intakeTimeout": "ten"},
		{"intakeFullAccess": "arn:aws:sts::123456789012:assumed-role/nudge-support/jane"}, {"sendWindows": "sms=8-21"}} {
		if _, err := StageFromContext(func(k string) any { return bad[k] }); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	// The timing relations apply to overrides as to the stages: a consumer
	// that could never start a record, a provider slower than the
	// consumer allows, a batching window the visibility cannot span.
	for _, tc := range []struct {
		ctx  map[string]any
		want string
	}{
		{map[string]any{"consumerTimeout": "12"}, "raise the consumer timeout to 22s or more"},
		{map[string]any{"providerTimeout": "20"}, "raise the consumer timeout to 42s or more"},
		{map[string]any{"batchingWindow": "200", "batchSize": "100"}, "does not span the 3m20s batching window"},
		{map[string]any{"batchingWindow": "5", "batchSize": "100"}, "raise the concurrency to 50, or lower the batch size to 20"},
		{map[string]any{"maxAttempts": "8"}, "plus 3 receives that may not reach the provider"},
		{map[string]any{"enqueueTimeout": "60"}, "not below the schedule's 1m0s period"},
	} {
		if _, err := StageFromContext(func(k string) any { return tc.ctx[k] }); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error with %q", tc.ctx, err, tc.want)
		}
	}
	if s, err := StageFromContext(func(k string) any { return map[string]any{"providerTimeout": "20", "consumerTimeout": "45"}[k] }); err != nil || s.ProviderTimeout.Seconds() != 20 {
		t.Errorf("a slower provider with a longer consumer timeout: %v, %v", s.ProviderTimeout, err)
	}
}

// TestProdAlarmsReachSomeone: prod refuses to synthesize without an alarm
// e-mail or an existing SNS topic, naming both settings; with a topic's
// ARN, the alarms notify it and the stack creates no topic.
func TestProdAlarmsReachSomeone(t *testing.T) {
	_, err := StageFromContext(func(k string) any { return map[string]any{"stage": "prod"}[k] })
	if err == nil || !strings.Contains(err.Error(), "-c alarmEmail=") || !strings.Contains(err.Error(), "-c alarmTopicArn=") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("prod without an alarm target: %v; want one line naming alarmEmail and alarmTopicArn", err)
	}
	for _, bad := range []string{"oncall", "arn:awsX:sqs:eu-west-1:123456789012:sns:x", "arn:aws:sns:eu-west-1:1234:oncall"} {
		if _, err := StageFromContext(func(k string) any { return map[string]any{"stage": "prod", "alarmTopicArn": bad}[k] }); err == nil || !strings.Contains(err.Error(), "not an SNS topic ARN") {
			t.Fatalf("a topic that is not an SNS topic's ARN, %q: %v", bad, err)
		}
		if _, err := StageFromContext(func(k string) any { return map[string]any{"operatorsTopicArn": bad}[k] }); err == nil ||
			!strings.Contains(err.Error(), "operatorsTopicArn") || !strings.Contains(err.Error(), "not an SNS topic ARN") {
			t.Fatalf("an operators' topic that is not an SNS topic's ARN, %q: %v", bad, err)
		}
	}
	const topic = "arn:aws:sns:eu-west-1:123456789012:oncall"
	s, err := StageFromContext(func(k string) any { return map[string]any{"stage": "prod", "alarmTopicArn": topic}[k] })
	if err != nil {
		t.Fatal(err)
	}
	_, tpl := synth(t, s)
	tp := toJSON(t, tpl)
	if topics := tp.resources("AWS::SNS::Topic"); len(topics) != 0 {
		t.Errorf("the stack creates %d topics, want none: it notifies %s", len(topics), topic)
	}
	for id, a := range tp.resources("AWS::CloudWatch::Alarm") {
		if acts := fmt.Sprint(props(a)["AlarmActions"]); !strings.Contains(acts, topic) {
			t.Errorf("alarm %s notifies %s, not %s", id, acts, topic)
		}
	}
}

// TestTheSecretParameterTakesANameOrAnARN: the parameter's pattern accepts
// a secret's name, partial ARN and full ARN, and the consumer is granted
// both the ARN as given and with Secrets Manager's six-character suffix,
// so a partial ARN works; a customer managed key gets kms:Decrypt alone,
// through Secrets Manager, only when given.
func TestTheSecretParameterTakesANameOrAnARN(t *testing.T) {
	_, tpl := synth(t, deployment.Dev())
	tp := toJSON(t, tpl)
	params := tp["Parameters"].(map[string]any)
	ref := params["WebhookSigningRef"].(map[string]any)
	pattern := regexp.MustCompile(fmt.Sprint(ref["AllowedPattern"]))
	for _, ok := range []string{"nudge/webhook-signing", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:nudge/webhook-signing",
		"arn:aws:secretsmanager:eu-west-1:123456789012:secret:nudge/webhook-signing-AbCdEf"} {
		if !pattern.MatchString(ok) {
			t.Errorf("WebhookSigningRef refuses %q", ok)
		}
	}
	for _, bad := range []string{"nudge webhook", "arn:aws:s3:::bucket/key"} { // "" passes the pattern; the WebhookIsSet rule refuses it
		if pattern.MatchString(bad) {
			t.Errorf("WebhookSigningRef accepts %q", bad)
		}
	}
	key := regexp.MustCompile(fmt.Sprint(params["WebhookSigningKmsArn"].(map[string]any)["AllowedPattern"]))
	if !key.MatchString("") || !key.MatchString("arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab") || key.MatchString("alias/nudge") {
		t.Error("WebhookSigningKmsArn's pattern")
	}
	grants := ""
	for _, p := range tp.resources("AWS::IAM::Policy") {
		if strings.Contains(fmt.Sprint(props(p)["PolicyDocument"]), "secretsmanager:GetSecretValue") {
			grants = fmt.Sprint(props(p)["PolicyDocument"])
		}
	}
	if !strings.Contains(grants, "Fn::If:[WebhookSecretIsArn map[Ref:WebhookSigningRef]") || !strings.Contains(grants, "Fn::If:[WebhookSecretIsArn map[Fn::Join:[ [map[Ref:WebhookSigningRef] -??????]]]") {
		t.Errorf("the secret is not granted as given and with its suffix: %s", grants)
	}
	var decrypt map[string]any
	for _, p := range tp.resources("AWS::IAM::Policy") {
		if strings.Contains(fmt.Sprint(props(p)["PolicyDocument"]), "kms:Decrypt") {
			decrypt = p
		}
	}
	if decrypt == nil || decrypt["Condition"] != "WebhookSecretHasKey" || !strings.Contains(fmt.Sprint(props(decrypt)["PolicyDocument"]), "Ref:WebhookSigningKmsArn") ||
		!strings.Contains(fmt.Sprint(props(decrypt)["PolicyDocument"]), "kms:ViaService") {
		t.Errorf("kms:Decrypt on the secret's key: %v", decrypt)
	}
	// No resource depends on a conditional one it does not share the
	// condition with: CloudFormation refuses such a template when the
	// condition is false. The consumer still waits for the key policy when
	// there is one, through a handle's metadata.
	all := tp["Resources"].(map[string]any)
	var keyPolicy string
	for id, r := range tp.resources("AWS::IAM::Policy") {
		if r["Condition"] == "WebhookSecretHasKey" {
			keyPolicy = id
		}
	}
	waits := false
	for id, r := range all {
		r := r.(map[string]any)
		for _, dep := range asList(r["DependsOn"]) {
			d := all[dep.(string)].(map[string]any)
			if c, ok := d["Condition"]; ok && r["Condition"] != c {
				t.Errorf("%s depends on %s, which exists only if %s", id, dep, c)
			}
			if r["Type"] == "AWS::Lambda::Function" && strings.Contains(fmt.Sprint(props(r)["Environment"]), "NUDGE_WEBHOOK_URL") &&
				strings.Contains(fmt.Sprint(d["Metadata"]), "Ref:"+keyPolicy) {
				waits = true
			}
		}
	}
	if keyPolicy == "" || !waits {
		t.Errorf("the consumer does not wait for the key policy %q", keyPolicy)
	}
}

// TestADeployWithoutTheWebhookStopsWithWhatToSet: the webhook parameters
// default to empty, and the template's rule, which CloudFormation checks
// before it changes anything, refuses empty ones with a message naming
// both parameters, how to pass them and the secret to create first. The
// rule is evaluated here as CloudFormation does (Ref, Fn::Equals, Fn::Not,
// Fn::And).
func TestADeployWithoutTheWebhookStopsWithWhatToSet(t *testing.T) {
	_, tpl := synth(t, deployment.Dev())
	tp := toJSON(t, tpl)
	params := tp["Parameters"].(map[string]any)
	for _, name := range []string{"WebhookUrl", "WebhookSigningRef"} {
		p := params[name].(map[string]any)
		if p["Default"] != "" || !regexp.MustCompile(fmt.Sprint(p["AllowedPattern"])).MatchString("") {
			t.Errorf("parameter %s: default %v, pattern %v; want an empty default the pattern accepts (the rule explains it)", name, p["Default"], p["AllowedPattern"])
		}
	}
	if url := regexp.MustCompile(fmt.Sprint(params["WebhookUrl"].(map[string]any)["AllowedPattern"])); url.MatchString("http://hooks.example.com") || !url.MatchString("https://hooks.example.com/nudge?token=x") {
		t.Error("WebhookUrl's pattern must take https:// URLs only")
	}
	rules, _ := tp["Rules"].(map[string]any)
	rule, ok := rules["WebhookIsSet"].(map[string]any)
	if !ok {
		t.Fatalf("no WebhookIsSet rule: %v", rules)
	}
	assertion := asList(rule["Assertions"])[0].(map[string]any)
	if got, want := assertion["AssertDescription"], WebhookMissing("Nudge-dev"); got != want {
		t.Errorf("the rule says %q, want %q", got, want)
	}
	for _, w := range []string{"cdk deploy Nudge-dev", "--parameters WebhookUrl=https://", "--parameters WebhookSigningRef=", "create-secret"} {
		if !strings.Contains(fmt.Sprint(assertion["AssertDescription"]), w) {
			t.Errorf("the rule's message lacks %q", w)
		}
	}
	for _, tc := range []struct {
		url, ref string
		pass     bool
	}{
		{"", "", false},
		{"https://hooks.example.com/nudge", "", false},
		{"", "nudge/webhook-signing", false},
		{"https://hooks.example.com/nudge", "nudge/webhook-signing", true},
	} {
		got := evalRule(t, assertion["Assert"], map[string]string{"WebhookUrl": tc.url, "WebhookSigningRef": tc.ref})
		if got != tc.pass {
			t.Errorf("WebhookUrl=%q WebhookSigningRef=%q: the rule passes %v, want %v", tc.url, tc.ref, got, tc.pass)
		}
	}
}

// evalRule evaluates a rule's condition against parameter values.
func evalRule(t *testing.T, expr any, params map[string]string) any {
	t.Helper()
	switch e := expr.(type) {
	case string:
		return e
	case map[string]any:
		for fn, arg := range e {
			args := asList(arg)
			switch fn {
			case "Ref":
				v, ok := params[arg.(string)]
				if !ok {
					t.Fatalf("the rule refers to %v, which the test does not set", arg)
				}
				return v
			case "Fn::Equals":
				return evalRule(t, args[0], params) == evalRule(t, args[1], params)
			case "Fn::Not":
				return !evalRule(t, args[0], params).(bool)
			case "Fn::And":
				all := true
				for _, a := range args {
					all = all && evalRule(t, a, params).(bool)
				}
				return all
			}
			t.Fatalf("the rule uses %s, which the test does not evaluate", fn)
		}
	}
	t.Fatalf("cannot evaluate %v", expr)
	return nil
}

// TestStagesFromContext: without -c stage, every stage whose settings hold,
// and a note for each one left out; with it, that stage alone or its error.
func TestStagesFromContext(t *testing.T) {
	ctx := func(kv ...string) func(string) any {
		return func(key string) any {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == key {
					return kv[i+1]
				}
			}
			return nil
		}
	}
	names := func(ss []deployment.Stage) (out []string) {
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		get     func(string) any
		stages  string
		left    string
		wantErr string
	}{
		{"nothing set", ctx(), "dev", "Nudge-prod is left out", ""},
		{"an alarm e-mail", ctx("alarmEmail", "oncall@example.com"), "dev prod", "", ""},
		{"prod chosen, no alarm target", ctx("stage", "prod"), "", "", "its alarms would notify nobody"},
		{"dev chosen", ctx("stage", "dev"), "dev", "", ""},
		{"a malformed setting for all", ctx("shards", "many"), "", "", `shards="many" is not a whole number`},
		{"prod's own alarm e-mail", ctx("prod:alarmEmail", "oncall@example.com"), "dev prod", "", ""},
	} {
		stages, left, err := StagesFromContext(tc.get)
		if got := strings.Join(names(stages), " "); got != tc.stages {
			t.Errorf("%s: stages %q, want %q", tc.name, got, tc.stages)
		}
		if (tc.left == "") != (len(left) == 0) || len(left) > 0 && !strings.Contains(left[0], tc.left) {
			t.Errorf("%s: left out %v, want %q", tc.name, left, tc.left)
		}
		if (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
		}
	}
	// A stage's own key wins over the plain one, and reaches no other stage.
	stages, _, err := StagesFromContext(ctx("shards", "4", "prod:shards", "32", "prod:alarmEmail", "oncall@example.com"))
	if err != nil || len(stages) != 2 || stages[0].Shards != 4 || stages[1].Shards != 32 || stages[0].AlarmEmail != "" || stages[1].AlarmEmail == "" {
		t.Errorf("scoped keys: %+v, %v; want dev 4 shards and no e-mail, prod 32 shards and the e-mail", stages, err)
	}
}
