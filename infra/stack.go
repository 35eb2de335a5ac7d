package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdadestinations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsschedulertargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/nudgehq/nudge/pkg/consumer"
	"github.com/nudgehq/nudge/pkg/deployment"
	"github.com/nudgehq/nudge/pkg/enqueue"
	"github.com/nudgehq/nudge/pkg/ledger"
)

// NudgeStackProps configures a NudgeStack.
type NudgeStackProps struct {
	awscdk.StackProps
	// Stage is the deployment's settings. Required; validated.
	Stage deployment.Stage
	// BuildDir holds <fn>/bootstrap for each function (make build).
	BuildDir string
	// Nag applies the cdk-nag AwsSolutions checks.
	Nag bool
}

// NudgeStack is the whole of Nudge in one stack.
type NudgeStack struct {
	awscdk.Stack
	Table             awsdynamodb.Table
	WorkQueue, DLQ    awssqs.Queue
	SchedulerDLQ      awssqs.Queue
	Consumer, Enqueue awslambda.Function
	// Operator is the managed policy for the people who run the nudge
	// operator commands (docs/operations.md#operator-permissions).
	Operator   awsiam.ManagedPolicy
	AlarmTopic awssns.Topic
	Alarms     []awscloudwatch.Alarm
}

func str(s string) *string           { return jsii.String(s) }
func num(n float64) *float64         { return jsii.Number(n) }
func secs(n float64) awscdk.Duration { return awscdk.Duration_Seconds(num(n)) }

