package main

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/jsii-runtime-go"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/outcome"
)

// The outcomes function's stream mapping. Not stage settings: each follows
// from what the function does, not from the stage's load.
const (
	// outcomesBatchSize is the most stream records one invocation gets
	// (Lambda's default for DynamoDB). The function puts them 10 at a time
	// (outcome.MaxEntries), in order, and most records are filtered out
	// before they count.
	outcomesBatchSize = 100
	// outcomesBatchingWindow is how long the mapping gathers records before
	// it invokes: one second groups the writes of a consumer's batch into
	// one invocation and adds at most a second to an event's delay.
	outcomesBatchingWindow = time.Second
	// outcomesMaxRecordAge is how long a failing record is retried: 23 h,
	// an hour inside DynamoDB Streams' 24 h retention, so that Lambda gives
	// the record up, and writes its on-failure record to the outcomes DLQ,
	// while the stream still holds it (a record the stream trims first may
	// leave no trace). The mapping's retries are otherwise unlimited (no
	// MaximumRetryAttempts: CDK's RetryAttempts left unset is -1); at this
	// age (MaxRecordAge, MaximumRecordAgeInSeconds) the age alone ends them.
	outcomesMaxRecordAge = 23 * time.Hour
	// outcomesIteratorAgeAlarm is the stream iterator age (the age of the
	// last record of an invocation's batch) above which, in 3 minutes of 3,
	// the outcomes-iterator-age alarm fires: events are that late.
	outcomesIteratorAgeAlarm = 5 * time.Minute
)

// The outcomes function's own metrics (namespace Nudge, Function=outcomes),
// which internal/outcome writes. TestTheOutcomesFunctionEmitsTheAlarmedMetrics
// runs the function to check the names.
const (
	metricOutcomesPublished     = "Published"
	metricOutcomesPutRetried    = "PutRetried"
	metricOutcomesPublishFailed = "PublishFailed"
	metricOutcomesUndecodable   = "Undecodable"
	// metricOutcomesFallbackFailed counts fallbacks the ledger failed to
	// take (a throttled or failed write, not a refusal).
	metricOutcomesFallbackFailed = "FallbackFailed"
)

// The ledger's attributes the outcomes filter reads: the prefix of every
// delivery item's sort key (ledger.SortKey) and the status attribute.
// TestTheOutcomeFilterAgreesWithTheOutcomeRule checks both against the
// images the ledger writes.
const (
	deliverySortKeyPrefix = "DLV#"
	statusAttribute       = "status"
	// feedbackAttribute is set on a delivery item by the first report of
	// its provider the ledger records (ledger.RecordFeedback), and kept.
	feedbackAttribute = "feedback"
)

// ledgerStatuses are every ledger.Status a delivery can have (the test
// above checks the list against the ledger's constants).
var ledgerStatuses = []ledger.Status{
	ledger.StatusHeld, ledger.StatusPending, ledger.StatusQueued, ledger.StatusSending, ledger.StatusRetrying,
	ledger.StatusSent, ledger.StatusDead, ledger.StatusExpired, ledger.StatusCancelled,
}

// outcomeFilters are the outcomes mapping's filter criteria (a record
// passes if either does): a change that leaves a delivery item (sortKey
// beginning with deliverySortKeyPrefix) in a terminal status, and, when
// the stage runs a provider that reports (reports), a change of a delivery
// item that holds a provider's report (its feedback attribute): the only changes outcome.Of makes an event of (an end, or a
// report recorded, which may come while the delivery is still live: an
// SES send whose answer was lost). Lambda drops every other record before
// it invokes the function (a claim, a retry, a reminder item, a delete:
// most of the stream) and moves past it. A change that stays in one
// terminal status, or a later change of an item with a report, still
// passes (a filter cannot compare the old image with the new): the
// function drops it.
func outcomeFilters(sortKey string, reports bool) []map[string]any {
	delivery := map[string]any{sortKey: map[string]any{"S": []any{map[string]any{"prefix": deliverySortKeyPrefix}}}}
	reported := map[string]any{"dynamodb": map[string]any{
		"Keys":     delivery,
		"NewImage": map[string]any{feedbackAttribute: map[string]any{"S": []any{map[string]any{"exists": true}}}},
	}}
	if !reports {
		return []map[string]any{outcomeFilter(sortKey)}
	}
	return []map[string]any{outcomeFilter(sortKey), reported}
}

// outcomeFilter is the filter of the ends: a delivery item left in a
// terminal status.
func outcomeFilter(sortKey string) map[string]any {
	var terminal []any
	for _, s := range ledgerStatuses {
		if s.Terminal() {
			terminal = append(terminal, string(s))
		}
	}
	return map[string]any{"dynamodb": map[string]any{
		"Keys":     map[string]any{sortKey: map[string]any{"S": []any{map[string]any{"prefix": deliverySortKeyPrefix}}}},
		"NewImage": map[string]any{statusAttribute: map[string]any{"S": terminal}},
	}}
}

