package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/outcome"
	"github.com/nudgehq/nudge/internal/provider/ses"
)

// outcomeIDs are the logical ids of the outcome resources of a synthesized stack.
type outcomeIDs struct{ fn, role, table, dlq, bus string }

func idsOf(t *testing.T, n *NudgeStack) outcomeIDs {
	t.Helper()
	var ids outcomeIDs
	must(t, func() {
		id := func(c awscdk.CfnElement) string { return *n.Stack.GetLogicalId(c) }
		ids.fn = id(n.Outcomes.Node().DefaultChild().(awscdk.CfnElement))
		ids.role = id(n.Outcomes.Role().Node().DefaultChild().(awscdk.CfnElement))
		ids.table = id(n.Table.Node().DefaultChild().(awscdk.CfnElement))
		ids.dlq = id(n.OutcomesDLQ.Node().DefaultChild().(awscdk.CfnElement))
		if c := n.EventBus.Node().DefaultChild(); c != nil {
			ids.bus = id(c.(awscdk.CfnElement))
		}
	})
	return ids
}

// TestTheOutcomesFunction checks, for each stage, the ledger's stream, the
// outcomes function (sizes, environment, log group), its stream mapping
// (start, batch, window, partial failures, order, retries, bisect, the
// on-failure queue and the filter), its bus, its role (PutEvents on the
// bus alone, the stream, the DLQ, its logs) and its outputs.
func TestTheOutcomesFunction(t *testing.T) {
	prod := deployment.Prod()
	prod.AlarmEmail = "oncall@example.com"
	for _, s := range []deployment.Stage{deployment.Dev(), prod} {
		t.Run(s.Name, func(t *testing.T) {
			n, tpl := synth(t, s)
			tp := toJSON(t, tpl)
			ids := idsOf(t, n)

			table := props(tp.one(t, "AWS::DynamoDB::Table", "TableName", s.TableName()))
			if asJSON(table["StreamSpecification"]) != `{"StreamViewType":"NEW_AND_OLD_IMAGES"}` {
				t.Errorf("the ledger's stream: %v; want new and old images", table["StreamSpecification"])
			}

			fn := props(tp.one(t, "AWS::Lambda::Function", "FunctionName", "nudge-"+s.Name+"-outcomes"))
			if num64(t, fn["MemorySize"]) != float64(s.OutcomesMemoryMB) || num64(t, fn["Timeout"]) != s.OutcomesTimeout.Seconds() {
				t.Errorf("outcomes memory %v MB, timeout %v s; want %d, %v", fn["MemorySize"], fn["Timeout"], s.OutcomesMemoryMB, s.OutcomesTimeout.Seconds())
			}
			env := asJSON(fn["Environment"].(map[string]any)["Variables"])
			if want := asJSON(s.OutcomesEnv(deployment.Resources{Table: "TABLE"})); !strings.Contains(env, `"NUDGE_EVENT_BUS":"nudge-`+s.Name+`"`) ||
				!strings.Contains(env, `"NUDGE_TABLE":{"Ref":`) || strings.Contains(env, "NUDGE_OPERATORS_TOPIC_ARN") {
				t.Errorf("outcomes environment %s, want %s (the stage's own bus, the table, no operators' topic)", env, want)
			}
			if fn["ReservedConcurrentExecutions"] != nil {
				t.Errorf("the outcomes function reserves %v instances; one per shard is the most it runs", fn["ReservedConcurrentExecutions"])
			}
			logs := props(tp.one(t, "AWS::Logs::LogGroup", "LogGroupName", "/aws/lambda/nudge-"+s.Name+"-outcomes"))
			if num64(t, logs["RetentionInDays"]) != float64(s.LogRetentionDays) || !strings.Contains(asJSON(fn["LoggingConfig"]), "OutcomesLogs") {
				t.Errorf("the outcomes log group keeps %v days (want %d), function logs to %v", logs["RetentionInDays"], s.LogRetentionDays, fn["LoggingConfig"])
			}

			// The mapping.
			var m map[string]any
			for _, r := range tp.resources("AWS::Lambda::EventSourceMapping") {
				if asJSON(props(r)["FunctionName"]) == `{"Ref":"`+ids.fn+`"}` {
					m = props(r)
				}
			}
			if m == nil {
				t.Fatal("the outcomes function has no event source mapping")
			}
			var patterns []string
			for _, f := range outcomeFilters(sortKeyOf(ledger.TableInput(s.TableName())), s.Runs(ses.Name)) {
				p, _ := json.Marshal(f)
				patterns = append(patterns, `{"Pattern":`+strconv.Quote(string(p))+`}`)
			}
			want := map[string]string{
				"EventSourceArn":                 `{"Fn::GetAtt":["` + ids.table + `","StreamArn"]}`,
				"StartingPosition":               `"TRIM_HORIZON"`,
				"BatchSize":                      `100`,
				"MaximumBatchingWindowInSeconds": `1`,
				"FunctionResponseTypes":          `["ReportBatchItemFailures"]`,
				"ParallelizationFactor":          `1`,
				"MaximumRecordAgeInSeconds":      `82800`,
				"BisectBatchOnFunctionError":     `false`,
				"DestinationConfig":              `{"OnFailure":{"Destination":{"Fn::GetAtt":["` + ids.dlq + `","Arn"]}}}`,
				"FilterCriteria":                 `{"Filters":[` + strings.Join(patterns, ",") + `]}`,
			}
			for key, w := range want {
				if got := asJSON(m[key]); got != w {
					t.Errorf("the mapping's %s = %s, want %s", key, got, w)
				}
			}
			// Unlimited retries (-1, the default): the record's age ends them.
			if r, ok := m["MaximumRetryAttempts"]; ok && num64(t, r) != -1 {
				t.Errorf("the mapping gives up after %v retries; want the 23 h age alone to end them", r)
			}
			reported := strings.Contains(strings.Join(patterns, ","), `\"NewImage\":{\"feedback\":{\"S\":[{\"exists\":true}]}}`)
			if all := strings.Join(patterns, ","); !strings.Contains(all, `{\"prefix\":\"DLV#\"}`) ||
				!strings.Contains(all, `\"NewImage\":{\"status\":{\"S\":[\"sent\",\"dead\",\"expired\",\"cancelled\"]}}`) ||
				reported != s.Runs(ses.Name) {
				t.Errorf("the filters %s, with ses %v: want the reports' filter exactly when the stage runs ses", all, s.Runs(ses.Name))
			}

			// Its DLQ: named, encrypted, TLS only, 14 days.
			dlq := props(tp.one(t, "AWS::SQS::Queue", "QueueName", "nudge-"+s.Name+"-outcomes-dlq"))
			if dlq["SqsManagedSseEnabled"] != true || num64(t, dlq["MessageRetentionPeriod"]) != deployment.DLQRetention.Seconds() {
				t.Errorf("the outcomes DLQ: %v", dlq)
			}

			// The bus: the stage's own, kept with the stage's data.
			bus := tp.one(t, "AWS::Events::EventBus", "Name", "nudge-"+s.Name)
			if wantPolicy := map[bool]string{true: "Retain", false: "Delete"}[s.RetainData]; bus["DeletionPolicy"] != wantPolicy {
				t.Errorf("the bus's deletion policy %v, want %s", bus["DeletionPolicy"], wantPolicy)
			}
			checkOutcomesRole(t, tp, ids, `{"Fn::GetAtt":["`+ids.bus+`","Arn"]}`)

			outputs := tp["Outputs"].(map[string]any)
			for name, value := range map[string]string{
				"OutcomesFunction":           `{"Ref":"` + ids.fn + `"}`,
				"OutcomeEventBusArn":         `{"Fn::GetAtt":["` + ids.bus + `","Arn"]}`,
				"OutcomesDeadLetterQueueUrl": `{"Ref":"` + ids.dlq + `"}`,
			} {
				if o, ok := outputs[name].(map[string]any); !ok || asJSON(o["Value"]) != value {
					t.Errorf("output %s = %v, want %s", name, o, value)
				}
			}
			// The example subscriber is off by default.
			if _, ok := outputs["OutcomeQueueUrl"]; ok || len(tp.resources("AWS::Events::Rule")) != 0 {
				t.Errorf("the example queue without outcomeQueue=true: output %v, %d rules", outputs["OutcomeQueueUrl"], len(tp.resources("AWS::Events::Rule")))
			}
		})
	}
}

