package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"
	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/provider/sns"
)

// snsParts is the SNS provider's part: the delivery topic (the stage's own
// or an existing one) and the consumer's right to publish to it.
func snsParts() *providerParts {
	return &providerParts{
		resources: func(n *NudgeStack, s deployment.Stage, _ *NudgeStackProps) map[string]string {
			n.newDeliveryTopic(s)
			return map[string]string{sns.ResourceTopicARN: *n.DeliveryTopic.TopicArn()}
		},
		grants: func(n *NudgeStack, _ deployment.Stage) { n.DeliveryTopic.GrantPublish(n.Consumer) },
	}
}

// newDeliveryTopic is the sns provider's topic: the stage's existing one,
// or one the stack creates.
func (n *NudgeStack) newDeliveryTopic(s deployment.Stage) {
	if s.ProviderSettings[sns.SettingTopicARN] != "" {
		n.DeliveryTopic = awssns.Topic_FromTopicArn(n.Stack, str("DeliveryTopic"), str(s.ProviderSettings[sns.SettingTopicARN]))
		return
	}
	n.DeliveryTopic = awssns.NewTopic(n.Stack, str("DeliveryTopic"), &awssns.TopicProps{
		TopicName: str(sns.TopicName(s.Name)), DisplayName: str("Nudge " + s.Name + " deliveries"), EnforceSSL: jsii.Bool(true),
	})
	awscdk.NewCfnOutput(n.Stack, str("DeliveryTopicArn"), &awscdk.CfnOutputProps{Value: n.DeliveryTopic.TopicArn()})
}
