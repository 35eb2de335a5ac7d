package main

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// applyNag runs the cdk-nag AwsSolutions checks on the stack. Every
// suppression names the rule, the resource and why; TestNagFindings fails
// on any finding not suppressed here.
func applyNag(n *NudgeStack) {
	awscdk.Aspects_Of(n.Stack).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	suppress(n.SchedulerDLQ, "AwsSolutions-SQS3",
		"This queue is the dead-letter queue of the enqueue schedule (EventBridge Scheduler's DeadLetterConfig) and the enqueue's on-failure destination, which cdk-nag does not recognise as a DLQ; a DLQ behind it would never receive anything.")
	suppress(n.OutcomesDLQ, "AwsSolutions-SQS3",
		"This queue is the on-failure destination of the outcomes function's stream mapping (its records name the stream batches given up after 24 h), "+
			"which cdk-nag does not recognise as a DLQ; a DLQ behind it would never receive anything.")
	suppress(n.Outcomes.Role(), "AwsSolutions-IAM5",
		"dynamodb:ListStreams takes no resource (it lists stream ARNs and reads no data); the DynamoDB event source's grant adds it on * "+
			"beside DescribeStream, GetRecords and GetShardIterator on the ledger's stream alone, and Lambda checks it when it creates the mapping.",
		"Resource::*")
	if n.OutcomeQueue != nil {
		suppress(n.OutcomeQueue, "AwsSolutions-SQS3",
			"An example subscriber's queue for the outcome events: whoever consumes it gives it the redrive policy (a DLQ and a receive count) "+
				"that fits their consumer; the stack has no consumer of it to fit one to.")
	}
	if len(n.EmailTemplates) > 0 {
		prefix := "Resource::arn:<AWS::Partition>:ses:<AWS::Region>:<AWS::AccountId>:template/" + n.TemplatePrefix + "*"
		why := "SES names a send's template at send time; the grant covers the stage's own templates (its nudge-<stage>- prefix, the templates/email folder the stack deploys), so that adding a template needs no policy change, and nothing else."
		suppress(n.Consumer.Role(), "AwsSolutions-IAM5", why, prefix)
		suppress(n.Operator, "AwsSolutions-IAM5", "The intake checks that a delivery's template is deployed (ses:GetEmailTemplate): "+why, prefix)
		suppress(n.Intake.Role(), "AwsSolutions-IAM5", "The HTTP intake knows the stack's templates from its environment and asks SES about another name at most once a minute (ses:GetEmailTemplate): "+why, prefix)
	}
	for _, c := range *n.Stack.Node().Children() {
		if id := *c.Node().Id(); strings.HasPrefix(id, "SchedulerRoleForTarget") {
			suppress(c, "AwsSolutions-IAM5",
				"The schedule's role may invoke the enqueue function and its versions (<arn>:*), as the Scheduler LambdaInvoke target grants; the action is lambda:InvokeFunction only and the function is the enqueue alone.",
				"Resource::<"+*n.Stack.GetLogicalId(n.Enqueue.Node().DefaultChild().(awscdk.CfnElement))+".Arn>:*")
		}
	}
}

func suppress(c constructs.IConstruct, rule, reason string, appliesTo ...string) {
	s := &cdknag.NagPackSuppression{Id: jsii.String(rule), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		var a []any
		for _, x := range appliesTo {
			a = append(a, x)
		}
		s.AppliesTo = &a
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{s}, jsii.Bool(true))
}