// checkOutcomesRole: the outcomes role may put events on the bus (busArn)
// and nowhere else, read the ledger's stream (ListStreams takes no
// resource), update delivery items in reminders' partitions of the table
// (taking fallbacks), publish to the operators' topic (topicArn, if not
// ""), send its on-failure records to its DLQ and write its logs; nothing
// else. No other role or policy may put events.
func checkOutcomesRole(t *testing.T, tp template, ids outcomeIDs, busArn string, topicArn ...string) {
	t.Helper()
	granted := map[string]bool{}
	for _, st := range roleStatements(tp, ids.role) {
		res := asJSON(st["Resource"])
		for _, a := range statementActions(st) {
			granted[a] = true
			var want string
			switch a {
			case "events:PutEvents":
				want = busArn
			case "dynamodb:ListStreams":
				want = `"*"`
			case "dynamodb:UpdateItem", "dynamodb:GetItem":
				want = `{"Fn::GetAtt":["` + ids.table + `","Arn"]}`
				cond := asJSON(st["Condition"])
				reminders := strings.Contains(cond, `"dynamodb:LeadingKeys":["REM#*"]`)
				registry := a == "dynamodb:GetItem" && strings.Contains(cond, `{"ForAllValues:StringEquals":{"dynamodb:LeadingKeys":["NUDGE"]}`)
				if !reminders && !registry {
					t.Errorf("the outcomes role's %s is not bound to reminders' partitions (or, to read, the registry's): %v", a, st["Condition"])
				}
			case "sns:Publish":
				want = `"none"`
				if len(topicArn) > 0 {
					want = `"` + topicArn[0] + `"`
				}
			case "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator":
				want = `{"Fn::GetAtt":["` + ids.table + `","StreamArn"]}`
			case "sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl":
				want = `{"Fn::GetAtt":["` + ids.dlq + `","Arn"]}`
			case "logs:CreateLogStream", "logs:PutLogEvents":
				want = res
				if !strings.Contains(res, "OutcomesLogs") {
					want = "its own log group"
				}
			default:
				t.Errorf("the outcomes role allows %s on %s", a, res)
				continue
			}
			if res != want {
				t.Errorf("the outcomes role's %s is on %s, want %s", a, res, want)
			}
			if st["Condition"] != nil && a == "events:PutEvents" {
				t.Errorf("PutEvents has a condition: %v", st["Condition"])
			}
		}
	}
	var got []string
	for a := range granted {
		got = append(got, a)
	}
	slices.Sort(got)
	want := []string{"dynamodb:DescribeStream", "dynamodb:GetItem", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams",
		"dynamodb:UpdateItem", "events:PutEvents", "logs:CreateLogStream", "logs:PutLogEvents", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"}
	if len(topicArn) > 0 {
		want = append(want, "sns:Publish")
		slices.Sort(want)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the outcomes role allows %v, want exactly %v", got, want)
	}
	for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::Role"} {
		for id, p := range tp.resources(typ) {
			if strings.Contains(asJSON(props(p)["Roles"]), `"Ref":"`+ids.role+`"`) {
				continue
			}
			if slices.ContainsFunc(actions(props(p)), func(a string) bool { return strings.HasPrefix(a, "events:") }) {
				t.Errorf("%s %s grants %v", typ, id, actions(props(p)))
			}
		}
	}
}