// NewNudgeStack defines the stack.
func NewNudgeStack(scope constructs.Construct, id string, props *NudgeStackProps) *NudgeStack {
	s := props.Stage
	if err := s.Validate(); err != nil {
		panic(err)
	}
	stack := awscdk.NewStack(scope, str(id), &props.StackProps)
	n := &NudgeStack{Stack: stack}
	awscdk.Tags_Of(stack).Add(str("project"), str("nudge"), nil)
	awscdk.Tags_Of(stack).Add(str("stage"), str(s.Name), nil)
	removal := awscdk.RemovalPolicy_DESTROY
	if s.RetainData {
		removal = awscdk.RemovalPolicy_RETAIN
	}

	// Parameters: the provider, set at deploy time.
	webhookURL := awscdk.NewCfnParameter(stack, str("WebhookUrl"), &awscdk.CfnParameterProps{
		Type: str("String"), AllowedPattern: str("^https://.+"),
		Description: str("The webhook provider's HTTPS endpoint"),
	})
	secretID := awscdk.NewCfnParameter(stack, str("WebhookSigningRef"), &awscdk.CfnParameterProps{
		Type: str("String"), MinLength: num(1),
		Description: str("Name or ARN of the Secrets Manager secret holding the webhook signing secret (plain text)"),
	})

	n.Table = newTable(stack, s, removal)

	// Queues. Fixed names, so that the DLQ's RedriveAllowPolicy can name
	// the work queue's ARN without referencing it (a cycle).
	n.DLQ = awssqs.NewQueue(stack, str("DeadLetterQueue"), &awssqs.QueueProps{
		QueueName: str(s.DLQName()), Encryption: awssqs.QueueEncryption_SQS_MANAGED, EnforceSSL: jsii.Bool(true),
		RetentionPeriod: secs(deployment.DLQRetention.Seconds()), RemovalPolicy: removal,
	})
	workARN := stack.FormatArn(&awscdk.ArnComponents{Service: str("sqs"), Resource: str(s.WorkQueueName())})
	n.DLQ.Node().DefaultChild().(awssqs.CfnQueue).SetRedriveAllowPolicy(map[string]any{
		"redrivePermission": "byQueue", "sourceQueueArns": []*string{workARN},
	})
	n.WorkQueue = awssqs.NewQueue(stack, str("WorkQueue"), &awssqs.QueueProps{
		QueueName: str(s.WorkQueueName()), Encryption: awssqs.QueueEncryption_SQS_MANAGED, EnforceSSL: jsii.Bool(true),
		VisibilityTimeout: secs(s.Visibility().Seconds()), RetentionPeriod: secs(deployment.WorkRetention.Seconds()),
		DeadLetterQueue: &awssqs.DeadLetterQueue{Queue: n.DLQ, MaxReceiveCount: num(float64(s.MaxReceiveCount))},
		RemovalPolicy:   removal,
	})

	res := deployment.Resources{
		Table: *n.Table.TableName(), WorkQueueURL: *n.WorkQueue.QueueUrl(), DLQURL: *n.DLQ.QueueUrl(),
		WebhookURL: *webhookURL.ValueAsString(), WebhookSecretID: *secretID.ValueAsString(),
	}
	n.Consumer = newFunction(stack, "Consumer", props.BuildDir, "consumer", s.ConsumerMemoryMB, s.ConsumerTimeout.Seconds(), s.ConsumerEnv(res), s, removal)
	n.Enqueue = newFunction(stack, "Enqueue", props.BuildDir, "enqueue", s.EnqueueMemoryMB, s.EnqueueTimeout.Seconds(), s.EnqueueEnv(res), s, removal)

	// Least privilege: only the actions each function calls, on its own
	// resources (docs/infrastructure.md lists them).
	indexARN := awscdk.Fn_Join(str(""), &[]*string{n.Table.TableArn(), str("/index/" + ledger.IndexName)})
	n.Consumer.AddToRolePolicy(allow([]string{"dynamodb:UpdateItem"}, n.Table.TableArn()))
	n.Consumer.AddToRolePolicy(allow([]string{"sqs:SendMessage"}, n.WorkQueue.QueueArn(), n.DLQ.QueueArn()))
	n.Consumer.AddToRolePolicy(allow([]string{"secretsmanager:GetSecretValue"}, secretARN(stack, secretID)))
	n.Enqueue.AddToRolePolicy(allow([]string{"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:BatchGetItem"}, n.Table.TableArn()))
	n.Enqueue.AddToRolePolicy(allow([]string{"dynamodb:Query"}, indexARN))
	n.Enqueue.AddToRolePolicy(allow([]string{"sqs:SendMessage"}, n.WorkQueue.QueueArn()))
	// The event source mapping receives, deletes and (with the processor's
	// retry delays and the heartbeat) changes visibility; the grant adds
	// exactly sqs:ReceiveMessage, ChangeMessageVisibility, GetQueueUrl,
	// DeleteMessage and GetQueueAttributes on the work queue.
	n.Consumer.AddEventSource(awslambdaeventsources.NewSqsEventSource(n.WorkQueue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize: num(float64(s.BatchSize)), MaxBatchingWindow: secs(s.BatchingWindow.Seconds()),
		ReportBatchItemFailures: jsii.Bool(true), MaxConcurrency: num(float64(s.MaxConcurrency)),
	}))

	// The schedule: every minute. Scheduler invokes the enqueue
	// asynchronously, so its retries and DLQ cover only a tick it could not
	// hand to Lambda (throttled or refused Invoke calls); a run that fails
	// is Lambda's to retry. A tick is worth nothing once the next has come
	// (every run works from the cursors), so Lambda does not retry a failed
	// run and drops an event older than a tick, sending both to the same
	// queue as Scheduler's dead letters: one queue of lost ticks, one alarm.
	n.SchedulerDLQ = awssqs.NewQueue(stack, str("ScheduleDeadLetterQueue"), &awssqs.QueueProps{
		QueueName: str("nudge-" + s.Name + "-schedule-dlq"), Encryption: awssqs.QueueEncryption_SQS_MANAGED, EnforceSSL: jsii.Bool(true),
		RetentionPeriod: secs(deployment.DLQRetention.Seconds()), RemovalPolicy: removal,
	})
	n.Enqueue.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		MaxEventAge:   secs(deployment.TickMaxEventAge.Seconds()),
		RetryAttempts: num(deployment.TickRetryAttempts),
		OnFailure:     awslambdadestinations.NewSqsDestination(n.SchedulerDLQ),
	})
	awsscheduler.NewSchedule(stack, str("Tick"), &awsscheduler.ScheduleProps{
		Description: str("Nudge enqueue tick"),
		Schedule:    awsscheduler.ScheduleExpression_Rate(secs(deployment.TickPeriod.Seconds())),
		Target: awsschedulertargets.NewLambdaInvoke(n.Enqueue, &awsschedulertargets.ScheduleTargetBaseProps{
			DeadLetterQueue: n.SchedulerDLQ, RetryAttempts: num(2), MaxEventAge: secs(deployment.TickMaxEventAge.Seconds()),
			Input: awsscheduler.ScheduleTargetInput_FromObject(map[string]any{
				"source": "aws.scheduler", "scheduledTime": awsscheduler.ContextAttribute_ScheduledTime(),
				"executionId": awsscheduler.ContextAttribute_ExecutionId(),
			}),
		}),
	})

	n.Operator = operatorPolicy(stack, n, s)
	n.alarms(s)
	n.dashboard(s)

	for name, v := range map[string]*string{
		"LedgerTable": n.Table.TableName(), "WorkQueueUrl": n.WorkQueue.QueueUrl(), "DeadLetterQueueUrl": n.DLQ.QueueUrl(),
		"ConsumerFunction": n.Consumer.FunctionName(), "EnqueueFunction": n.Enqueue.FunctionName(), "AlarmTopic": n.AlarmTopic.TopicArn(),
		"OperatorPolicyArn": n.Operator.ManagedPolicyArn(),
	} {
		awscdk.NewCfnOutput(stack, str(name), &awscdk.CfnOutputProps{Value: v})
	}
	if props.Nag {
		applyNag(n)
	}
	return n
}

