package main

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/feedback"
	"github.com/nudgehq/nudge/internal/provider/ses"
)

// The feedback function's queue, mapping and alarm. Not stage settings:
// each follows from what the function does, not from the stage's load.
const (
	// feedbackBatchSize is the most events one invocation gets: one round
	// of the function's records, which it runs 10 at once
	// (feedback.Config.Concurrency's default).
	feedbackBatchSize = 10
	// feedbackBatchingWindow is how long the mapping gathers events before
	// it invokes: one second groups the events of a consumer's batch of
	// sends (SES publishes them as it takes each e-mail) and adds at most a
	// second to an event's recording.
	feedbackBatchingWindow = time.Second
	// feedbackMaxConcurrency is the most invocations at once: 2, the least
	// Lambda allows for an SQS mapping. Recording an event is two small
	// ledger calls, so 2 × 10 records at a time keep up with SES's sending
	// rate; a burst of events (a bounce storm, a backlog after an outage)
	// waits in the queue rather than taking the table's capacity from the
	// consumer, which sends.
	feedbackMaxConcurrency = 2
	// feedbackMaxReceiveCount is how often an event is received before SQS
	// moves it to the feedback DLQ: the function fails a record only when
	// the ledger does (throttling, 5xx), and five tries over 15 minutes
	// (the visibility timeout apart) outlast a throttled minute.
	feedbackMaxReceiveCount = 5
	// feedbackStoppedWindow is the feedback-stopped alarm's window: e-mails
	// were sent in it and no SES event was recorded in it. SES calls its
	// event publishing best effort; a Send event comes within seconds of
	// the send, a Delivery within minutes (the receiving server's answer).
	// 30 minutes is far beyond a healthy path's delay, so a window with
	// sends always records at least their Send events, and short enough to
	// hear of a broken path within the hour.
	feedbackStoppedWindow = 30 * time.Minute
)

// sesDetailTypes are the EventBridge detail-types of the SES sending
// events the feedback function records (internal/feedback; "Email Opened",
// "Email Clicked" and the like are not). TestTheFeedbackRuleAgreesWithTheFunction
// checks the list against what feedback.Parse takes.
var sesDetailTypes = []string{
	"Email Sent", "Email Delivered", "Email Bounced", "Email Complaint Received",
	"Email Rejected", "Email Delivery Delayed", "Email Rendering Failed",
}

// feedbackRuleName names the rule, whose name is the dimension of its
// EventBridge metrics (FailedInvocations).
func feedbackRuleName(s deployment.Stage) string { return "nudge-" + s.Name + "-ses-feedback" }

// feedbackPattern is the rule's event pattern: SES's sending events of the
// stage's configuration set (a tag every event of it carries), of the
// detail-types the function records.
func feedbackPattern(s deployment.Stage) *awsevents.EventPattern {
	return &awsevents.EventPattern{
		Source:     jsii.Strings(feedback.Source),
		DetailType: jsii.Strings(sesDetailTypes...),
		Detail: &map[string]any{"mail": map[string]any{"tags": map[string]any{
			feedback.TagConfigurationSet: []string{ses.ConfigurationSet(s.Name)},
		}}},
	}
}