// TestTheOutcomesOnTheDefaultBus: with eventBus=default, the stack makes no
// bus, the function puts on the account's default bus, and may put there
// alone; the example rule sits on the default bus. With an operators'
// topic named, the function is told it and may publish there alone.
func TestTheOutcomesOnTheDefaultBus(t *testing.T) {
	const ops = "arn:aws:sns:eu-west-1:123456789012:nudge-operators"
	s, err := StageFromContext(func(k string) any { return map[string]any{"eventBus": "default", "operatorsTopicArn": ops}[k] })
	if err != nil {
		t.Fatal(err)
	}
	n, tpl := synthWith(t, s, Options{OutcomeQueue: true})
	tp := toJSON(t, tpl)
	ids := idsOf(t, n)
	if buses := tp.resources("AWS::Events::EventBus"); len(buses) != 0 || ids.bus != "" {
		t.Errorf("the stack makes %d buses on the default bus's stage", len(buses))
	}
	fn := props(tp.one(t, "AWS::Lambda::Function", "FunctionName", "nudge-dev-outcomes"))
	if env := asJSON(fn["Environment"].(map[string]any)["Variables"]); !strings.Contains(env, `"NUDGE_EVENT_BUS":"default"`) ||
		!strings.Contains(env, `"NUDGE_OPERATORS_TOPIC_ARN":"`+ops+`"`) {
		t.Errorf("outcomes environment %s, want the default bus and the operators' topic", env)
	}
	defaultBus := `{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":events:",{"Ref":"AWS::Region"},":",{"Ref":"AWS::AccountId"},":event-bus/default"]]}`
	checkOutcomesRole(t, tp, ids, defaultBus, ops)
	if o := tp["Outputs"].(map[string]any)["OutcomeEventBusArn"].(map[string]any); asJSON(o["Value"]) != defaultBus {
		t.Errorf("output OutcomeEventBusArn = %s", asJSON(o["Value"]))
	}
	for _, r := range tp.resources("AWS::Events::Rule") {
		if bus := props(r)["EventBusName"]; bus != "default" {
			t.Errorf("the example rule is on %v, want the default bus", bus)
		}
	}
	if msgs := nagFindings(t, n); len(msgs) > 0 {
		t.Fatalf("%d cdk-nag findings:\n%s", len(msgs), strings.Join(msgs, "\n"))
	}
}