// newTable defines the ledger table from ledger.TableInput, the definition
// the local stand-ins are created with.
func newTable(stack awscdk.Stack, s deployment.Stage, removal awscdk.RemovalPolicy) awsdynamodb.Table {
	def := ledger.TableInput(s.TableName())
	types := map[string]awsdynamodb.AttributeType{}
	for _, a := range def.AttributeDefinitions {
		if a.AttributeType != ddbtypes.ScalarAttributeTypeS {
			panic(fmt.Sprintf("ledger attribute %s is not a string", *a.AttributeName))
		}
		types[*a.AttributeName] = awsdynamodb.AttributeType_STRING
	}
	key := func(ks []ddbtypes.KeySchemaElement, kind ddbtypes.KeyType) *awsdynamodb.Attribute {
		for _, k := range ks {
			if k.KeyType == kind {
				return &awsdynamodb.Attribute{Name: k.AttributeName, Type: types[*k.AttributeName]}
			}
		}
		return nil
	}
	t := awsdynamodb.NewTable(stack, str("Ledger"), &awsdynamodb.TableProps{
		TableName:    def.TableName,
		PartitionKey: key(def.KeySchema, ddbtypes.KeyTypeHash), SortKey: key(def.KeySchema, ddbtypes.KeyTypeRange),
		BillingMode:                      awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: jsii.Bool(true)},
		TimeToLiveAttribute:              str(ledger.TTLAttribute),
		Encryption:                       awsdynamodb.TableEncryption_AWS_MANAGED, // KMS (aws/dynamodb): Control Tower CT.DYNAMODB.PR.2
		DeletionProtection:               jsii.Bool(s.RetainData),
		RemovalPolicy:                    removal,
	})
	for _, g := range def.GlobalSecondaryIndexes {
		var include []*string
		for _, a := range g.Projection.NonKeyAttributes {
			include = append(include, str(a))
		}
		t.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:    g.IndexName,
			PartitionKey: key(g.KeySchema, ddbtypes.KeyTypeHash), SortKey: key(g.KeySchema, ddbtypes.KeyTypeRange),
			ProjectionType: awsdynamodb.ProjectionType_INCLUDE, NonKeyAttributes: &include,
		})
	}
	return t
}

