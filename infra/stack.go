package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdadestinations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsschedulertargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsses"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/pkg/intake"
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
	// TemplatesDir holds the e-mail templates (one folder each) the stack
	// deploys to SES when the stage runs ses. Default: templates/email at
	// the repository's root.
	TemplatesDir string
	// Options are the stack's settings beyond the stage's (OptionsFromContext).
	Options Options
}

func (p *NudgeStackProps) templatesDir() string {
	if p.TemplatesDir != "" {
		return p.TemplatesDir
	}
	// The repository's root holds cdk.json; the app runs there, its tests
	// in infra/.
	for _, dir := range []string{".", ".."} {
		if _, err := os.Stat(filepath.Join(dir, "cdk.json")); err == nil {
			return filepath.Join(dir, "templates", "email")
		}
	}
	return filepath.Join("templates", "email")
}

// NudgeStack is the whole of Nudge in one stack.
type NudgeStack struct {
	awscdk.Stack
	Table          awsdynamodb.Table
	WorkQueue, DLQ awssqs.Queue
	// ProviderQueues are the providers' own work queues, by provider
	// (deployment.Stage.ProviderQueues), each with its own event source
	// mapping on the consumer.
	ProviderQueues    map[string]awssqs.Queue
	SchedulerDLQ      awssqs.Queue
	Consumer, Enqueue awslambda.Function
	// TableIndexes are the ledger table's global secondary indexes, by
	// name (ledger.TableInput's).
	TableIndexes []string
	// Intake is the HTTP intake function, IntakeURL its function URL
	// (AWS_IAM), and IntakeCallers the managed policy that lets a caller
	// invoke it through that URL and nothing else.
	Intake        awslambda.Function
	IntakeURL     awslambda.FunctionUrl
	IntakeCallers awsiam.ManagedPolicy
	// Operator is the managed policy for the people who run the nudge
	// operator commands (docs/operations.md#operator-permissions).
	Operator   awsiam.ManagedPolicy
	AlarmTopic awssns.ITopic
	Alarms     []awscloudwatch.Alarm
	// DeliveryTopic is the sns provider's topic, when the stage runs it.
	DeliveryTopic awssns.ITopic
	// EmailTemplates are the SES templates, when the stage runs ses, named
	// with TemplatePrefix.
	EmailTemplates []awsses.CfnTemplate
	TemplatePrefix string
	// EmailEvents is the log group of SES's sending events, one line per
	// event, when the stage runs ses.
	EmailEvents awslogs.LogGroup
	// Outcomes is the function that reads the ledger's stream and puts the
	// outcome events on EventBus (the stage's own bus, or the account's
	// default); OutcomesDLQ receives its mapping's on-failure records.
	Outcomes    awslambda.Function
	OutcomesDLQ awssqs.Queue
	EventBus    awsevents.IEventBus
	// OutcomeQueue and OutcomeRule are the example subscriber, with
	// Options.OutcomeQueue.
	OutcomeQueue awssqs.Queue
	OutcomeRule  awsevents.Rule
	// Feedback is the function that records SES's sending events on their
	// deliveries, when the stage runs ses: FeedbackRule sends the
	// configuration set's events from the default bus to FeedbackQueue,
	// whose dead letters go to FeedbackDLQ (feedback.go).
	Feedback                   awslambda.Function
	FeedbackQueue, FeedbackDLQ awssqs.Queue
	FeedbackRule               awsevents.Rule
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

	// Each provider the stage runs adds its part (provider_<name>.go), at
	// each step below.
	// In the registry's order, whatever the stage's: the template is the
	// same for the same providers.
	var parts []*providerParts
	var partOf []string
	for _, d := range registry.All() {
		if part, ok := providerStack[d.Name]; ok && s.Runs(d.Name) {
			parts, partOf = append(parts, part()), append(partOf, d.Name)
		}
	}
	for _, p := range parts {
		if p.params != nil {
			p.params(n, id)
		}
	}

	def := ledger.TableInput(s.TableName())
	n.Table = newTable(stack, def, s.RetainData, removal)
	for _, g := range def.GlobalSecondaryIndexes {
		n.TableIndexes = append(n.TableIndexes, *g.IndexName)
	}

	// Queues. Fixed names, so that the DLQ's RedriveAllowPolicy can name
	// the work queue's ARN without referencing it (a cycle).
	n.DLQ = awssqs.NewQueue(stack, str("DeadLetterQueue"), &awssqs.QueueProps{
		QueueName: str(s.DLQName()), Encryption: awssqs.QueueEncryption_SQS_MANAGED, EnforceSSL: jsii.Bool(true),
		RetentionPeriod: secs(deployment.DLQRetention.Seconds()), RemovalPolicy: removal,
	})
	// Every work queue may be redriven to: the default, and each
	// provider's own.
	var workARNs []*string
	for _, name := range s.WorkQueueNames() {
		workARNs = append(workARNs, stack.FormatArn(&awscdk.ArnComponents{Service: str("sqs"), Resource: str(name)}))
	}
	n.DLQ.Node().DefaultChild().(awssqs.CfnQueue).SetRedriveAllowPolicy(map[string]any{
		"redrivePermission": "byQueue", "sourceQueueArns": workARNs,
	})
	workQueue := func(id, name string) awssqs.Queue {
		return awssqs.NewQueue(stack, str(id), &awssqs.QueueProps{
			QueueName: str(name), Encryption: awssqs.QueueEncryption_SQS_MANAGED, EnforceSSL: jsii.Bool(true),
			VisibilityTimeout: secs(s.Visibility().Seconds()), RetentionPeriod: secs(deployment.WorkRetention.Seconds()),
			DeadLetterQueue: &awssqs.DeadLetterQueue{Queue: n.DLQ, MaxReceiveCount: num(float64(s.MaxReceiveCount))},
			RemovalPolicy:   removal,
		})
	}
	// The default work queue keeps its id and name: a deploy that adds a
	// paced queue must not replace the queue holding messages in flight.
	n.WorkQueue = workQueue("WorkQueue", s.WorkQueueName())
	n.ProviderQueues = map[string]awssqs.Queue{}
	for _, q := range s.ProviderQueues() {
		n.ProviderQueues[q.Provider] = workQueue(pacedID("WorkQueue", q.Provider), q.Name)
	}

	res := deployment.Resources{Table: *n.Table.TableName(), WorkQueueURL: *n.WorkQueue.QueueUrl(), DLQURL: *n.DLQ.QueueUrl(),
		ProviderQueueURLs: map[string]string{}}
	for p, q := range n.ProviderQueues {
		res.ProviderQueueURLs[p] = *q.QueueUrl()
	}
	res.Providers = map[string]map[string]string{}
	for i, p := range parts {
		if p.resources != nil {
			res.Providers[partOf[i]] = p.resources(n, s, props)
		}
	}
	n.Consumer = newFunction(stack, "Consumer", props.BuildDir, "consumer", s.ConsumerMemoryMB, s.ConsumerTimeout.Seconds(), 0, s.ConsumerEnv(res), s, removal)
	n.Enqueue = newFunction(stack, "Enqueue", props.BuildDir, "enqueue", s.EnqueueMemoryMB, s.EnqueueTimeout.Seconds(), s.EnqueueReservedConcurrency, s.EnqueueEnv(res), s, removal)
	n.intake(s, props.BuildDir, res, removal)
	reports := false
	for _, p := range parts {
		reports = reports || p.reports
	}
	n.outcomes(s, props, def, removal, reports)

	// Least privilege: only the actions each function calls, on its own
	// resources (docs/infrastructure.md lists them).
	indexARN := n.indexARN(ledger.IndexName)
	n.Consumer.AddToRolePolicy(allow([]string{"dynamodb:UpdateItem"}, n.Table.TableArn()))
	n.Consumer.AddToRolePolicy(allow([]string{"sqs:SendMessage"}, append(n.WorkQueueArns(), n.DLQ.QueueArn())...))
	for _, p := range parts {
		if p.grants != nil {
			p.grants(n, s)
		}
	}
	n.Enqueue.AddToRolePolicy(allow([]string{"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:BatchGetItem"}, n.Table.TableArn()))
	n.Enqueue.AddToRolePolicy(allow([]string{"dynamodb:Query"}, indexARN))
	// A series' extension (schedule.Store.Extend) reads the series' partition
	// and creates its occurrences: reminder and delivery items, in
	// reminders' partitions alone, each reminder item in a transaction with
	// the check of the series' start (ConditionCheckItem).
	n.Enqueue.AddToRolePolicy(reminderWrites([]string{"dynamodb:Query", "dynamodb:PutItem", "dynamodb:ConditionCheckItem"}, n.Table.TableArn()))
	n.Enqueue.AddToRolePolicy(allow([]string{"sqs:SendMessage"}, n.WorkQueueArns()...))
	// The depth of each provider's own queue, before its repairs
	// (enqueue.Config.Depths): a delivery behind a backlog is not lost.
	if len(n.ProviderQueues) > 0 {
		var own []*string
		for _, p := range slices.Sorted(maps.Keys(n.ProviderQueues)) {
			own = append(own, n.ProviderQueues[p].QueueArn())
		}
		n.Enqueue.AddToRolePolicy(allow([]string{"sqs:GetQueueAttributes"}, own...))
	}
	// The event source mapping receives, deletes and (with the processor's
	// retry delays and the heartbeat) changes visibility; the grant adds
	// exactly sqs:ReceiveMessage, ChangeMessageVisibility, GetQueueUrl,
	// DeleteMessage and GetQueueAttributes on the work queue.
	n.Consumer.AddEventSource(awslambdaeventsources.NewSqsEventSource(n.WorkQueue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize: num(float64(s.BatchSize)), MaxBatchingWindow: secs(s.BatchingWindow.Seconds()),
		ReportBatchItemFailures: jsii.Bool(true), MaxConcurrency: num(float64(s.MaxConcurrency)),
	}))
	// Each provider's own queue: a paced one's mapping has instances that
	// share its rate, with a batch one instance sends in an invocation at
	// its share; an unpaced one's has the default's batch and concurrency
	// (deployment.ProviderQueue).
	for _, q := range s.ProviderQueues() {
		n.Consumer.AddEventSource(awslambdaeventsources.NewSqsEventSource(n.ProviderQueues[q.Provider], &awslambdaeventsources.SqsEventSourceProps{
			BatchSize: num(float64(q.BatchSize)), MaxBatchingWindow: secs(s.BatchingWindow.Seconds()),
			ReportBatchItemFailures: jsii.Bool(true), MaxConcurrency: num(float64(q.MaxConcurrency)),
		}))
	}

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
	for _, p := range parts {
		if p.operated != nil {
			p.operated(n, s)
		}
	}
	n.alarms(s, parts)
	n.dashboard(s)

	for name, v := range map[string]*string{
		"LedgerTable": n.Table.TableName(), "WorkQueueUrl": n.WorkQueue.QueueUrl(), "DeadLetterQueueUrl": n.DLQ.QueueUrl(),
		"ConsumerFunction": n.Consumer.FunctionName(), "EnqueueFunction": n.Enqueue.FunctionName(), "AlarmTopic": n.AlarmTopic.TopicArn(),
		"OperatorPolicyArn": n.Operator.ManagedPolicyArn(),
		"IntakeFunction":    n.Intake.FunctionName(), "IntakeUrl": n.IntakeURL.Url(), "IntakeCallerPolicyArn": n.IntakeCallers.ManagedPolicyArn(),
		"OutcomesFunction": n.Outcomes.FunctionName(), "OutcomeEventBusArn": n.EventBus.EventBusArn(), "OutcomesDeadLetterQueueUrl": n.OutcomesDLQ.QueueUrl(),
	} {
		awscdk.NewCfnOutput(stack, str(name), &awscdk.CfnOutputProps{Value: v})
	}
	// The providers' own queues: each URL, and together as the CLI's
	// NUDGE_PROVIDER_QUEUES.
	var pairs []*string
	for _, q := range s.ProviderQueues() {
		url := n.ProviderQueues[q.Provider].QueueUrl()
		awscdk.NewCfnOutput(stack, str(pacedID("WorkQueueUrl", q.Provider)), &awscdk.CfnOutputProps{Value: url})
		pairs = append(pairs, awscdk.Fn_Join(str(""), &[]*string{str(q.Provider + "="), url}))
	}
	if len(pairs) > 0 {
		awscdk.NewCfnOutput(stack, str("ProviderQueues"), &awscdk.CfnOutputProps{Value: awscdk.Fn_Join(str(","), &pairs),
			Description: str("the providers' own work queues, as NUDGE_PROVIDER_QUEUES")})
	}
	if props.Nag {
		applyNag(n)
	}
	return n
}