// TestTheOutcomeQueueExample: with outcomeQueue=true, an encrypted, TLS-only
// queue nudge-<stage>-outcomes, a rule on the stage's bus matching every
// event of source nudge and targeting it, a queue policy that lets
// EventBridge send to it for that rule alone, and its URL as an output;
// cdk-nag clean.
func TestTheOutcomeQueueExample(t *testing.T) {
	n, tpl := synthWith(t, deployment.Dev(), Options{OutcomeQueue: true})
	tp := toJSON(t, tpl)
	ids := idsOf(t, n)
	var queueID, ruleID string
	must(t, func() {
		queueID = *n.Stack.GetLogicalId(n.OutcomeQueue.Node().DefaultChild().(awscdk.CfnElement))
		ruleID = *n.Stack.GetLogicalId(n.OutcomeRule.Node().DefaultChild().(awscdk.CfnElement))
	})
	q := props(tp.one(t, "AWS::SQS::Queue", "QueueName", "nudge-dev-outcomes"))
	if q["SqsManagedSseEnabled"] != true {
		t.Errorf("the outcome queue is not encrypted: %v", q)
	}
	rules := tp.resources("AWS::Events::Rule")
	rule, ok := rules[ruleID]
	if !ok || len(rules) != 1 {
		t.Fatalf("rules %v, want %s alone", rules, ruleID)
	}
	rp := props(rule)
	queueArn := `{"Fn::GetAtt":["` + queueID + `","Arn"]}`
	if asJSON(rp["EventBusName"]) != `{"Ref":"`+ids.bus+`"}` || asJSON(rp["EventPattern"]) != `{"source":["nudge"]}` || rp["State"] != "ENABLED" ||
		len(asList(rp["Targets"])) != 1 || asJSON(asList(rp["Targets"])[0].(map[string]any)["Arn"]) != queueArn {
		t.Errorf("the rule: %s; want source [nudge] on the stage's bus, to the queue", asJSON(rp))
	}
	sends := 0
	for _, p := range tp.resources("AWS::SQS::QueuePolicy") {
		if asJSON(props(p)["Queues"]) != `[{"Ref":"`+queueID+`"}]` {
			continue
		}
		for _, st := range props(p)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			if asJSON(st["Principal"]) != `{"Service":"events.amazonaws.com"}` {
				continue
			}
			sends++
			if st["Effect"] != "Allow" || !slices.Contains(statementActions(st), "sqs:SendMessage") || asJSON(st["Resource"]) != queueArn ||
				asJSON(st["Condition"]) != `{"ArnEquals":{"aws:SourceArn":{"Fn::GetAtt":["`+ruleID+`","Arn"]}}}` {
				t.Errorf("EventBridge's statement: %s; want SendMessage on the queue for the rule alone", asJSON(st))
			}
		}
	}
	if sends != 1 {
		t.Errorf("%d statements for EventBridge in the queue's policy, want 1", sends)
	}
	if o, ok := tp["Outputs"].(map[string]any)["OutcomeQueueUrl"].(map[string]any); !ok || asJSON(o["Value"]) != `{"Ref":"`+queueID+`"}` {
		t.Errorf("output OutcomeQueueUrl = %v", o)
	}
	if msgs := nagFindings(t, n); len(msgs) > 0 {
		t.Fatalf("%d cdk-nag findings:\n%s", len(msgs), strings.Join(msgs, "\n"))
	}
}

// TestTheOutcomesAlarms: errors (3 of 3 minutes), the stream iterator age
// (over 5 minutes in 3 of 3), a message in the outcomes DLQ (1 minute),
// PublishFailed (3 of 5) and Undecodable (1 minute), each on the function,
// its DLQ or its metrics (namespace Nudge, Function=outcomes).
func TestTheOutcomesAlarms(t *testing.T) {
	n, tpl := synth(t, deployment.Dev())
	tp := toJSON(t, tpl)
	ids := idsOf(t, n)
	alarm := func(name string) map[string]any {
		return props(tp.one(t, "AWS::CloudWatch::Alarm", "AlarmName", "nudge-dev-"+name))
	}
	check := func(name string, a map[string]any, threshold, periods, datapoints float64) {
		t.Helper()
		if num64(t, a["Threshold"]) != threshold || num64(t, a["EvaluationPeriods"]) != periods || num64(t, a["DatapointsToAlarm"]) != datapoints ||
			a["ComparisonOperator"] != "GreaterThanThreshold" || a["TreatMissingData"] != "notBreaching" {
			t.Errorf("alarm %s: %s; want > %v in %v of %v minutes", name, asJSON(a), threshold, datapoints, periods)
		}
	}
	fnDim := `[{"Name":"FunctionName","Value":{"Ref":"` + ids.fn + `"}}]`
	for name, w := range map[string]struct {
		metric, stat          string
		threshold, of, points float64
	}{
		"outcomes-errors":       {"Errors", "Sum", 0, 3, 3},
		"outcomes-iterator-age": {"IteratorAge", "Maximum", 300000, 3, 3},
	} {
		a := alarm(name)
		if a["MetricName"] != w.metric || a["Namespace"] != "AWS/Lambda" || asJSON(a["Dimensions"]) != fnDim || a["Statistic"] != w.stat ||
			num64(t, a["Period"]) != 60 {
			t.Errorf("alarm %s: %s; want the outcomes function's %s (%s per minute)", name, asJSON(a), w.metric, w.stat)
		}
		check(name, a, w.threshold, w.of, w.points)
	}
	for name, w := range map[string]struct {
		metric     string
		of, points float64
	}{
		"outcomes-publish-failed":  {metricOutcomesPublishFailed, 5, 3},
		"outcomes-undecodable":     {metricOutcomesUndecodable, 1, 1},
		"outcomes-fallback-failed": {metricOutcomesFallbackFailed, 5, 3},
	} {
		a := alarm(name)
		if a["MetricName"] != w.metric || a["Namespace"] != "Nudge" || asJSON(a["Dimensions"]) != `[{"Name":"Function","Value":"outcomes"}]` ||
			a["Statistic"] != "Sum" || num64(t, a["Period"]) != 60 {
			t.Errorf("alarm %s: %s; want Nudge/%s of Function outcomes summed per minute", name, asJSON(a), w.metric)
		}
		check(name, a, 0, w.of, w.points)
	}
	a := alarm("outcomes-dlq-not-empty")
	metrics := asJSON(a["Metrics"])
	if !strings.Contains(metrics, `"Expression":"FILL(v, 0) + FILL(h, 0)"`) || strings.Count(metrics, `{"Fn::GetAtt":["`+ids.dlq+`","QueueName"]}`) != 2 ||
		!strings.Contains(metrics, `"ApproximateNumberOfMessagesVisible"`) || !strings.Contains(metrics, `"ApproximateNumberOfMessagesNotVisible"`) {
		t.Errorf("alarm outcomes-dlq-not-empty: %s; want the outcomes DLQ's visible and in-flight messages", metrics)
	}
	check("outcomes-dlq-not-empty", a, 0, 1, 1)
}

