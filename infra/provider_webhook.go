package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/pkg/provider/webhook"
)

// webhookParts is the webhook provider's part: the receiver's URL and its
// signing secret as deploy-time parameters, and the consumer's read of the
// secret.
func webhookParts() *providerParts {
	var params *webhookParams
	return &providerParts{
		params: func(n *NudgeStack, id string) { params = newWebhookParams(n.Stack, id) },
		resources: func(*NudgeStack, deployment.Stage, *NudgeStackProps) map[string]string {
			return map[string]string{webhook.ResourceURL: *params.url.ValueAsString(), webhook.ResourceSecretID: *params.secretID.ValueAsString()}
		},
		grants: func(n *NudgeStack, _ deployment.Stage) {
			n.Consumer.AddToRolePolicy(allow([]string{"secretsmanager:GetSecretValue"}, secretARNs(n.Stack, params.secretID)...))
			secretKeyPolicy(n.Stack, n.Consumer, params.secretKey)
		},
	}
}

// WebhookMissing is what a deploy of the stack id without its webhook
// parameters says: the two to set, and the secret to create first.
func WebhookMissing(id string) string {
	return "Nudge needs its webhook: cdk deploy " + id + " (with the -c settings of this deploy) --parameters WebhookUrl=https://YOUR-RECEIVER --parameters WebhookSigningRef=SECRET-NAME-OR-ARN" +
		" (create the secret first: aws secretsmanager create-secret --name nudge/webhook-signing --secret-string ...; README, Deploy). Later deploys keep both."
}

// secretARNs are the resources that grant the secret whether the parameter
// holds its name, its partial ARN or its full ARN. Secrets Manager ends a
// secret's ARN with "-" and six random characters, so a name becomes
// arn:…:secret:NAME-??????; an ARN is granted as given (a full one) and with
// that suffix (a partial one, which lacks it). IAM accepts either form only
// if the resource matches the full ARN: a partial ARN granted as given
// would fail every read, and the consumer could not start.
func secretARNs(stack awscdk.Stack, p awscdk.CfnParameter) []*string {
	isARN := awscdk.NewCfnCondition(stack, str("WebhookSecretIsArn"), &awscdk.CfnConditionProps{
		Expression: awscdk.Fn_ConditionEquals(awscdk.Fn_Select(num(0), awscdk.Fn_Split(str(":"), p.ValueAsString(), nil)), str("arn")),
	})
	byName := stack.FormatArn(&awscdk.ArnComponents{Service: str("secretsmanager"), Resource: str("secret"),
		ResourceName: awscdk.Fn_Join(str(""), &[]*string{p.ValueAsString(), str("-??????")}), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME})
	partial := awscdk.Fn_Join(str(""), &[]*string{p.ValueAsString(), str("-??????")})
	return []*string{
		awscdk.Token_AsString(awscdk.Fn_ConditionIf(isARN.LogicalId(), p.ValueAsString(), byName), nil),
		awscdk.Token_AsString(awscdk.Fn_ConditionIf(isARN.LogicalId(), partial, byName), nil),
	}
}

