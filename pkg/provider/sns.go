package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/nudgehq/nudge/pkg/failure"
)

// Message attributes of an SNS delivery, for subscription filter policies.
const (
	AttrChannel     = "channel"
	AttrProvider    = "provider"
	AttrDeliveryKey = "deliveryKey"
)

// SNSAPI is the part of the SNS client the SNS provider uses.
type SNSAPI interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

var _ SNSAPI = (*sns.Client)(nil)

// SNSConfig configures an SNS provider.
type SNSConfig struct {
	// Client publishes. Required.
	Client SNSAPI
	// TopicARN is the topic. A FIFO topic (its name ends in ".fifo")
	// deduplicates by delivery key for 5 minutes. Required.
	TopicARN string
	// Timeout bounds one publish. Default 10s.
	Timeout time.Duration
}

// SNS publishes one message per delivery to a topic, for subscribers that
// deliver it themselves (an SMS gateway, push, chat). The message is the
// webhook's JSON body: identifiers and references, never an address. Its
// attributes (channel, provider, deliveryKey) serve filter policies and
// deduplication by subscribers.
//
// On a FIFO topic the deduplication id is the delivery key (its SHA-256
// when longer than SNS's 128 characters) and the group is the reminder:
// SNS drops a repeat within 5 minutes of the first publish. A standard
// topic does not deduplicate; subscribers deduplicate by deliveryKey.
type SNS struct {
	cfg  SNSConfig
	fifo bool
}

// NewSNS validates cfg and applies its defaults.
func NewSNS(cfg SNSConfig) (*SNS, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("sns: no SNS client")
	case !strings.HasPrefix(cfg.TopicARN, "arn:") || strings.Count(cfg.TopicARN, ":") != 5:
		return nil, errors.New("sns: the topic ARN is missing or malformed; set NUDGE_SNS_TOPIC_ARN to arn:aws:sns:REGION:ACCOUNT:NAME")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &SNS{cfg: cfg, fifo: strings.HasSuffix(cfg.TopicARN, ".fifo")}, nil
}

// DeduplicationID is the FIFO deduplication id of a delivery key: the key
// itself when it fits SNS's 128 characters, else its SHA-256 in hex.
func DeduplicationID(key string) string {
	if len(key) <= 128 {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Send publishes req.
func (s *SNS) Send(ctx context.Context, req Request, key string) (Receipt, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Receipt{}, failure.Permanent(err)
	}
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	in := &sns.PublishInput{
		TopicArn: aws.String(s.cfg.TopicARN),
		Message:  aws.String(string(body)),
		MessageAttributes: map[string]types.MessageAttributeValue{
			AttrChannel: str(req.Channel), AttrProvider: str("sns"), AttrDeliveryKey: str(key),
		},
	}
	if s.fifo {
		in.MessageGroupId = aws.String(req.ReminderID)
		in.MessageDeduplicationId = aws.String(DeduplicationID(key))
	}
	var out *sns.PublishOutput
	wrote, err := awsCall(ctx, s.cfg.Timeout, func(ctx context.Context) error {
		var err error
		out, err = s.cfg.Client.Publish(ctx, in, func(o *sns.Options) { o.RetryMaxAttempts = 1 })
		return err
	})
	if err != nil {
		return Receipt{}, s.classify(err, wrote)
	}
	return Receipt{ID: aws.ToString(out.MessageId)}, nil
}

func (s *SNS) classify(err error, wrote bool) error {
	a, ok := answerOf(err)
	if !ok {
		return transportFailure("sns", err, wrote, "")
	}
	e, handled := answerFrom("sns", err, a, "")
	if handled != nil {
		return handled
	}
	switch a.code {
	case "InvalidParameter", "InvalidParameterValue", "InvalidParameterException", "ValidationError":
		return failure.Permanent(e)
	case "NotFound", "NotFoundException", "InvalidSecurity", "AuthorizationError", "KMSDisabled", "KMSNotFound", "KMSAccessDenied", "KMSInvalidState", "KMSOptInRequired", "AccessDenied", "AccessDeniedException":
		// The topic, its key or the permission to publish: the operator
		// fixes the stage, then redrives.
		return failure.WithClass(failure.Permanent(e), failure.ClassConfig)
	case "Throttled", "Throttling", "ThrottlingException", "KMSThrottling":
		return failure.WithClass(e, failure.ClassThrottled)
	}
	if credentialCodes[a.code] {
		return failure.WithClass(e, failure.ClassAWS)
	}
	return byStatus(e)
}