// TestTheOutcomesFunctionEmitsTheAlarmedMetrics runs the outcomes handler
// against a bus that refuses and one that accepts, with a record it cannot
// decode: the metric names and dimension the stack alarms and graphs on
// are the ones it writes.
func TestTheOutcomesFunctionEmitsTheAlarmedMetrics(t *testing.T) {
	sent := delivery(ledger.StatusSent)
	img, err := ledger.Image(sent)
	if err != nil {
		t.Fatal(err)
	}
	bad := streamJSON(img)
	bad["attempts"] = map[string]any{"S": "many"}
	event := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		lambdaRecord(t, "1", map[string]any{"NewImage": streamJSON(img)}),
		lambdaRecord(t, "2", map[string]any{"NewImage": bad}),
	}}
	// A dead delivery naming a fallback, which a ledger that fails does not
	// take.
	dead := delivery(ledger.StatusDead)
	dead.Fallback = ledger.FallbackRef{Channel: "sms", Provider: "sns"}
	deadImg, err := ledger.Image(dead)
	if err != nil {
		t.Fatal(err)
	}
	failing := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{lambdaRecord(t, "3", map[string]any{"NewImage": streamJSON(deadImg)})}}
	names := map[string]bool{}
	for _, run := range []struct {
		refuse bool
		taker  outcome.FallbackTaker
		event  events.DynamoDBEvent
	}{{true, takerFailing{}, event}, {false, takerFailing{}, event}, {false, takerFailing{}, failing}} {
		var out bytes.Buffer
		f, err := outcome.NewFunction(outcome.Config{Events: &bus{refuse: run.refuse}, Fallbacks: run.taker, Bus: "nudge-dev", Attempts: 1, MetricsOut: &out,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Handle(context.Background(), run.event); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var doc struct {
				Function string
				AWS      struct {
					CloudWatchMetrics []struct {
						Namespace  string
						Dimensions [][]string
						Metrics    []struct{ Name string }
					}
				} `json:"_aws"`
			}
			if err := json.Unmarshal([]byte(line), &doc); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			for _, m := range doc.AWS.CloudWatchMetrics {
				byFunction := slices.ContainsFunc(m.Dimensions, func(d []string) bool { return slices.Equal(d, []string{"Function"}) })
				if doc.Function != "outcomes" || m.Namespace != "Nudge" || !byFunction {
					t.Errorf("metrics %s: want namespace Nudge, dimension Function=outcomes", line)
				}
				for _, x := range m.Metrics {
					names[x.Name] = true
				}
			}
		}
	}
	for _, name := range []string{metricOutcomesPublished, metricOutcomesPutRetried, metricOutcomesPublishFailed, metricOutcomesUndecodable,
		metricOutcomesFallbackFailed} {
		if !names[name] {
			t.Errorf("the outcomes function wrote no %s metric (it wrote %v)", name, names)
		}
	}
}

// takerFailing is a ledger whose writes fail.
type takerFailing struct{}

func (takerFailing) TakeFallback(context.Context, ledger.Delivery, string) (ledger.Delivery, error) {
	return ledger.Delivery{}, errors.New("ProvisionedThroughputExceededException")
}

// bus is a PutEvents that refuses every entry, or accepts each.
type bus struct{ refuse bool }

func (b *bus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	out := &eventbridge.PutEventsOutput{}
	for i := range in.Entries {
		if b.refuse {
			out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{ErrorCode: aws.String("ThrottlingException")})
			out.FailedEntryCount++
			continue
		}
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String(fmt.Sprint("ev-", i))})
	}
	return out, nil
}