// secretKeyPolicy gives the consumer kms:Decrypt on the secret's customer
// managed key, through Secrets Manager only, when the parameter names one.
func secretKeyPolicy(stack awscdk.Stack, fn awslambda.Function, key awscdk.CfnParameter) {
	hasKey := awscdk.NewCfnCondition(stack, str("WebhookSecretHasKey"), &awscdk.CfnConditionProps{
		Expression: awscdk.Fn_ConditionNot(awscdk.Fn_ConditionEquals(key.ValueAsString(), str(""))),
	})
	decrypt := allow([]string{"kms:Decrypt"}, key.ValueAsString())
	decrypt.AddCondition(str("StringEquals"), map[string]any{"kms:ViaService": awscdk.Fn_Join(str(""), &[]*string{str("secretsmanager."), stack.Region(), str(".amazonaws.com")})})
	p := awsiam.NewPolicy(stack, str("ConsumerSecretKeyPolicy"), &awsiam.PolicyProps{Statements: &[]awsiam.PolicyStatement{decrypt}, Roles: &[]awsiam.IRole{fn.Role()}})
	p.Node().DefaultChild().(awsiam.CfnPolicy).CfnOptions().SetCondition(hasKey)
	// The consumer reads its secret when it starts: not before it may. A
	// DependsOn cannot name a conditional resource (the template would not
	// deploy without the key), so the function depends on a handle whose
	// metadata refers to the policy only when it exists: CloudFormation
	// creates the policy first then, and nothing else otherwise.
	ready := awscdk.NewCfnWaitConditionHandle(stack, str("ConsumerSecretKeyReady"), &awscdk.CfnWaitConditionHandleProps{})
	ready.AddMetadata(str("keyPolicy"), awscdk.Fn_ConditionIf(hasKey.LogicalId(), p.Node().DefaultChild().(awsiam.CfnPolicy).Ref(), str("none")))
	fn.Node().AddDependency(ready)
}

// webhookParams are the webhook provider's deploy-time parameters.
type webhookParams struct{ url, secretID, secretKey awscdk.CfnParameter }

// newWebhookParams defines the webhook's parameters and the rule that stops
// a deploy without them.
func newWebhookParams(stack awscdk.Stack, id string) *webhookParams {
	// Parameters: the provider, set at deploy time. Their defaults are empty
	// so that a deploy without them stops at the rule below, with a message
	// saying what to set, before any change, rather than with the CLI's
	// generic "missing a value". (An update without them keeps the
	// deployed values: the CDK CLI passes UsePreviousValue.)
	webhookURL := awscdk.NewCfnParameter(stack, str(webhook.ParamURL), &awscdk.CfnParameterProps{
		Type: str("String"), Default: str(""), NoEcho: jsii.Bool(true), // it may hold a token
		AllowedPattern: str("^$|^https://.+"), ConstraintDescription: str("an https:// URL"),
		Description: str("The webhook provider's HTTPS endpoint (docs/webhook.md)"),
	})
	secretID := awscdk.NewCfnParameter(stack, str(webhook.ParamSecret), &awscdk.CfnParameterProps{
		Type: str("String"), Default: str(""),
		AllowedPattern:        str(`^$|^(arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:)?[A-Za-z0-9/_+=.@-]+$`),
		ConstraintDescription: str("the name, partial ARN or full ARN of a Secrets Manager secret in this account"),
		Description:           str("Name, partial ARN or full ARN of the Secrets Manager secret holding the webhook signing secret (plain text)"),
	})
	secretKey := awscdk.NewCfnParameter(stack, str(webhook.ParamSecretKey), &awscdk.CfnParameterProps{
		Type: str("String"), Default: str(""),
		AllowedPattern:        str(`^$|^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$`),
		ConstraintDescription: str("empty, or the ARN of a KMS key (arn:aws:kms:REGION:ACCOUNT:key/ID)"),
		Description:           str("Only for a signing secret encrypted with a customer managed KMS key: the key's ARN (the consumer gets kms:Decrypt on it alone)"),
	})

	awscdk.NewCfnRule(stack, str("WebhookIsSet"), &awscdk.CfnRuleProps{Assertions: &[]*awscdk.CfnRuleAssertion{{
		Assert: awscdk.Fn_ConditionAnd(
			awscdk.Fn_ConditionNot(awscdk.Fn_ConditionEquals(webhookURL.ValueAsString(), str(""))),
			awscdk.Fn_ConditionNot(awscdk.Fn_ConditionEquals(secretID.ValueAsString(), str("")))),
		AssertDescription: str(WebhookMissing(id)),
	}}})
	return &webhookParams{url: webhookURL, secretID: secretID, secretKey: secretKey}
}
