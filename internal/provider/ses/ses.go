package ses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/nudgehq/nudge/internal/provider/awscall"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// HeaderDeliveryKey is the e-mail header that carries the delivery key, for
// tracing a received e-mail back to its delivery.
const HeaderDeliveryKey = "X-Nudge-Delivery-Key"

// The tags every e-mail carries, which SES copies into its sending events
// (the configuration set publishes them): the reminder and the attempt,
// encoded by TagValue, since a tag value holds letters, digits, '_' and '-'
// only.
const (
	TagReminder = "nudge_reminder"
	TagAttempt  = "nudge_attempt"
)

// TagProbe marks a probe (Probe), value "1": the feedback function tells a
// probe's events by it, never by its key, whose reminder id a caller could
// also choose.
const TagProbe = "nudge_probe"

// TagValue encodes s for an SES tag value, reversibly: '_' becomes "__",
// '.' "_d", ':' "_c"; letters, digits and '-' stay. A reminder id (at most
// 128 of [A-Za-z0-9._-]) stays within SES's 256 characters.
func TagValue(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '_':
			b.WriteString("__")
		case r == '.':
			b.WriteString("_d")
		case r == ':':
			b.WriteString("_c")
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-':
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, "_x%04x", r)
		}
	}
	return b.String()
}

// TagValueDecode is TagValue's inverse: the string v encodes, or an error
// for a value TagValue cannot have written.
func TagValueDecode(v string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-':
			b.WriteByte(c)
			continue
		case c != '_' || i+1 == len(v):
		case v[i+1] == '_':
			b.WriteByte('_')
			i++
			continue
		case v[i+1] == 'd':
			b.WriteByte('.')
			i++
			continue
		case v[i+1] == 'c':
			b.WriteByte(':')
			i++
			continue
		case v[i+1] == 'x' && i+6 <= len(v):
			if r, err := strconv.ParseUint(v[i+2:i+6], 16, 32); err == nil && utf8.ValidRune(rune(r)) {
				b.WriteRune(rune(r))
				i += 5
				continue
			}
		}
		return "", fmt.Errorf("ses: tag value %q is not TagValue's encoding at byte %d", v, i)
	}
	return b.String(), nil
}

// EmailSender is the part of the SES v2 client a Sender uses.
type EmailSender interface {
	SendEmail(ctx context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error)
}

var _ EmailSender = (*sesv2.Client)(nil)

// Config configures a Sender.
type Config struct {
	// Client sends the e-mails. Required.
	Client EmailSender
	// From is the sender address, of a verified SES identity. Required.
	From string
	// FromIdentityARN is the identity's ARN, when the sender is authorised
	// through another account's identity. Optional.
	FromIdentityARN string
	// ConfigurationSet names the SES configuration set every e-mail is sent
	// with (the stack's turns on the suppression list). Optional.
	ConfigurationSet string
	// TemplatePrefix is put before a delivery's templateRef to name the SES
	// template, so that stages in one account keep their own templates
	// ("nudge-dev-"). Default "".
	TemplatePrefix string
	// LongBackoff is how long a send waits after SES says the account's
	// sending is paused or its daily quota is spent. Default 1h.
	LongBackoff time.Duration
	// Timeout bounds one send. Default 10s.
	Timeout time.Duration
}

// Sender sends e-mail through Amazon SES (API v2) with stored templates: the
// delivery's templateRef names the template (after TemplatePrefix), the
// reminder's metadata is its data, and the delivery's address receives it.
//
// SES has no idempotency key: a send that fails after its request was
// written may have gone out, and is Ambiguous. The consumer's policy for
// the provider decides whether that is retried or reviewed.
type Sender struct{ cfg Config }

// New validates cfg and applies its defaults.
func New(cfg Config) (*Sender, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("ses: no SES client")
	case !ValidEmail(cfg.From):
		return nil, errors.New("ses: the sender address is missing or not an e-mail address; set NUDGE_SES_FROM to an address of a verified SES identity")
	case cfg.TemplatePrefix != "" && !sesTemplateName.MatchString(cfg.TemplatePrefix):
		return nil, fmt.Errorf("ses: template prefix %q may hold only letters, digits, '-' and '_'", cfg.TemplatePrefix)
	}
	if cfg.LongBackoff == 0 {
		cfg.LongBackoff = time.Hour
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &Sender{cfg: cfg}, nil
}