// lambdaRecord is a MODIFY stream record as Lambda hands it to the
// function, with the images of change (DynamoDB JSON).
func lambdaRecord(t *testing.T, seq string, change map[string]any) events.DynamoDBEventRecord {
	t.Helper()
	change["SequenceNumber"] = seq
	b, _ := json.Marshal(map[string]any{"eventID": seq, "eventName": "MODIFY", "eventSource": "aws:dynamodb", "dynamodb": change})
	var r events.DynamoDBEventRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

var t0 = time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC)

// delivery is a delivery that entered status with its last write.
func delivery(status ledger.Status) ledger.Delivery {
	return ledger.Delivery{ReminderID: "rem-1", AccountRef: "acct-7", Channel: "email", Provider: "ses", Status: status,
		RecipientRef: "acct-7/contact-1", TemplateRef: "renewal", DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour), Attempts: 1, UpdatedAt: t0.Add(time.Second),
		History: []ledger.Entry{{At: ledger.Format(t0), Status: ledger.StatusQueued}, {At: ledger.Format(t0.Add(time.Second)), Status: status, Attempt: 1}}}
}

// streamJSON is an item image as the stream's records carry it (DynamoDB
// JSON).
func streamJSON(img map[string]ddbtypes.AttributeValue) map[string]any {
	out := map[string]any{}
	for k, v := range img {
		out[k] = avJSON(v)
	}
	return out
}

func avJSON(v ddbtypes.AttributeValue) any {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *ddbtypes.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *ddbtypes.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *ddbtypes.AttributeValueMemberNULL:
		return map[string]any{"NULL": true}
	case *ddbtypes.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *ddbtypes.AttributeValueMemberM:
		return map[string]any{"M": streamJSON(v.Value)}
	case *ddbtypes.AttributeValueMemberL:
		l := []any{}
		for _, e := range v.Value {
			l = append(l, avJSON(e))
		}
		return map[string]any{"L": l}
	}
	panic(fmt.Sprintf("attribute type %T", v))
}

// matches evaluates an EventBridge pattern, or a Lambda filter pattern (the
// same syntax), against an event or a record: the part the stack's rules
// and filters use: nested fields; lists of exact strings, prefix and
// exists; a field whose value is an array matches if any element does.
func matches(t *testing.T, pattern, record any) bool {
	t.Helper()
	switch p := pattern.(type) {
	case map[string]any:
		r, ok := record.(map[string]any)
		if !ok {
			return false
		}
		for k, sub := range p {
			v, ok := r[k]
			if !ok || !matches(t, sub, v) {
				return false
			}
		}
		return true
	case []any:
		values, ok := record.([]any)
		if !ok {
			values = []any{record}
		}
		for _, alt := range p {
			for _, v := range values {
				if matchesOne(t, alt, v) {
					return true
				}
			}
		}
		return false
	}
	t.Fatalf("the test does not evaluate %v", pattern)
	return false
}

// matchesOne evaluates one alternative of a pattern's list against a value.
func matchesOne(t *testing.T, alt, v any) bool {
	t.Helper()
	s, isString := v.(string)
	switch a := alt.(type) {
	case string:
		return isString && s == a
	case map[string]any:
		if exists, ok := a["exists"].(bool); ok && len(a) == 1 {
			return exists // the value is there (a missing key fails in the map case)
		}
		prefix, ok := a["prefix"].(string)
		if len(a) != 1 || !ok {
			t.Fatalf("the test does not evaluate the rule %v", a)
		}
		return isString && strings.HasPrefix(s, prefix)
	}
	t.Fatalf("the test does not evaluate %v", alt)
	return false
}