// feedback defines the way SES's sending events come back into the
// ledger, for a stage that runs ses: a rule on the default bus (where the
// configuration set publishes them, bus) sends the set's events to the
// queue nudge-<stage>-feedback, and the feedback function reads it
// through an SQS mapping and records each on its delivery. A message
// received five times goes to nudge-<stage>-feedback-dlq.
func (n *NudgeStack) feedback(s deployment.Stage, buildDir string, bus awsevents.IEventBus) {
	stack := n.Stack
	removal := awscdk.RemovalPolicy_DESTROY
	if s.RetainData {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	queueName, dlqName := "nudge-"+s.Name+"-feedback", "nudge-"+s.Name+"-feedback-dlq"
	// Fixed names, so that the DLQ's RedriveAllowPolicy names the queue's
	// ARN without referencing it (a cycle), as the work queue's DLQ does.
	n.FeedbackDLQ = awssqs.NewQueue(stack, str("FeedbackDeadLetterQueue"), &awssqs.QueueProps{
		QueueName: str(dlqName), Encryption: awssqs.QueueEncryption_SQS_MANAGED, EnforceSSL: jsii.Bool(true),
		RetentionPeriod: secs(deployment.DLQRetention.Seconds()), RemovalPolicy: removal,
	})
	n.FeedbackDLQ.Node().DefaultChild().(awssqs.CfnQueue).SetRedriveAllowPolicy(map[string]any{
		"redrivePermission": "byQueue",
		"sourceQueueArns":   []*string{stack.FormatArn(&awscdk.ArnComponents{Service: str("sqs"), Resource: str(queueName)})},
	})
	// Visibility: 6 × the function's timeout, as the work queue's (AWS's
	// advice for a mapping, so that a batch Lambda retries is not handed
	// out again early); it spans the batching window too.
	n.FeedbackQueue = awssqs.NewQueue(stack, str("FeedbackQueue"), &awssqs.QueueProps{
		QueueName: str(queueName), Encryption: awssqs.QueueEncryption_SQS_MANAGED, EnforceSSL: jsii.Bool(true),
		VisibilityTimeout: secs((deployment.VisibilityFactor * s.FeedbackTimeout).Seconds()),
		RetentionPeriod:   secs(deployment.WorkRetention.Seconds()),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: n.FeedbackDLQ, MaxReceiveCount: num(feedbackMaxReceiveCount)},
		RemovalPolicy:     removal,
	})

	// The target adds the queue policy EventBridge needs: sqs:SendMessage
	// (with GetQueueAttributes, GetQueueUrl) for events.amazonaws.com on
	// this queue, only for this rule (ArnEquals aws:SourceArn). EventBridge
	// retries a failed delivery for 24 h (its default); what fails beyond
	// is counted in FailedInvocations, which feedback-rule-failed watches.
	n.FeedbackRule = awsevents.NewRule(stack, str("FeedbackRule"), &awsevents.RuleProps{
		RuleName:     str(feedbackRuleName(s)),
		Description:  str("Nudge " + s.Name + ": SES sending events of the configuration set " + ses.ConfigurationSet(s.Name) + " to the feedback queue"),
		EventBus:     bus,
		EventPattern: feedbackPattern(s),
		// An event EventBridge still cannot deliver after its retries goes
		// to the feedback DLQ (the target's dead-letter queue, which the
		// target's queue policy lets this rule send to): kept 14 days, and
		// redriven to the feedback queue like any message there (its body
		// is the event the function reads).
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(n.FeedbackQueue, &awseventstargets.SqsQueueProps{DeadLetterQueue: n.FeedbackDLQ})},
	})

	res := deployment.Resources{Table: *n.Table.TableName()}
	n.Feedback = newFunction(stack, "Feedback", buildDir, "feedback", s.FeedbackMemoryMB, s.FeedbackTimeout.Seconds(), 0, s.FeedbackEnv(res), s, removal)
	// The two calls ledger.RecordFeedback makes (a GetItem, a conditional
	// UpdateItem), on the table alone (no index), and only on reminders'
	// partitions (REM#…), where deliveries live.
	n.Feedback.AddToRolePolicy(reminderWrites([]string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, n.Table.TableArn()))
	// The feedback mark (ledger.RecordFeedbackMark): a conditional UpdateItem
	// of its registry item.
	n.Feedback.AddToRolePolicy(registryAccess([]string{"dynamodb:UpdateItem"}, n.Table.TableArn()))
	// The mapping receives, deletes and returns messages: the grant adds
	// exactly sqs:ReceiveMessage, ChangeMessageVisibility, GetQueueUrl,
	// DeleteMessage and GetQueueAttributes on the feedback queue.
	n.Feedback.AddEventSource(awslambdaeventsources.NewSqsEventSource(n.FeedbackQueue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize: num(feedbackBatchSize), MaxBatchingWindow: secs(feedbackBatchingWindow.Seconds()),
		ReportBatchItemFailures: jsii.Bool(true), MaxConcurrency: num(feedbackMaxConcurrency),
	}))

	awscdk.NewCfnOutput(stack, str("FeedbackQueueUrl"), &awscdk.CfnOutputProps{Value: n.FeedbackQueue.QueueUrl()})
	awscdk.NewCfnOutput(stack, str("FeedbackDeadLetterQueueUrl"), &awscdk.CfnOutputProps{Value: n.FeedbackDLQ.QueueUrl()})
}

