package sns

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/nudgehq/nudge/internal/envconfig"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// Name is the SNS provider's name, as deliveries give it.
const Name = "sns"

// EnvTopicARN is the consumer's variable: the topic deliveries are
// published to.
const EnvTopicARN = "NUDGE_SNS_TOPIC_ARN"

// SettingTopicARN is the stage's setting (CDK context key): an existing
// topic; unset, the stack creates one (TopicName).
const SettingTopicARN = "snsTopicArn"

// ResourceTopicARN names the deployment's topic in
// provider.Deployment.Resources.
const ResourceTopicARN = "topicArn"

// TopicName is the topic the stack creates for a stage when it is given
// none.
func TopicName(stage string) string { return "nudge-" + stage + "-deliveries" }

// topicARN matches an SNS topic's ARN.
var topicARN = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$`)

// Driver declares the SNS provider: one message per delivery, identifiers
// and references only, published to a topic whose subscribers deliver it
// (an SMS gateway, push, chat).
var Driver = provider.Driver{
	Name:  Name,
	Title: "SNS",
	Contract: provider.Contract{
		Deduplicates: "a FIFO topic, by the delivery key, for 5 minutes; subscribers of a standard topic, by the deliveryKey attribute",
		Ambiguous:    provider.AmbiguousRetry,
		// Per million publishes to a standard topic (64 KB each; delivery to
		// an SQS subscriber is free): AWS's list price, us-east-1, 2025.
		Price: provider.Price{USD: 0.50, Per: 1_000_000, Unit: "publishes"},
		Classification: []provider.Row{
			{Answer: "Throttled, Throttling, KMSThrottling", Kind: failure.KindRetry, Class: failure.ClassThrottled},
			{Answer: "InvalidParameter, ValidationError", Kind: failure.KindPermanent, Class: failure.ClassRejected},
			{Answer: "NotFound: no such topic", Kind: failure.KindPermanent, Class: failure.ClassConfig},
			{Answer: "AuthorizationError, AccessDenied, KMS errors", Kind: failure.KindPermanent, Class: failure.ClassConfig},
			{Answer: "500 InternalError", Kind: failure.KindAmbiguous, Class: failure.ClassServer},
			{Answer: "accepted, the answer lost", Kind: failure.KindAmbiguous, Class: failure.ClassNetwork},
		},
	},
	Settings: []provider.Setting{
		{Key: SettingTopicARN, Doc: "an existing topic for the sns provider (default: the stack creates one)"},
	},
	CheckStage: func(d provider.Deployment) error {
		if v := d.Settings[SettingTopicARN]; v != "" && !topicARN.MatchString(v) {
			return fmt.Errorf("snsTopicArn %q is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:TOPIC)", v)
		}
		return nil
	},
	Env: func(d provider.Deployment) map[provider.Function]map[string]string {
		return map[provider.Function]map[string]string{provider.Consumer: {EnvTopicARN: d.Resources[ResourceTopicARN]}}
	},
	Example: map[string]string{ResourceTopicARN: "arn:aws:sns:us-east-1:123456789012:t"},
	CheckEnv: func(fn provider.Function, getenv func(string) string) error {
		if fn != provider.Consumer {
			return nil
		}
		r := &envconfig.Reader{Getenv: getenv, Who: string(fn)}
		r.Required(EnvTopicARN)
		return r.Err()
	},
	Intake: provider.IntakeRules{Address: provider.NoAddress},
	Build: func(_ context.Context, env provider.Env) (provider.Provider, error) {
		cfg, ok := env.AWS.(aws.Config)
		if !ok {
			return nil, errors.New("consumer: sns needs the function's AWS configuration")
		}
		return New(Config{Client: sns.NewFromConfig(cfg), TopicARN: env.Getenv(EnvTopicARN), Timeout: env.Timeout})
	},
	StandIn: provider.StandIn{Kind: provider.TopicStandIn,
		Resources: func(l provider.Local) map[string]string { return map[string]string{ResourceTopicARN: l.TopicARN} },
		Evidence:  "the topic's subscriber queue, by the " + AttrDeliveryKey + " attribute",
		Faults: map[string]provider.Answer{
			"500":  {Status: 500, Code: "InternalError", Message: "internal error"},
			"429":  {Status: 400, Code: "Throttled", Message: "Rate exceeded"},
			"400":  {Status: 400, Code: "InvalidParameter", Message: "Invalid parameter: Message"},
			"down": {Status: 503, Code: "ServiceUnavailable", Message: "Service unavailable"},
		},
	},
}