// newFunction defines one Go function on provided.al2023/arm64 from
// BuildDir/<dir>/bootstrap, with a JSON-format log group of its own and a
// role that may write to that log group and nothing else yet.
func newFunction(stack awscdk.Stack, id, buildDir, dir string, memoryMB int, timeout float64, env map[string]string, s deployment.Stage, removal awscdk.RemovalPolicy) awslambda.Function {
	bootstrap := filepath.Join(buildDir, dir, "bootstrap")
	if _, err := os.Stat(bootstrap); err != nil {
		panic(fmt.Sprintf("%s is missing: run `make build` first (it builds the linux/arm64 bootstraps)", bootstrap))
	}
	logs := awslogs.NewLogGroup(stack, str(id+"Logs"), &awslogs.LogGroupProps{
		LogGroupName:  str("/aws/lambda/nudge-" + s.Name + "-" + dir),
		Retention:     retention(s.LogRetentionDays),
		RemovalPolicy: removal,
	})
	role := awsiam.NewRole(stack, str(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(str("lambda.amazonaws.com"), nil),
		Description: str("Nudge " + dir + " function"),
	})
	role.AddToPolicy(allow([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, logs.LogGroupArn()))
	environment := map[string]*string{}
	for k, v := range env {
		environment[k] = str(v)
	}
	return awslambda.NewFunction(stack, str(id), &awslambda.FunctionProps{
		FunctionName: str("nudge-" + s.Name + "-" + dir),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(), Architecture: awslambda.Architecture_ARM_64(),
		Handler: str("bootstrap"), Code: awslambda.Code_FromAsset(str(filepath.Join(buildDir, dir)), nil),
		MemorySize: num(float64(memoryMB)), Timeout: secs(timeout),
		Environment: &environment, LoggingFormat: awslambda.LoggingFormat_JSON, LogGroup: logs, Role: role,
		Description: str("Nudge " + dir),
	})
}

func retention(days int) awslogs.RetentionDays {
	switch {
	case days <= 7:
		return awslogs.RetentionDays_ONE_WEEK
	case days <= 14:
		return awslogs.RetentionDays_TWO_WEEKS
	case days <= 30:
		return awslogs.RetentionDays_ONE_MONTH
	case days <= 90:
		return awslogs.RetentionDays_THREE_MONTHS
	case days <= 365:
		return awslogs.RetentionDays_ONE_YEAR
	}
	return awslogs.RetentionDays_FIVE_YEARS
}

// operatorPolicy is what the nudge CLI needs to schedule, review, redrive
// and purge on this stage's resources, and nothing else: attach it to the
// operators' role or group.
func operatorPolicy(stack awscdk.Stack, n *NudgeStack, s deployment.Stage) awsiam.ManagedPolicy {
	return awsiam.NewManagedPolicy(stack, str("OperatorPolicy"), &awsiam.ManagedPolicyProps{
		ManagedPolicyName: str("nudge-" + s.Name + "-operator"),
		Description:       str("Nudge operator commands: schedule, import, cancel, status, reminder show/purge, dlq list/redrive"),
		Statements: &[]awsiam.PolicyStatement{
			allow([]string{"dynamodb:Scan", "dynamodb:Query", "dynamodb:GetItem", "dynamodb:BatchGetItem",
				"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"}, n.Table.TableArn()),
			allow([]string{"sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage",
				"sqs:StartMessageMoveTask", "sqs:ListMessageMoveTasks", "sqs:CancelMessageMoveTask"}, n.DLQ.QueueArn()),
			allow([]string{"sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:SendMessage"}, n.WorkQueue.QueueArn()),
		},
	})
}

func allow(actions []string, resources ...*string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{Actions: jsii.Strings(actions...), Resources: &resources})
}

// secretARN is the secret's ARN whether the parameter holds its ARN or its
// name (Secrets Manager adds a six-character suffix to a secret's name).
func secretARN(stack awscdk.Stack, p awscdk.CfnParameter) *string {
	isARN := awscdk.NewCfnCondition(stack, str("WebhookSecretIsArn"), &awscdk.CfnConditionProps{
		Expression: awscdk.Fn_ConditionEquals(awscdk.Fn_Select(num(0), awscdk.Fn_Split(str(":"), p.ValueAsString(), nil)), str("arn")),
	})
	byName := stack.FormatArn(&awscdk.ArnComponents{Service: str("secretsmanager"), Resource: str("secret"),
		ResourceName: awscdk.Fn_Join(str(""), &[]*string{p.ValueAsString(), str("-??????")}), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME})
	return awscdk.Token_AsString(awscdk.Fn_ConditionIf(isARN.LogicalId(), p.ValueAsString(), byName), nil)
}