// feedbackAlarms are the feedback path's alarms: a message in its DLQ, the
// function's errors, events it could not read, the rule failing to deliver,
// and e-mails sent with no event recorded.
func (n *NudgeStack) feedbackAlarms(s deployment.Stage, add alarmFunc) {
	minute := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(num(1)), Statistic: str("Maximum")}
	sum := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(num(1)), Statistic: str("Sum")}
	notBreaching := awscloudwatch.TreatMissingData_NOT_BREACHING
	add("feedback-dlq-not-empty", fmt.Sprintf("SES events failed to be recorded %d times and wait in the feedback DLQ: "+
		"their deliveries lack that feedback until they are moved back to the feedback queue.", feedbackMaxReceiveCount),
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{Expression: str("FILL(v, 0) + FILL(h, 0)"), Label: str("Feedback DLQ messages"),
			UsingMetrics: &map[string]awscloudwatch.IMetric{"v": n.FeedbackDLQ.MetricApproximateNumberOfMessagesVisible(minute),
				"h": n.FeedbackDLQ.MetricApproximateNumberOfMessagesNotVisible(minute)},
			Period: awscdk.Duration_Minutes(num(1))}),
		0, 1, 0, notBreaching)
	// A failed invocation's batch comes back after the visibility timeout
	// (3 minutes by default): a function that keeps failing errs in 2 of
	// any 5 minutes, one crash retried once does not.
	add("feedback-errors", "The feedback function failed invocations (a crash, a timeout, a failed start): "+
		"their SES events return to the queue and wait, and reach the feedback DLQ after 5 receives.",
		n.Feedback.MetricErrors(sum), 0, 5, 2, notBreaching)
	// The feedback mark: written by the feedback function, read by the
	// consumer before it sends an ambiguous e-mail again. Either failing
	// leaves such e-mails waiting, and then to review after the longest
	// wait.
	markUnread := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: str("Nudge"), MetricName: str(consumer.MetricFeedbackMarkUnread),
		DimensionsMap: &map[string]*string{"Function": str("consumer"), "Provider": str(ses.Name)}, Statistic: str("Sum"), Period: awscdk.Duration_Minutes(num(1))})
	add("feedback-mark-failed", "The feedback mark could not be written (the feedback function) or read (the consumer) in 3 of 5 minutes: "+
		"e-mails whose send may have gone out are not sent again, and go to review after the longest wait ("+ses.SettingRecordMaxWait+").",
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{Expression: str("FILL(w, 0) + FILL(r, 0)"), Label: str("Feedback mark failures"),
			UsingMetrics: &map[string]awscloudwatch.IMetric{"w": nudgeMetric("feedback", feedback.MetricMarkFailed, "Sum"), "r": markUnread},
			Period:       awscdk.Duration_Minutes(num(1))}),
		0, 5, 3, notBreaching)
	// A probe goes out at most once a window (15 min by default): two
	// failed in an hour is no passing fault.
	probeFailed := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: str("Nudge"), MetricName: str(consumer.MetricProbe),
		DimensionsMap: &map[string]*string{"Function": str("consumer"), "Provider": str(ses.Name), "Outcome": str("failed")}, Statistic: str("Sum"),
		Period: awscdk.Duration_Hours(num(1))})
	add("feedback-probe-failed", "The consumer's probes to SES's mailbox simulator failed twice in an hour: on a quiet stage, "+
		"e-mails whose send may have gone out are not sent again, and go to review after the longest wait ("+ses.SettingRecordMaxWait+").",
		probeFailed, 1, 1, 1, notBreaching)
	add("feedback-undecodable", "The feedback function acknowledged SES events it could not read: "+
		"their feedback was not recorded and no retry will record it.",
		nudgeMetric("feedback", feedback.MetricUndecodable, "Sum"), 0, 1, 0, notBreaching)
	add("feedback-rule-failed", "EventBridge could not deliver SES events to the feedback queue (after its retries, or refused outright): "+
		"those it could not deliver wait in the feedback DLQ (redrive them to the feedback queue); the e-mail events log group has a line of each.",
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: str("AWS/Events"), MetricName: str("FailedInvocations"),
			DimensionsMap: &map[string]*string{"RuleName": str(feedbackRuleName(s))}, Statistic: str("Sum"), Period: awscdk.Duration_Minutes(num(1))}),
		0, 1, 0, notBreaching)
	add("feedback-stopped", fmt.Sprintf("E-mails were sent in the last %v and the feedback function heard of no SES event in that time: "+
		"SES's events are not coming back (the configuration set's event destination, the rule, the queue, the function).", feedbackStoppedWindow),
		n.feedbackStopped(), 0, 1, 0, notBreaching)
}