// TestTheOutcomeFilterAgreesWithTheOutcomeRule: the mapping's filter lets
// through the change of a delivery into exactly the statuses from which
// outcome.Of makes an event, as the ledger writes the item (ledger.Image),
// and nothing of an item that is not a delivery or a delete. The list of
// statuses it is built from is every Status constant of the ledger.
func TestTheOutcomeFilterAgreesWithTheOutcomeRule(t *testing.T) {
	def := ledger.TableInput("nudge-dev-ledger")
	var patterns []any
	b, _ := json.Marshal(outcomeFilters(sortKeyOf(def), true))
	if err := json.Unmarshal(b, &patterns); err != nil { // the JSON the mapping holds
		t.Fatal(err)
	}
	passes := func(record any) bool { // Lambda passes a record that any filter matches
		for _, p := range patterns {
			if matches(t, p, record) {
				return true
			}
		}
		return false
	}
	record := func(name string, img, old map[string]ddbtypes.AttributeValue) any {
		keys := map[string]any{}
		for _, k := range def.KeySchema {
			keys[*k.AttributeName] = avJSON(img[*k.AttributeName])
		}
		change := map[string]any{"Keys": keys}
		if name != "REMOVE" {
			change["NewImage"] = streamJSON(img)
		}
		if old != nil {
			change["OldImage"] = streamJSON(old)
		}
		var r any
		b, _ := json.Marshal(map[string]any{"eventName": name, "eventSource": "aws:dynamodb", "dynamodb": change})
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	image := func(d ledger.Delivery) map[string]ddbtypes.AttributeValue {
		img, err := ledger.Image(d)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	emitting := 0
	for _, st := range ledgerStatuses {
		d := delivery(st)
		// Of makes an event of a change into st from some status, or of a
		// new item in st.
		_, emits := outcome.Of(ledger.Delivery{}, false, d, "dev")
		for _, from := range ledgerStatuses {
			if _, ok := outcome.Of(delivery(from), true, d, "dev"); ok {
				emits = true
			}
		}
		if emits {
			emitting++
		}
		old := image(delivery(ledger.StatusSending))
		if got := passes(record("MODIFY", image(d), old)); got != emits {
			t.Errorf("status %s: the filter passes %v, outcome.Of makes an event %v", st, got, emits)
		}
		if got := passes(record("INSERT", image(d), nil)); got != emits {
			t.Errorf("a new item in status %s: the filter passes %v, outcome.Of makes an event %v", st, got, emits)
		}
		if passes(record("REMOVE", image(d), image(d))) {
			t.Errorf("a delete of a delivery in status %s passes the filter", st)
		}
		// An item that is not a delivery (another sort key): the ledger
		// reads no delivery from it, and the filter drops it.
		other := image(d)
		other[sortKeyOf(def)] = &ddbtypes.AttributeValueMemberS{Value: "REMINDER"}
		if _, ok, _ := ledger.DeliveryOfImage(other); ok || passes(record("MODIFY", other, nil)) {
			t.Errorf("an item with sort key REMINDER in status %s: a delivery %v, or passes the filter", st, ok)
		}
	}
	if emitting == 0 {
		t.Fatal("outcome.Of made no event of any status: the test checks nothing")
	}
	// A provider's report recorded on a delivery, in any status (an SES
	// send whose answer was lost is still sending or retrying): outcome.Of
	// makes an event of it, and the filter passes it.
	for _, st := range ledgerStatuses {
		mem, err := ledger.NewMemory(ledger.MemoryConfig{})
		if err != nil {
			t.Fatal(err)
		}
		d := delivery(st)
		if err := mem.Create(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		reported, err := mem.RecordFeedback(context.Background(), d.Key(), ledger.Feedback{Kind: ledger.FeedbackDelivered, At: d.DueAt, ID: "r-1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := outcome.Of(d, true, reported, "dev"); !ok {
			t.Fatalf("status %s: outcome.Of makes no event of a report", st)
		}
		if !passes(record("MODIFY", image(reported), image(d))) {
			t.Errorf("status %s: a report recorded does not pass the filter", st)
		}
	}

	// ledgerStatuses is every Status constant of the ledger.
	var declared []string
	files, _ := filepath.Glob("../internal/ledger/*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				if typ, ok := v.Type.(*ast.Ident); !ok || typ.Name != "Status" {
					continue
				}
				for _, val := range v.Values {
					lit, ok := val.(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s: a Status constant that is not a string literal: %v", name, val)
					}
					s, _ := strconv.Unquote(lit.Value)
					declared = append(declared, s)
				}
			}
		}
	}
	var listed []string
	for _, s := range ledgerStatuses {
		listed = append(listed, string(s))
	}
	slices.Sort(declared)
	slices.Sort(listed)
	if len(declared) == 0 || !slices.Equal(declared, listed) {
		t.Errorf("the ledger declares the statuses %v; infra/outcomes.go's ledgerStatuses lists %v", declared, listed)
	}
}

// TestTheTableStreamIsTheLedgers: the table's stream is the definition's,
// each view type as it is; none when the definition has none or disables
// it; a view type the stack does not know stops the synthesis, and so does
// a ledger without new and old images for the outcomes function.
func TestTheTableStreamIsTheLedgers(t *testing.T) {
	stream := func(t *testing.T, spec *ddbtypes.StreamSpecification) string {
		t.Helper()
		def := ledger.TableInput("t")
		def.StreamSpecification = spec
		var tp template
		must(t, func() {
			stack := awscdk.NewStack(awscdk.NewApp(nil), aws.String("T"), nil)
			newTable(stack, def, false, awscdk.RemovalPolicy_DESTROY)
			tp = toJSON(t, assertions.Template_FromStack(stack, nil))
		})
		for _, table := range tp.resources("AWS::DynamoDB::Table") {
			return asJSON(props(table)["StreamSpecification"])
		}
		t.Fatal("no table")
		return ""
	}
	for _, view := range []ddbtypes.StreamViewType{ddbtypes.StreamViewTypeNewAndOldImages, ddbtypes.StreamViewTypeNewImage,
		ddbtypes.StreamViewTypeOldImage, ddbtypes.StreamViewTypeKeysOnly} {
		if got := stream(t, &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: view}); got != `{"StreamViewType":"`+string(view)+`"}` {
			t.Errorf("view %s: the table's stream is %s", view, got)
		}
	}
	for name, spec := range map[string]*ddbtypes.StreamSpecification{
		"none": nil, "disabled": {StreamEnabled: aws.Bool(false), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	} {
		if got := stream(t, spec); got != "null" {
			t.Errorf("%s: the table's stream is %s, want none", name, got)
		}
	}
	stops := func(name, want string, f func()) {
		t.Helper()
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), want) {
				t.Errorf("%s: %v; want a stop saying %q", name, r, want)
			}
		}()
		f()
	}
	unknown := ledger.TableInput("t")
	unknown.StreamSpecification = &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: "SOME_IMAGES"}
	stops("an unknown view type", `has a stream of view type "SOME_IMAGES"`, func() {
		newTable(awscdk.NewStack(awscdk.NewApp(nil), aws.String("T"), nil), unknown, false, awscdk.RemovalPolicy_DESTROY)
	})
	for _, spec := range []*ddbtypes.StreamSpecification{nil, {StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewImage}} {
		def := ledger.TableInput("t")
		def.StreamSpecification = spec
		stops(fmt.Sprintf("the outcomes function on %v", spec), "no stream of new and old images", func() {
			(&NudgeStack{}).outcomes(deployment.Dev(), &NudgeStackProps{}, def, awscdk.RemovalPolicy_DESTROY, false)
		})
	}
	if sortKeyOf(ledger.TableInput("t")) != "SK" {
		t.Errorf("the ledger's sort key is %s", sortKeyOf(ledger.TableInput("t")))
	}
	stops("a table without a sort key", "has no sort key", func() { sortKeyOf(&dynamodb.CreateTableInput{TableName: aws.String("t")}) })
}

