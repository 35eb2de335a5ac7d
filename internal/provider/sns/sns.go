package sns

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

	"github.com/nudgehq/nudge/internal/provider/awscall"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// Message attributes of an SNS delivery, for subscription filter policies.
const (
	AttrChannel     = "channel"
	AttrProvider    = "provider"
	AttrDeliveryKey = "deliveryKey"
)

// Publisher is the part of the SNS client a Sender uses.
type Publisher interface {
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

var _ Publisher = (*sns.Client)(nil)

// Config configures a Sender.
type Config struct {
	// Client publishes. Required.
	Client Publisher
	// TopicARN is the topic. A FIFO topic (its name ends in ".fifo")
	// deduplicates by delivery key for 5 minutes. Required.
	TopicARN string
	// Timeout bounds one publish. Default 10s.
	Timeout time.Duration
}

// Sender publishes one message per delivery to a topic, for subscribers that
// deliver it themselves (an SMS gateway, push, chat). The message is the
// webhook's JSON body: identifiers and references, never an address. Its
// attributes (channel, provider, deliveryKey) serve filter policies and
// deduplication by subscribers.
//
// On a FIFO topic the deduplication id is the delivery key (its SHA-256
// when longer than SNS's 128 characters) and the group is the reminder:
// SNS drops a repeat within 5 minutes of the first publish. A standard
// topic does not deduplicate; subscribers deduplicate by deliveryKey.
type Sender struct {
	cfg  Config
	fifo bool
}

// New validates cfg and applies its defaults.
func New(cfg Config) (*Sender, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("sns: no SNS client")
	case !strings.HasPrefix(cfg.TopicARN, "arn:") || strings.Count(cfg.TopicARN, ":") != 5:
		return nil, errors.New("sns: the topic ARN is missing or malformed; set NUDGE_SNS_TOPIC_ARN to arn:aws:sns:REGION:ACCOUNT:NAME")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &Sender{cfg: cfg, fifo: strings.HasSuffix(cfg.TopicARN, ".fifo")}, nil
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
func (s *Sender) Send(ctx context.Context, req provider.Request, key string) (provider.Receipt, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return provider.Receipt{}, failure.Permanent(err)
	}
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	in := &sns.PublishInput{
		TopicArn: aws.String(s.cfg.TopicARN),
		Message:  aws.String(string(body)),
		MessageAttributes: map[string]types.MessageAttributeValue{
			AttrChannel: str(req.Channel), AttrProvider: str(Name), AttrDeliveryKey: str(key),
		},
	}
	if s.fifo {
		in.MessageGroupId = aws.String(req.ReminderID)
		in.MessageDeduplicationId = aws.String(DeduplicationID(key))
	}
	var out *sns.PublishOutput
	wrote, err := awscall.Run(ctx, s.cfg.Timeout, func(ctx context.Context) error {
		var err error
		out, err = s.cfg.Client.Publish(ctx, in, func(o *sns.Options) { o.RetryMaxAttempts = 1 })
		return err
	})
	if err != nil {
		return provider.Receipt{}, s.classify(err, wrote)
	}
	return provider.Receipt{ID: aws.ToString(out.MessageId)}, nil
}

func (s *Sender) classify(err error, wrote bool) error {
	a, ok := awscall.AnswerOf(err)
	if !ok {
		return awscall.TransportFailure(Name, err, wrote, "")
	}
	e, handled := awscall.ErrorOf(Name, err, a, "")
	if handled != nil {
		return handled
	}
	switch a.Code {
	case "InvalidParameter", "InvalidParameterValue", "InvalidParameterException", "ValidationError":
		return failure.Permanent(e)
	case "NotFound", "NotFoundException", "InvalidSecurity", "AuthorizationError", "KMSDisabled", "KMSNotFound", "KMSAccessDenied", "KMSInvalidState", "KMSOptInRequired", "AccessDenied", "AccessDeniedException":
		// The topic, its key or the permission to publish: the operator
		// fixes the stage, then redrives.
		return failure.WithClass(failure.Permanent(e), failure.ClassConfig)
	case "Throttled", "Throttling", "ThrottlingException", "KMSThrottling":
		return failure.WithClass(e, failure.ClassThrottled)
	}
	if awscall.CredentialCodes[a.Code] {
		return failure.WithClass(e, failure.ClassAWS)
	}
	return awscall.ByStatus(e)
}