// MaxTemplateName is the longest SES template name.
const MaxTemplateName = 64

var sesTemplateName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// TemplateName returns the SES template a templateRef names, and whether
// it is a valid name.
func (s *Sender) TemplateName(ref string) (string, bool) {
	name := s.cfg.TemplatePrefix + ref
	return name, len(name) <= MaxTemplateName && sesTemplateName.MatchString(ref)
}

// ValidTemplateRef reports whether ref can name an SES template after a
// prefix of prefixLen bytes.
func ValidTemplateRef(ref string, prefixLen int) bool {
	return ref != "" && prefixLen+len(ref) <= MaxTemplateName && sesTemplateName.MatchString(ref)
}

// Send sends req's e-mail.
func (s *Sender) Send(ctx context.Context, req provider.Request, key string) (provider.Receipt, error) {
	if req.Address == "" {
		return provider.Receipt{}, failure.WithClass(failure.Permanent(errors.New("ses: the delivery has no recipient address; give deliveries[].address at intake")), failure.ClassConfig)
	}
	name, ok := s.TemplateName(req.TemplateRef)
	if !ok {
		return provider.Receipt{}, failure.WithClass(failure.Permanent(fmt.Errorf("ses: templateRef %q cannot name an SES template", req.TemplateRef)), failure.ClassConfig)
	}
	data := req.TemplateData
	if data == nil {
		data = map[string]string{}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return provider.Receipt{}, failure.Permanent(err)
	}
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(s.cfg.From),
		Destination:      &types.Destination{ToAddresses: []string{req.Address}},
		Content: &types.EmailContent{Template: &types.Template{
			TemplateName: aws.String(name),
			TemplateData: aws.String(string(raw)),
			Headers:      []types.MessageHeader{{Name: aws.String(HeaderDeliveryKey), Value: aws.String(key)}},
		}},
	}
	return s.send(ctx, in, req.ReminderID, req.Attempt, req.Address, name)
}

// ProbeAddress is where a probe goes: the mailbox simulator's success
// address, which SES accepts and delivers without a recipient, without
// counting it in the account's bounce or complaint rates.
const ProbeAddress = "success@simulator.amazonses.com"

// Probe sends a probe (provider.Prober): a plain e-mail to ProbeAddress in
// the configuration set, under key, whose events show that SES's reports
// arrive. Without a configuration set SES publishes no events, and there
// is nothing to probe.
func (s *Sender) Probe(ctx context.Context, key string) (provider.Receipt, error) {
	if s.cfg.ConfigurationSet == "" {
		return provider.Receipt{}, failure.WithClass(failure.Permanent(errors.New("ses: no configuration set, so SES reports nothing to probe; set NUDGE_SES_CONFIGURATION_SET")), failure.ClassConfig)
	}
	reminder, _, _ := strings.Cut(key, ":")
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(s.cfg.From),
		Destination:      &types.Destination{ToAddresses: []string{ProbeAddress}},
		Content: &types.EmailContent{Simple: &types.Message{
			Subject: &types.Content{Data: aws.String("Nudge feedback probe")},
			Body: &types.Body{Text: &types.Content{Data: aws.String(
				"Sent by Nudge's consumer to show that this stage's SES events arrive, while a send that may have gone out awaits them.")}},
			Headers: []types.MessageHeader{{Name: aws.String(HeaderDeliveryKey), Value: aws.String(key)}},
		}},
	}
	in.EmailTags = []types.MessageTag{{Name: aws.String(TagProbe), Value: aws.String("1")}}
	return s.send(ctx, in, reminder, 1, "", "")
}