// TestContextSetsTheOutcomes: outcomesMemory, outcomesTimeout, eventBus
// and outcomeQueue, with the stage's scoping and the same errors as the
// other keys.
func TestContextSetsTheOutcomes(t *testing.T) {
	ctx := map[string]any{"outcomesMemory": "256", "outcomesTimeout": "60", "eventBus": "default", "outcomeQueue": "true", "prod:outcomeQueue": "false"}
	get := func(k string) any { return ctx[k] }
	s, err := StageFromContext(get)
	if err != nil || s.OutcomesMemoryMB != 256 || s.OutcomesTimeout != time.Minute || s.EventBusName() != "default" {
		t.Fatalf("stage %+v, %v", s, err)
	}
	if o, err := OptionsFromContext("dev", get); err != nil || !o.OutcomeQueue {
		t.Errorf("dev's options %+v, %v; want the outcome queue", o, err)
	}
	if o, err := OptionsFromContext("prod", get); err != nil || o.OutcomeQueue {
		t.Errorf("prod's options %+v, %v; prod:outcomeQueue=false wins", o, err)
	}
	if o, err := OptionsFromContext("dev", func(string) any { return nil }); err != nil || o.OutcomeQueue {
		t.Errorf("options without context %+v, %v; want the queue off", o, err)
	}
	if _, err := OptionsFromContext("dev", func(k string) any { return map[string]any{"outcomeQueue": "maybe"}[k] }); err == nil ||
		err.Error() != `context outcomeQueue="maybe" is not true or false` {
		t.Errorf("outcomeQueue=maybe: %v", err)
	}
	for bad, want := range map[string]string{
		"outcomesMemory=a lot": `context outcomesMemory="a lot" is not a whole number`,
		"outcomesTimeout=ten":  `context outcomesTimeout="ten" is not a whole number of seconds`,
		"outcomesMemory=64":    "the outcomes function needs a timeout of 1 s or more and 128 MB or more",
		"outcomesTimeout=1000": "a function timeout above Lambda's 15 minutes",
		"eventBus=mine":        `event bus "mine"`,
	} {
		k, v, _ := strings.Cut(bad, "=")
		if _, err := StageFromContext(func(key string) any { return map[string]any{k: v}[key] }); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error with %q", bad, err, want)
		}
	}
}

// TestTheOutcomesMappingPassesReportsWithSES: with ses (whose events the
// feedback function records on the deliveries), the outcomes mapping's
// filters pass a delivery that holds a report, in any status; without it,
// the end filter alone.
func TestTheOutcomesMappingPassesReportsWithSES(t *testing.T) {
	for _, s := range []deployment.Stage{deployment.Dev(), sesStage(deployment.Dev())} {
		_, tpl := synth(t, s)
		tp := toJSON(t, tpl)
		var filters string
		for _, r := range tp.resources("AWS::Lambda::EventSourceMapping") {
			if m := props(r); strings.Contains(asJSON(m["EventSourceArn"]), "StreamArn") {
				filters = asJSON(m["FilterCriteria"])
			}
		}
		reported := strings.Contains(filters, `\"NewImage\":{\"feedback\":{\"S\":[{\"exists\":true}]}}`)
		if !strings.Contains(filters, `\"status\":{\"S\":[\"sent\",\"dead\",\"expired\",\"cancelled\"]}`) || reported != s.Runs(ses.Name) {
			t.Errorf("providers %v: the outcomes mapping's filters %s; want the reports' filter exactly with ses", s.Providers, filters)
		}
	}
}