// newTable defines the ledger table from def, ledger.TableInput: the
// definition the local stand-ins are created with. Every global secondary
// index of def becomes one of the table's, with its keys and projection,
// and def's stream, if it has one, the table's, with its view type.
func newTable(stack awscdk.Stack, def *dynamodb.CreateTableInput, retain bool, removal awscdk.RemovalPolicy) awsdynamodb.Table {
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
		Stream:       streamView(def),
		PartitionKey: key(def.KeySchema, ddbtypes.KeyTypeHash), SortKey: key(def.KeySchema, ddbtypes.KeyTypeRange),
		BillingMode:                      awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: jsii.Bool(true)},
		TimeToLiveAttribute:              str(ledger.TTLAttribute),
		Encryption:                       awsdynamodb.TableEncryption_AWS_MANAGED, // KMS (aws/dynamodb): Control Tower CT.DYNAMODB.PR.2
		DeletionProtection:               jsii.Bool(retain),
		RemovalPolicy:                    removal,
	})
	for _, g := range def.GlobalSecondaryIndexes {
		index := &awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:    g.IndexName,
			PartitionKey: key(g.KeySchema, ddbtypes.KeyTypeHash), SortKey: key(g.KeySchema, ddbtypes.KeyTypeRange),
		}
		if index.PartitionKey == nil {
			panic(fmt.Sprintf("ledger index %s has no partition key", *g.IndexName))
		}
		// DynamoDB's default projection, when none is given, is keys only;
		// CDK's is ALL: say it always.
		projection := ddbtypes.ProjectionTypeKeysOnly
		if g.Projection != nil && g.Projection.ProjectionType != "" {
			projection = g.Projection.ProjectionType
		}
		var nonKey []string
		if g.Projection != nil {
			nonKey = g.Projection.NonKeyAttributes
		}
		switch projection {
		case ddbtypes.ProjectionTypeAll:
			index.ProjectionType = awsdynamodb.ProjectionType_ALL
		case ddbtypes.ProjectionTypeKeysOnly:
			index.ProjectionType = awsdynamodb.ProjectionType_KEYS_ONLY
		case ddbtypes.ProjectionTypeInclude:
			if len(nonKey) == 0 {
				panic(fmt.Sprintf("ledger index %s projects INCLUDE without attributes", *g.IndexName))
			}
			index.ProjectionType = awsdynamodb.ProjectionType_INCLUDE
			index.NonKeyAttributes = jsii.Strings(nonKey...)
		default:
			panic(fmt.Sprintf("ledger index %s has projection %q, which the stack does not know", *g.IndexName, projection))
		}
		if projection != ddbtypes.ProjectionTypeInclude && len(nonKey) > 0 {
			panic(fmt.Sprintf("ledger index %s projects %s but names attributes %v: only INCLUDE takes them", *g.IndexName, projection, nonKey))
		}
		t.AddGlobalSecondaryIndex(index)
	}
	return t
}