// feedbackStopped is 1 for a window of feedbackStoppedWindow in which the
// consumer sent e-mails (Sent by Channel=email) and the feedback function
// heard of none (no event FeedbackRecorded, FeedbackRedundant — a Send
// event of an e-mail already recorded sent, which is not written — or
// FeedbackSettled), else 0; no value where neither happened. Each term is
// FILLed: the one missing is the news.
func (n *NudgeStack) feedbackStopped() awscloudwatch.IMetric {
	window := awscdk.Duration_Seconds(num(feedbackStoppedWindow.Seconds()))
	sent := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: str("Nudge"), MetricName: str(consumer.MetricSent),
		DimensionsMap: &map[string]*string{"Function": str("consumer"), "Channel": str("email")}, Statistic: str("Sum"), Period: window})
	heard := map[string]awscloudwatch.IMetric{"sent": sent}
	for id, name := range map[string]string{"recorded": feedback.MetricRecorded, "redundant": feedback.MetricRedundant, "settled": feedback.MetricSettled} {
		heard[id] = awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: str("Nudge"), MetricName: str(name),
			DimensionsMap: &map[string]*string{"Function": str("feedback")}, Statistic: str("Sum"), Period: window})
	}
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: str("IF(FILL(sent, 0) > 0 AND FILL(recorded, 0) + FILL(redundant, 0) + FILL(settled, 0) == 0, 1, 0)"),
		Label:      str("E-mails sent, no SES event heard of"), UsingMetrics: &heard, Period: window,
	})
}

// feedbackWidget graphs what became of SES's events, beside the e-mails
// sent.
func (n *NudgeStack) feedbackWidget() awscloudwatch.IWidget {
	var left []awscloudwatch.IMetric
	for _, name := range []string{feedback.MetricRecorded, feedback.MetricRedundant, feedback.MetricSettled, feedback.MetricRepeated,
		feedback.MetricUnmatched, feedback.MetricIgnored, feedback.MetricUndecodable, feedback.MetricRetried} {
		left = append(left, nudgeMetric("feedback", name, "Sum"))
	}
	sent := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: str("Nudge"), MetricName: str(consumer.MetricSent),
		DimensionsMap: &map[string]*string{"Function": str("consumer"), "Channel": str("email")}, Statistic: str("Sum"),
		Period: awscdk.Duration_Minutes(num(1)), Label: str("E-mails sent")})
	return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: str("SES feedback"), Width: num(8),
		Left: &left, Right: &[]awscloudwatch.IMetric{sent}})
}