// send sends in with the tags of reminder's attempt, as the stage's
// identity, in its configuration set, and classifies SES's answer.
func (s *Sender) send(ctx context.Context, in *sesv2.SendEmailInput, reminder string, attempt int, address, template string) (provider.Receipt, error) {
	in.EmailTags = append(in.EmailTags,
		types.MessageTag{Name: aws.String(TagReminder), Value: aws.String(TagValue(reminder))},
		types.MessageTag{Name: aws.String(TagAttempt), Value: aws.String(strconv.Itoa(attempt))},
	)
	if s.cfg.FromIdentityARN != "" {
		in.FromEmailAddressIdentityArn = aws.String(s.cfg.FromIdentityARN)
	}
	if s.cfg.ConfigurationSet != "" {
		in.ConfigurationSetName = aws.String(s.cfg.ConfigurationSet)
	}
	var out *sesv2.SendEmailOutput
	wrote, err := awscall.Run(ctx, s.cfg.Timeout, func(ctx context.Context) error {
		var err error
		out, err = s.cfg.Client.SendEmail(ctx, in, func(o *sesv2.Options) { o.RetryMaxAttempts = 1 })
		return err
	})
	if err != nil {
		return provider.Receipt{}, s.classify(err, wrote, address, template)
	}
	return provider.Receipt{ID: aws.ToString(out.MessageId)}, nil
}

// classify turns SES's answer into a failure outcome. The provider contract
// table in docs/providers.md lists the same rows.
func (s *Sender) classify(err error, wrote bool, address, template string) error {
	a, ok := awscall.AnswerOf(err)
	if !ok {
		return awscall.TransportFailure(Name, err, wrote, address)
	}
	e, handled := awscall.ErrorOf(Name, err, a, address)
	if handled != nil {
		return handled
	}
	lower := strings.ToLower(a.Message)
	permanent := func(class failure.Class) error { return failure.WithClass(failure.Permanent(e), class) }
	switch {
	case a.Code == "MessageRejected" && strings.Contains(lower, "suppress"):
		return permanent(failure.ClassSuppressed)
	case a.Code == "MessageRejected" && strings.Contains(lower, "not verified"):
		return permanent(failure.ClassConfig) // an unverified sender (or, in the sandbox, recipient)
	case a.Code == "MessageRejected", a.Code == "BadRequestException":
		return permanent(failure.ClassRejected)
	case a.Code == "MailFromDomainNotVerifiedException":
		return permanent(failure.ClassConfig)
	case a.Code == "NotFoundException", a.Status == 404:
		e.Message = fmt.Sprintf("no template %q, identity or configuration set; deploy the template (templates/email) or fix the stage's SES settings, then redrive", template)
		return permanent(failure.ClassConfig)
	case a.Code == "TooManyRequestsException", a.Code == "Throttling", a.Code == "ThrottlingException":
		return failure.WithClass(e, failure.ClassThrottled)
	case a.Code == "LimitExceededException" && (strings.Contains(lower, "daily") || strings.Contains(lower, "quota")):
		return failure.Retryable(failure.WithClass(e, failure.ClassThrottled), s.cfg.LongBackoff)
	case a.Code == "LimitExceededException":
		return failure.WithClass(e, failure.ClassThrottled)
	case a.Code == "SendingPausedException", a.Code == "AccountSuspendedException":
		return failure.Retryable(failure.WithClass(e, failure.ClassPaused), s.cfg.LongBackoff)
	case a.Code == "AccessDeniedException", a.Code == "AccessDenied", a.Code == "UnauthorizedOperation":
		// The consumer may not send as this identity, with this template or
		// through this configuration set: the stage is wrong, not the
		// address.
		return permanent(failure.ClassConfig)
	case awscall.CredentialCodes[a.Code]:
		return failure.WithClass(e, failure.ClassAWS)
	}
	return awscall.ByStatus(e)
}

// ValidEmail reports whether s is an e-mail address SES can send to: ASCII
// (an internationalised domain in its punycode form), one '@', a local part
// of at most 64 bytes without a leading, trailing or doubled dot, a dotted
// domain of letters, digits and hyphens, at most 254 bytes in all. It is
// deliberately narrower than RFC 5322: a display name, a comment, a quoted
// local part or a raw IP address is refused.
func ValidEmail(s string) bool {
	if len(s) > 254 || strings.Count(s, "@") != 1 {
		return false
	}
	local, domain, _ := strings.Cut(s, "@")
	if local == "" || len(local) > 64 || strings.HasPrefix(local, ".") || strings.HasSuffix(local, ".") || strings.Contains(local, "..") {
		return false
	}
	for _, r := range local {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".!#$%&'*+/=?^_`{|}~-", r)) {
			return false
		}
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