// streamView is the view type of def's stream, or "" (no stream) when def
// has none or disables it. A view type CDK does not know stops the
// synthesis: the outcomes function's filter reads new images.
func streamView(def *dynamodb.CreateTableInput) awsdynamodb.StreamViewType {
	spec := def.StreamSpecification
	if spec == nil || spec.StreamEnabled == nil || !*spec.StreamEnabled {
		return ""
	}
	switch spec.StreamViewType {
	case ddbtypes.StreamViewTypeNewAndOldImages:
		return awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES
	case ddbtypes.StreamViewTypeNewImage:
		return awsdynamodb.StreamViewType_NEW_IMAGE
	case ddbtypes.StreamViewTypeOldImage:
		return awsdynamodb.StreamViewType_OLD_IMAGE
	case ddbtypes.StreamViewTypeKeysOnly:
		return awsdynamodb.StreamViewType_KEYS_ONLY
	}
	panic(fmt.Sprintf("ledger table %s has a stream of view type %q, which the stack does not know (NEW_AND_OLD_IMAGES, NEW_IMAGE, OLD_IMAGE, KEYS_ONLY)",
		*def.TableName, spec.StreamViewType))
}

// indexARN is the ARN of one of the ledger table's indexes.
func (n *NudgeStack) indexARN(name string) *string {
	return awscdk.Fn_Join(str(""), &[]*string{n.Table.TableArn(), str("/index/" + name)})
}