// sortKeyOf is the name of def's sort key.
func sortKeyOf(def *dynamodb.CreateTableInput) string {
	for _, k := range def.KeySchema {
		if k.KeyType == ddbtypes.KeyTypeRange {
			return *k.AttributeName
		}
	}
	panic(fmt.Sprintf("ledger table %s has no sort key: the outcomes filter reads it", *def.TableName))
}

// outcomes defines the outcome events: the bus (the stage's own, or the
// account's default), the outcomes function reading the ledger's stream
// through a filtered mapping, its on-failure queue, its one grant on the
// bus, and, with Options.OutcomeQueue, the example subscriber: a queue and
// a rule that sends it every outcome event.
func (n *NudgeStack) outcomes(s deployment.Stage, props *NudgeStackProps, def *dynamodb.CreateTableInput, removal awscdk.RemovalPolicy, reports bool) {
	if streamView(def) != awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES {
		panic(fmt.Sprintf("ledger table %s has no stream of new and old images (StreamSpecification): the outcomes function reads both", *def.TableName))
	}
	stack := n.Stack
	if s.EventBusName() == deployment.DefaultBus {
		n.EventBus = awsevents.EventBus_FromEventBusName(stack, str("OutcomeBus"), str(deployment.DefaultBus))
	} else {
		bus := awsevents.NewEventBus(stack, str("OutcomeBus"), &awsevents.EventBusProps{
			EventBusName: str(s.EventBusName()), Description: str("Nudge " + s.Name + ": outcome events (source " + outcome.Source + ")"),
		})
		// Subscribers' rules live on it: prod keeps it with its data.
		bus.ApplyRemovalPolicy(removal)
		n.EventBus = bus
	}

	n.OutcomesDLQ = awssqs.NewQueue(stack, str("OutcomesDeadLetterQueue"), &awssqs.QueueProps{
		QueueName: str("nudge-" + s.Name + "-outcomes-dlq"), Encryption: awssqs.QueueEncryption_SQS_MANAGED, EnforceSSL: jsii.Bool(true),
		RetentionPeriod: secs(deployment.DLQRetention.Seconds()), RemovalPolicy: removal,
	})
	res := deployment.Resources{Table: *n.Table.TableName()}
	n.Outcomes = newFunction(stack, "Outcomes", props.BuildDir, "outcomes", s.OutcomesMemoryMB, s.OutcomesTimeout.Seconds(), 0, s.OutcomesEnv(res), s, removal)
	// PutEvents on the bus alone; what ledger.TakeFallback calls (the
	// conditional writes of the fallback's and its primary's items, on
	// reminders' partitions alone, and a read of the shard count in the
	// registry); and, with an operators' topic, sns:Publish on it alone.
	// TestTheRolesAllowWhatTheLedgerCalls runs the calls against the role.
	n.Outcomes.AddToRolePolicy(allow([]string{"events:PutEvents"}, n.EventBus.EventBusArn()))
	n.Outcomes.AddToRolePolicy(reminderWrites([]string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, n.Table.TableArn()))
	// The shard count a taken fallback is placed by, read from the registry.
	n.Outcomes.AddToRolePolicy(registryAccess([]string{"dynamodb:GetItem"}, n.Table.TableArn()))
	if s.OperatorsTopicArn != "" {
		n.Outcomes.AddToRolePolicy(allow([]string{"sns:Publish"}, str(s.OperatorsTopicArn)))
	}
	// Reading the stream is the mapping's grant: dynamodb:DescribeStream,
	// GetRecords and GetShardIterator on the table's stream, ListStreams
	// (which takes no resource); the on-failure destination's is
	// sqs:SendMessage, GetQueueAttributes and GetQueueUrl on the DLQ.
	// ParallelizationFactor 1: one batch per shard at a time, so a
	// delivery's events are put in the order of its changes. Bisecting is
	// off: the function names the failing record itself
	// (ReportBatchItemFailures), and the mapping retries from it.
	var filters []*map[string]any
	for _, f := range outcomeFilters(sortKeyOf(def), reports) {
		filters = append(filters, awslambda.FilterCriteria_Filter(&f))
	}
	n.Outcomes.AddEventSource(awslambdaeventsources.NewDynamoEventSource(n.Table, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition: awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:        num(outcomesBatchSize), MaxBatchingWindow: secs(outcomesBatchingWindow.Seconds()),
		ReportBatchItemFailures: jsii.Bool(true), ParallelizationFactor: num(1), BisectBatchOnError: jsii.Bool(false),
		MaxRecordAge: secs(outcomesMaxRecordAge.Seconds()),
		OnFailure:    awslambdaeventsources.NewSqsDlq(n.OutcomesDLQ),
		Filters:      &filters,
	}))

	if props.Options.OutcomeQueue {
		n.outcomeQueue(s, removal)
	}
}