// alarms: one SNS topic, every alarm acts on it.
func (n *NudgeStack) alarms(s deployment.Stage) {
	n.AlarmTopic = awssns.NewTopic(n.Stack, str("Alarms"), &awssns.TopicProps{DisplayName: str("Nudge " + s.Name + " alarms"), EnforceSSL: jsii.Bool(true)})
	if s.AlarmEmail != "" {
		n.AlarmTopic.AddSubscription(awssnssubscriptions.NewEmailSubscription(str(s.AlarmEmail), nil))
	}
	action := awscloudwatchactions.NewSnsAction(n.AlarmTopic)
	// add alarms when the metric is above threshold in datapoints of the
	// last periods minutes (all of them if datapoints is 0).
	add := func(id, description string, m awscloudwatch.IMetric, threshold float64, periods, datapoints float64, missing awscloudwatch.TreatMissingData) {
		if datapoints == 0 {
			datapoints = periods
		}
		a := awscloudwatch.NewAlarm(n.Stack, str(id), &awscloudwatch.AlarmProps{
			AlarmName: str("nudge-" + s.Name + "-" + id), AlarmDescription: str(description + " Runbook: docs/operations.md#" + id),
			Metric: m, Threshold: num(threshold), EvaluationPeriods: num(periods), DatapointsToAlarm: num(datapoints),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, TreatMissingData: missing,
		})
		a.AddAlarmAction(action)
		a.AddOkAction(action)
		n.Alarms = append(n.Alarms, a)
	}
	minute := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(num(1)), Statistic: str("Maximum")}
	sum := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(num(1)), Statistic: str("Sum")}
	notBreaching := awscloudwatch.TreatMissingData_NOT_BREACHING
	add("dlq-not-empty", "Messages are waiting in the DLQ: review them (nudge dlq list) and redrive.",
		n.DLQ.MetricApproximateNumberOfMessagesVisible(minute), 0, 1, 0, notBreaching)
	add("oldest-message-age", fmt.Sprintf("A work-queue message is older than %v: the consumer is not keeping up or is failing.", s.OldestMessageAlarm),
		n.WorkQueue.MetricApproximateAgeOfOldestMessage(minute), s.OldestMessageAlarm.Seconds(), 5, 0, notBreaching)
	add("overdue-pending", "Deliveries are overdue and not sent for three minutes: the quiet queue with a growing overdue set.",
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: str("Nudge"), MetricName: str(enqueue.MetricOverduePending),
			DimensionsMap: &map[string]*string{"Function": str("enqueue")}, Period: awscdk.Duration_Minutes(num(1)), Statistic: str("Maximum")}),
		0, 3, 0, awscloudwatch.TreatMissingData_BREACHING)
	add("consumer-errors", "The consumer function failed invocations.", n.Consumer.MetricErrors(sum), 0, 3, 0, notBreaching)
	add("consumer-throttles", "The consumer function was throttled.", n.Consumer.MetricThrottles(sum), 0, 3, 0, notBreaching)
	add("enqueue-errors", "The enqueue function failed runs: hand-offs wait.", n.Enqueue.MetricErrors(sum), 0, 3, 0, notBreaching)
	add("enqueue-throttles", "The enqueue function was throttled.", n.Enqueue.MetricThrottles(sum), 0, 3, 0, notBreaching)
	// A lost tick is harmless alone (the next one resumes from the
	// cursors) and leaves its record in the schedule DLQ; ticks lost in 3
	// of 5 minutes are an outage. Counting messages sent, not messages
	// waiting, the alarm clears by itself once ticks run again, and a
	// record nobody purged does not keep it on.
	add("ticks-lost", "Enqueue ticks are being lost (runs failing, ticks dropped after a minute, or Scheduler unable to invoke the enqueue): hand-offs wait. Their records are in the schedule DLQ.",
		n.SchedulerDLQ.MetricNumberOfMessagesSent(sum), 0, 5, 3, notBreaching)
}

// dashboard shows the Nudge metrics and the queue depths.
func (n *NudgeStack) dashboard(s deployment.Stage) {
	nudge := func(fn, name, stat string) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: str("Nudge"), MetricName: str(name),
			DimensionsMap: &map[string]*string{"Function": str(fn)}, Statistic: str(stat), Period: awscdk.Duration_Minutes(num(1))})
	}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: str(title), Left: &metrics, Width: num(8)})
	}
	minute := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(num(1))}
	d := awscloudwatch.NewDashboard(n.Stack, str("Dashboard"), &awscloudwatch.DashboardProps{DashboardName: str("nudge-" + s.Name)})
	d.AddWidgets(
		graph("Deliveries", nudge("consumer", consumer.MetricSent, "Sum"), nudge("consumer", consumer.MetricDuplicate, "Sum"),
			nudge("consumer", consumer.MetricRetried, "Sum"), nudge("consumer", consumer.MetricDeadLettered, "Sum"), nudge("consumer", consumer.MetricExpired, "Sum")),
		graph("Due → sent (s)", nudge("consumer", consumer.MetricDueToSent, "p50"), nudge("consumer", consumer.MetricDueToSent, "p99")),
		graph("Overdue", nudge("enqueue", enqueue.MetricOverduePending, "Maximum"), nudge("enqueue", enqueue.MetricOldestOverdue, "Maximum")),
	)
	d.AddWidgets(
		graph("Hand-off", nudge("enqueue", enqueue.MetricEnqueued, "Sum"), nudge("enqueue", enqueue.MetricRepaired, "Sum"),
			nudge("enqueue", enqueue.MetricPublishFailed, "Sum"), nudge("enqueue", enqueue.MetricLag, "Maximum")),
		graph("Queue depth", n.WorkQueue.MetricApproximateNumberOfMessagesVisible(minute), n.WorkQueue.MetricApproximateNumberOfMessagesNotVisible(minute),
			n.DLQ.MetricApproximateNumberOfMessagesVisible(minute)),
		graph("Functions", n.Consumer.MetricErrors(minute), n.Consumer.MetricThrottles(minute), n.Enqueue.MetricErrors(minute), n.Enqueue.MetricDuration(minute)),
	)
}