// intake defines the HTTP intake: its function, a function URL that only
// SigV4-signed requests of principals allowed to invoke it reach (AWS_IAM),
// its least-privilege role on the ledger table, and the managed policy a
// caller is given. A function URL rather than API Gateway: callers are
// services with AWS credentials, and it costs nothing beyond Lambda
// (docs/infrastructure.md#the-http-intake says what API Gateway would add).
func (n *NudgeStack) intake(s deployment.Stage, buildDir string, res deployment.Resources, removal awscdk.RemovalPolicy) {
	n.Intake = newFunction(n.Stack, "Intake", buildDir, "intake", s.IntakeMemoryMB, s.IntakeTimeout.Seconds(), s.IntakeReservedConcurrency, s.IntakeEnv(res), s, removal)
	n.IntakeURL = n.Intake.AddFunctionUrl(&awslambda.FunctionUrlOptions{
		AuthType: awslambda.FunctionUrlAuthType_AWS_IAM, InvokeMode: awslambda.InvokeMode_BUFFERED,
	})
	// Create, read, reschedule, list and cancel reminders: reads anywhere
	// in the table (the shard registry, a shard's cursor for a reminder's
	// hand-off), conditional writes, in transactions too
	// (ConditionCheckItem), only in reminders' partitions (REM#…: the
	// reminder item and its deliveries), never the enqueue's cursors
	// (CURSOR#…) or the shard registry (NUDGE), whose count the intake
	// reads; never a scan or a delete; Query on each index (the due index,
	// and the account index that lists an account's reminders).
	n.Intake.AddToRolePolicy(allow([]string{"dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem"}, n.Table.TableArn()))
	n.Intake.AddToRolePolicy(reminderWrites([]string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"}, n.Table.TableArn()))
	var indexes []*string
	for _, name := range n.TableIndexes {
		indexes = append(indexes, n.indexARN(name))
	}
	if len(indexes) > 0 {
		n.Intake.AddToRolePolicy(allow([]string{"dynamodb:Query"}, indexes...))
	}
	// The short-notice hand-off: a delivery due within the lookahead is
	// published to its provider's work queue at once, after its write.
	n.Intake.AddToRolePolicy(allow([]string{"sqs:SendMessage"}, n.WorkQueueArns()...))
	// A caller may invoke the function through its URL, signed (AWS_IAM),
	// and not otherwise: since October 2025 a new function URL needs both
	// actions, lambda:InvokeFunction limited to calls through a URL.
	url := allow([]string{"lambda:InvokeFunctionUrl"}, n.Intake.FunctionArn())
	url.AddCondition(str("StringEquals"), map[string]any{"lambda:FunctionUrlAuthType": "AWS_IAM"})
	invoke := allow([]string{"lambda:InvokeFunction"}, n.Intake.FunctionArn())
	invoke.AddCondition(str("Bool"), map[string]any{"lambda:InvokedViaFunctionUrl": "true"})
	n.IntakeCallers = awsiam.NewManagedPolicy(n.Stack, str("IntakeCallerPolicy"), &awsiam.ManagedPolicyProps{
		ManagedPolicyName: str("nudge-" + s.Name + "-intake-callers"),
		Description:       str("Nudge " + s.Name + " HTTP intake: call its function URL (SigV4), nothing else"),
		Statements:        &[]awsiam.PolicyStatement{url, invoke},
	})
}

// newFunction defines one Go function on provided.al2023/arm64 from
// BuildDir/<dir>/bootstrap, with a JSON-format log group of its own and a
// role that may write to that log group and nothing else yet, and reserved
// instances if reserved is above 0.
func newFunction(stack awscdk.Stack, id, buildDir, dir string, memoryMB int, timeout float64, reserved int, env map[string]string, s deployment.Stage, removal awscdk.RemovalPolicy) awslambda.Function {
	bootstrap := filepath.Join(buildDir, dir, "bootstrap")
	if _, err := os.Stat(bootstrap); err != nil {
		panic(fmt.Sprintf("%s is missing: run cdk at the repository root (cdk.json builds it), or `make build`", bootstrap))
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
	props := &awslambda.FunctionProps{
		FunctionName: str("nudge-" + s.Name + "-" + dir),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(), Architecture: awslambda.Architecture_ARM_64(),
		Handler: str("bootstrap"), Code: awslambda.Code_FromAsset(str(filepath.Join(buildDir, dir)), nil),
		MemorySize: num(float64(memoryMB)), Timeout: secs(timeout),
		Environment: &environment, LoggingFormat: awslambda.LoggingFormat_JSON, LogGroup: logs, Role: role,
		Description: str("Nudge " + dir),
	}
	if reserved > 0 {
		props.ReservedConcurrentExecutions = num(float64(reserved))
	}
	return awslambda.NewFunction(stack, str(id), props)
}

// nudgeMetric is one of Nudge's own metrics (namespace Nudge) of a function.
func nudgeMetric(fn, name, stat string) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: str("Nudge"), MetricName: str(name),
		DimensionsMap: &map[string]*string{"Function": str(fn)}, Statistic: str(stat), Period: awscdk.Duration_Minutes(num(1))})
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
// operators' role or group. It reads the whole table (status, review, the
// shard registry), and writes only reminders' partitions (REM#…): never
// the enqueue's cursors or the shard registry.
func operatorPolicy(stack awscdk.Stack, n *NudgeStack, s deployment.Stage) awsiam.ManagedPolicy {
	indexARN := n.indexARN(ledger.IndexName)
	// A reschedule's transaction checks the deliveries it keeps
	// (ConditionCheckItem); the console lists an account's reminders from
	// the account index.
	writes := reminderWrites([]string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"}, n.Table.TableArn())
	return awsiam.NewManagedPolicy(stack, str("OperatorPolicy"), &awsiam.ManagedPolicyProps{
		ManagedPolicyName: str("nudge-" + s.Name + "-operator"),
		Description:       str("Nudge operator commands and console: schedule, import, cancel, reschedule, status, reminder show/purge, dlq list/redrive, ledger retain/revive"),
		Statements: &[]awsiam.PolicyStatement{
			allow([]string{"dynamodb:Scan", "dynamodb:Query", "dynamodb:GetItem", "dynamodb:BatchGetItem"}, n.Table.TableArn()),
			allow([]string{"dynamodb:Query"}, indexARN, n.indexARN(ledger.AccountIndexName)),
			writes,
			allow([]string{"sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage",
				"sqs:StartMessageMoveTask", "sqs:ListMessageMoveTasks"}, n.DLQ.QueueArn()),
			allow([]string{"sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:SendMessage"}, n.WorkQueueArns()...),
			// The CLI finds a stage's paced queues by name, each registered
			// provider's: a queue that does not exist answers so.
			allow([]string{"sqs:GetQueueUrl"}, pacedNames(stack, s)...),
		},
	})
}

// pacedNames are the ARNs of every registered provider's paced queue name
// in stage s, whether the stage paces it or not.
func pacedNames(stack awscdk.Stack, s deployment.Stage) []*string {
	var arns []*string
	for _, p := range registry.Names() {
		arns = append(arns, stack.FormatArn(&awscdk.ArnComponents{Service: str("sqs"), Resource: str(s.ProviderQueueName(p))}))
	}
	return arns
}

// WorkQueueArns are every work queue's ARN: the default's, then each paced
// provider's in the stage's order. The functions that publish a delivery's
// message (the enqueue, the consumer, the intake's hand-off) may send to
// each.
func (n *NudgeStack) WorkQueueArns() []*string {
	arns := []*string{n.WorkQueue.QueueArn()}
	for _, p := range slices.Sorted(maps.Keys(n.ProviderQueues)) {
		arns = append(arns, n.ProviderQueues[p].QueueArn())
	}
	return arns
}

// queueDepths are every work queue's visible and in-flight messages.
func (n *NudgeStack) queueDepths(opts *awscloudwatch.MetricOptions) []awscloudwatch.IMetric {
	out := []awscloudwatch.IMetric{n.WorkQueue.MetricApproximateNumberOfMessagesVisible(opts), n.WorkQueue.MetricApproximateNumberOfMessagesNotVisible(opts)}
	for _, p := range slices.Sorted(maps.Keys(n.ProviderQueues)) {
		q := n.ProviderQueues[p]
		out = append(out, q.MetricApproximateNumberOfMessagesVisible(opts), q.MetricApproximateNumberOfMessagesNotVisible(opts))
	}
	return out
}

// pacedID is a provider's own queue's construct id: prefix and the provider,
// capitalised ("WorkQueueSes").
func pacedID(prefix, provider string) string {
	return prefix + strings.ToUpper(provider[:1]) + provider[1:]
}

// reminderWrites allows actions on items of reminders' partitions only
// (PK REM#…, ledger.PartitionKey: a reminder item and its delivery items
// share it), and on no item of another partition: not the enqueue's
// cursors (CURSOR#…) nor the shard registry (NUDGE). The Null condition
// refuses a request that names no key, which ForAllValues alone would let
// through.
func reminderWrites(actions []string, table *string) awsiam.PolicyStatement {
	st := allow(actions, table)
	st.AddCondition(str("ForAllValues:StringLike"), map[string]any{"dynamodb:LeadingKeys": []string{ledger.PartitionKey("*")}})
	st.AddCondition(str("Null"), map[string]any{"dynamodb:LeadingKeys": "false"})
	return st
}

// registryAccess allows actions on table's registry items alone (partition
// ledger.RegistryPartition: the shard count, the stage's facts, the
// feedback marks).
func registryAccess(actions []string, table *string) awsiam.PolicyStatement {
	st := allow(actions, table)
	st.AddCondition(str("ForAllValues:StringEquals"), map[string]any{"dynamodb:LeadingKeys": []string{ledger.RegistryPartition}})
	st.AddCondition(str("Null"), map[string]any{"dynamodb:LeadingKeys": "false"})
	return st
}

func allow(actions []string, resources ...*string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{Actions: jsii.Strings(actions...), Resources: &resources})
}

// alarms: one SNS topic (the stage's own, or an existing one), every alarm
// acts on it.
func (n *NudgeStack) alarms(s deployment.Stage, parts []*providerParts) {
	if s.AlarmTopicArn != "" {
		n.AlarmTopic = awssns.Topic_FromTopicArn(n.Stack, str("Alarms"), str(s.AlarmTopicArn))
	} else {
		n.AlarmTopic = awssns.NewTopic(n.Stack, str("Alarms"), &awssns.TopicProps{DisplayName: str("Nudge " + s.Name + " alarms"), EnforceSSL: jsii.Bool(true)})
	}
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
	// Messages hidden by a review (nudge dlq list, a redrive's selection,
	// status's sample) still count: the alarm must not clear while
	// someone looks at the DLQ.
	add("dlq-not-empty", "Messages are waiting in the DLQ: review them (nudge dlq list) and redrive.",
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{Expression: str("FILL(v, 0) + FILL(h, 0)"), Label: str("DLQ messages"),
			UsingMetrics: &map[string]awscloudwatch.IMetric{"v": n.DLQ.MetricApproximateNumberOfMessagesVisible(minute), "h": n.DLQ.MetricApproximateNumberOfMessagesNotVisible(minute)},
			Period:       awscdk.Duration_Minutes(num(1))}),
		0, 1, 0, notBreaching)
	add("oldest-message-age", fmt.Sprintf("A work-queue message is older than %v: the consumer is not keeping up or is failing.", s.OldestMessageAlarm),
		n.WorkQueue.MetricApproximateAgeOfOldestMessage(minute), s.OldestMessageAlarm.Seconds(), 5, 0, notBreaching)
	// Each provider's own queue has the same alarm: a paced one's backlog
	// drains at its rate, so a message older than the threshold is a
	// backlog larger than the rate can send in that time, or a consumer
	// failing on it.
	for _, q := range s.ProviderQueues() {
		why := fmt.Sprintf("its backlog is more than %v/s can send in that time, or the consumer is failing on it", q.Rate)
		if q.Rate <= 0 {
			why = "the consumer is not keeping up with it or is failing on it (its circuit may be open: see the alarm provider-circuit-open-" + q.Provider + ")"
		}
		add("oldest-message-age-"+q.Provider, fmt.Sprintf("A message of %s's work queue is older than %v: %s.", q.Provider, s.OldestMessageAlarm, why),
			n.ProviderQueues[q.Provider].MetricApproximateAgeOfOldestMessage(minute), s.OldestMessageAlarm.Seconds(), 5, 0, notBreaching)
	}
	add("overdue-pending", "Deliveries are overdue and not sent for three minutes: the quiet queue with a growing overdue set.",
		nudgeMetric("enqueue", enqueue.MetricOverduePending, "Maximum"), 0, 3, 0, awscloudwatch.TreatMissingData_BREACHING)
	// A renewal reminder that missed its window is an incident (escalation
	// or manual review), whichever function expired it.
	add("expired", "Deliveries expired unsent: their reminders missed their window. Find them (nudge status --expired 24h) and escalate.",
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{Expression: str("FILL(c, 0) + FILL(e, 0)"), Label: str("Expired"),
			UsingMetrics: &map[string]awscloudwatch.IMetric{"c": nudgeMetric("consumer", consumer.MetricExpired, "Sum"), "e": nudgeMetric("enqueue", enqueue.MetricExpired, "Sum")},
			Period:       awscdk.Duration_Minutes(num(1))}),
		0, 1, 0, notBreaching)
	add("consumer-duration", fmt.Sprintf("Consumer invocations ran over 80%% of their %v timeout in 3 of 5 minutes: a little slower and whole batches time out.", s.ConsumerTimeout),
		n.Consumer.MetricDuration(minute), 0.8*float64(s.ConsumerTimeout.Milliseconds()), 5, 3, notBreaching)
	add("unstarted", "The consumer returned records unstarted at its cut-off in 3 of 5 minutes: batches do not fit in the time before the deadline.",
		nudgeMetric("consumer", consumer.MetricUnstarted, "Sum"), 0, 5, 3, notBreaching)
	add("publish-failed", "SQS kept refusing the enqueue's messages in 3 of 5 minutes: hand-offs wait in the calendar.",
		nudgeMetric("enqueue", enqueue.MetricPublishFailed, "Sum"), 0, 5, 3, notBreaching)
	// DynamoDB publishes ThrottledRequests for an operation only while it
	// is throttled, and a sum in metric math has no value where a term has
	// none: each term is FILLed with 0, or one throttled operation would
	// leave the sum empty and the alarm quiet.
	throttled := map[string]awscloudwatch.IMetric{}
	var terms []string
	for i, op := range []string{"GetItem", "BatchGetItem", "Query", "Scan", "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"} {
		id := fmt.Sprintf("t%d", i)
		throttled[id] = n.Table.MetricThrottledRequestsForOperation(str(op), sum)
		terms = append(terms, "FILL("+id+", 0)")
	}
	add("dynamodb-throttles", "DynamoDB throttled the ledger's requests in 3 of 5 minutes: claims and hand-offs are retried and slow down.",
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{Expression: str(strings.Join(terms, " + ")), Label: str("Throttled requests"),
			UsingMetrics: &throttled, Period: awscdk.Duration_Minutes(num(1))}),
		0, 5, 3, notBreaching)
	add("consumer-errors", "The consumer function failed invocations.", n.Consumer.MetricErrors(sum), 0, 3, 0, notBreaching)
	add("consumer-throttles", "The consumer function was throttled.", n.Consumer.MetricThrottles(sum), 0, 3, 0, notBreaching)
	add("enqueue-errors", "The enqueue function failed runs: hand-offs wait.", n.Enqueue.MetricErrors(sum), 0, 3, 0, notBreaching)
	add("enqueue-throttles", "The enqueue function was throttled.", n.Enqueue.MetricThrottles(sum), 0, 3, 0, notBreaching)
	// The intake answers a bad request with a 4xx, and its own failures
	// (an unexpected error, a panic, DynamoDB throttling, the deadline)
	// with a 500 or 503, itself: the invocation succeeds, and Lambda's
	// Errors never counts them. Its Answered5xx does (pkg/intake); Errors
	// is left with what the function cannot answer (a crash, a timeout, a
	// failed start), and a throttle is a caller refused with 429. Each
	// reaches a caller, so one in a 5-minute window is enough.
	add("intake-5xx", "The HTTP intake answered requests with a 5xx: a 500 (an unexpected error or a panic: a permission, a bug) or a 503 (DynamoDB throttling, the deadline, a stage the enqueue has not run on yet).",
		nudgeMetric("intake", intake.MetricAnswered5xx, "Sum"), 0, 5, 1, notBreaching)
	add("intake-errors", "HTTP intake invocations failed without an answer (callers got a bare 502): a crash, a timeout, or a failed start.",
		n.Intake.MetricErrors(sum), 0, 5, 1, notBreaching)
	add("intake-throttles", "The HTTP intake refused requests with 429: its instances (reserved concurrency) or the account's concurrency are used up.",
		n.Intake.MetricThrottles(sum), 0, 5, 1, notBreaching)
	// A lost tick is harmless alone (the next one resumes from the
	// cursors) and leaves its record in the schedule DLQ; ticks lost in 3
	// of 5 minutes are an outage. Counting messages sent, not messages
	// waiting, the alarm clears by itself once ticks run again, and a
	// record nobody purged does not keep it on.
	for _, p := range parts {
		if p.alarms != nil {
			p.alarms(n, s, add)
		}
	}
	// A provider's circuit opens in each consumer instance that sees it
	// unwell, and opens again at every failed probe, at least every 5
	// minutes (the cool-down's bound): one opening in the last 10 minutes
	// keeps the alarm on while it stays open, and it clears 10 minutes
	// after the last.
	for _, p := range s.Providers {
		open := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: str("Nudge"), MetricName: str(consumer.MetricCircuit),
			DimensionsMap: &map[string]*string{"Function": str("consumer"), "Provider": str(p), "State": str("open")},
			Statistic:     str("Sum"), Period: awscdk.Duration_Minutes(num(1))})
		add("provider-circuit-open-"+p, fmt.Sprintf("The consumer stopped sending to %s: its sends time out, fail to connect or answer 5xx, and its deliveries wait (unclaimed, not dead-lettered) while a probe every 30 s to 5 min checks it.", p),
			open, 0, 10, 1, notBreaching)
	}
	add("ticks-lost", "Enqueue ticks are being lost (runs failing, ticks dropped after a minute, or Scheduler unable to invoke the enqueue): hand-offs wait. Their records are in the schedule DLQ.",
		n.SchedulerDLQ.MetricNumberOfMessagesSent(sum), 0, 5, 3, notBreaching)
	n.outcomeAlarms(add)
}