// outcomeQueue defines the example subscriber of the outcome events: the
// queue nudge-<stage>-outcomes and a rule on the bus sending it every event
// of source "nudge" (every detail-type). The target adds the queue policy
// EventBridge needs: sqs:SendMessage for events.amazonaws.com, only for
// this rule (aws:SourceArn).
func (n *NudgeStack) outcomeQueue(s deployment.Stage, removal awscdk.RemovalPolicy) {
	n.OutcomeQueue = awssqs.NewQueue(n.Stack, str("OutcomeQueue"), &awssqs.QueueProps{
		QueueName: str("nudge-" + s.Name + "-outcomes"), Encryption: awssqs.QueueEncryption_SQS_MANAGED, EnforceSSL: jsii.Bool(true),
		RemovalPolicy: removal,
	})
	n.OutcomeRule = awsevents.NewRule(n.Stack, str("OutcomesToQueue"), &awsevents.RuleProps{
		RuleName:     str("nudge-" + s.Name + "-outcomes-to-queue"),
		Description:  str("Nudge " + s.Name + ": every outcome event to the queue nudge-" + s.Name + "-outcomes (an example subscriber)"),
		EventBus:     n.EventBus,
		EventPattern: &awsevents.EventPattern{Source: jsii.Strings(outcome.Source)},
		Targets:      &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(n.OutcomeQueue, nil)},
	})
	awscdk.NewCfnOutput(n.Stack, str("OutcomeQueueUrl"), &awscdk.CfnOutputProps{Value: n.OutcomeQueue.QueueUrl()})
}

// outcomeAlarms are the outcomes function's alarms.
func (n *NudgeStack) outcomeAlarms(add alarmFunc) {
	minute := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(num(1)), Statistic: str("Maximum")}
	sum := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(num(1)), Statistic: str("Sum")}
	notBreaching := awscloudwatch.TreatMissingData_NOT_BREACHING
	add("outcomes-errors", "The outcomes function failed invocations (a crash, a timeout, a failed start): "+
		"the stream mapping retries the batch, and outcome events wait.",
		n.Outcomes.MetricErrors(sum), 0, 3, 0, notBreaching)
	add("outcomes-iterator-age", fmt.Sprintf("The outcomes function's stream iterator age was above %v in 3 of 3 minutes: "+
		"outcome events are that late (a failing or slow batch holds its shard).", outcomesIteratorAgeAlarm),
		n.Outcomes.Metric(str("IteratorAge"), minute), float64(outcomesIteratorAgeAlarm.Milliseconds()), 3, 0, notBreaching)
	add("outcomes-dlq-not-empty", "A stream batch failed for 23 h and the mapping gave it up: the outcome events of those ledger changes "+
		"were not put. The record in the outcomes DLQ names the shard and sequence numbers.",
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{Expression: str("FILL(v, 0) + FILL(h, 0)"), Label: str("Outcomes DLQ messages"),
			UsingMetrics: &map[string]awscloudwatch.IMetric{"v": n.OutcomesDLQ.MetricApproximateNumberOfMessagesVisible(minute),
				"h": n.OutcomesDLQ.MetricApproximateNumberOfMessagesNotVisible(minute)},
			Period: awscdk.Duration_Minutes(num(1))}),
		0, 1, 0, notBreaching)
	add("outcomes-publish-failed", "EventBridge kept refusing outcome events in 3 of 5 minutes: "+
		"the mapping retries from the first refused record, and events wait.",
		nudgeMetric("outcomes", metricOutcomesPublishFailed, "Sum"), 0, 5, 3, notBreaching)
	add("outcomes-fallback-failed", "The outcomes function could not take failed deliveries' fallbacks (the ledger's write failed) in 3 of 5 minutes: "+
		"the mapping retries from the record, and the shard's later events wait: the fallbacks are late, and past 23 h their records go to the outcomes DLQ.",
		nudgeMetric("outcomes", metricOutcomesFallbackFailed, "Sum"), 0, 5, 3, notBreaching)
	add("outcomes-undecodable", "The outcomes function met a stream record it cannot decode as a delivery (a deploy out of step): "+
		"the mapping retries from it, and the shard's later events wait, until a function that reads it is deployed.",
		nudgeMetric("outcomes", metricOutcomesUndecodable, "Sum"), 0, 1, 0, notBreaching)
}

// outcomesWidget graphs the outcome events put, retried, refused and
// skipped, and how late the stream is read.
func (n *NudgeStack) outcomesWidget() awscloudwatch.IWidget {
	return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: str("Outcome events"), Width: num(8),
		Left: &[]awscloudwatch.IMetric{nudgeMetric("outcomes", metricOutcomesPublished, "Sum"), nudgeMetric("outcomes", metricOutcomesPutRetried, "Sum"),
			nudgeMetric("outcomes", metricOutcomesPublishFailed, "Sum"), nudgeMetric("outcomes", metricOutcomesUndecodable, "Sum"),
			nudgeMetric("outcomes", metricOutcomesFallbackFailed, "Sum")},
		Right: &[]awscloudwatch.IMetric{n.Outcomes.Metric(str("IteratorAge"),
			&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(num(1)), Statistic: str("Maximum")})},
	})
}