// dashboard shows the Nudge metrics and the queue depths.
func (n *NudgeStack) dashboard(s deployment.Stage) {
	nudge := func(fn, name, stat string) awscloudwatch.IMetric { return nudgeMetric(fn, name, stat) }
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
		graph("Queue depth", append(n.queueDepths(minute), n.DLQ.MetricApproximateNumberOfMessagesVisible(minute))...),
		graph("Functions", n.Consumer.MetricErrors(minute), n.Consumer.MetricThrottles(minute), n.Enqueue.MetricErrors(minute), n.Enqueue.MetricDuration(minute)),
	)
	// By channel and by failure class: what to look at before changing the
	// retry policy. SEARCH finds whichever channels and classes occur.
	search := func(dim, name string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{Period: awscdk.Duration_Minutes(num(1)), Label: str(""),
			Expression: str(fmt.Sprintf(`SEARCH('{Nudge,Function,%s} MetricName="%s" Function="consumer"', 'Sum', 60)`, dim, name))})
	}
	d.AddWidgets(
		graph("Sent by channel", search("Channel", consumer.MetricSent)),
		graph("Retried by failure class", search("ErrorClass", consumer.MetricRetried)),
		graph("Dead-lettered by failure class", search("ErrorClass", consumer.MetricDeadLettered)),
	)
	sum := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(num(1)), Statistic: str("Sum")}
	d.AddWidgets(awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: str("HTTP intake"), Width: num(8),
		Left: &[]awscloudwatch.IMetric{n.Intake.MetricInvocations(sum), nudgeMetric("intake", intake.MetricAnswered5xx, "Sum"), n.Intake.MetricErrors(sum),
			n.Intake.MetricThrottles(sum)},
		Right: &[]awscloudwatch.IMetric{n.Intake.MetricDuration(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(num(1)), Statistic: str("p99")})},
	}), n.outcomesWidget())
	if n.Feedback != nil {
		d.AddWidgets(n.feedbackWidget())
	}
}
