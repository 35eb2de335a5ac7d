package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
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

// SESAPI is the part of the SES v2 client the SES provider uses.
type SESAPI interface {
	SendEmail(ctx context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error)
}

var _ SESAPI = (*sesv2.Client)(nil)

// SESConfig configures an SES provider.
type SESConfig struct {
	// Client sends the e-mails. Required.
	Client SESAPI
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

// SES sends e-mail through Amazon SES (API v2) with stored templates: the
// delivery's templateRef names the template (after TemplatePrefix), the
// reminder's metadata is its data, and the delivery's address receives it.
//
// SES has no idempotency key: a send that fails after its request was
// written may have gone out, and is Ambiguous. The consumer's policy for
// the provider decides whether that is retried or reviewed.
type SES struct{ cfg SESConfig }

// NewSES validates cfg and applies its defaults.
func NewSES(cfg SESConfig) (*SES, error) {
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
	return &SES{cfg: cfg}, nil
}

// MaxTemplateName is the longest SES template name.
const MaxTemplateName = 64

var sesTemplateName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// TemplateName returns the SES template a templateRef names, and whether
// it is a valid name.
func (s *SES) TemplateName(ref string) (string, bool) {
	name := s.cfg.TemplatePrefix + ref
	return name, len(name) <= MaxTemplateName && sesTemplateName.MatchString(ref)
}

// ValidTemplateRef reports whether ref can name an SES template after a
// prefix of prefixLen bytes.
func ValidTemplateRef(ref string, prefixLen int) bool {
	return ref != "" && prefixLen+len(ref) <= MaxTemplateName && sesTemplateName.MatchString(ref)
}

// Send sends req's e-mail.
func (s *SES) Send(ctx context.Context, req Request, key string) (Receipt, error) {
	if req.Address == "" {
		return Receipt{}, failure.WithClass(failure.Permanent(errors.New("ses: the delivery has no recipient address; give deliveries[].address at intake")), failure.ClassConfig)
	}
	name, ok := s.TemplateName(req.TemplateRef)
	if !ok {
		return Receipt{}, failure.WithClass(failure.Permanent(fmt.Errorf("ses: templateRef %q cannot name an SES template", req.TemplateRef)), failure.ClassConfig)
	}
	data := req.TemplateData
	if data == nil {
		data = map[string]string{}
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return Receipt{}, failure.Permanent(err)
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
	in.EmailTags = []types.MessageTag{
		{Name: aws.String(TagReminder), Value: aws.String(TagValue(req.ReminderID))},
		{Name: aws.String(TagAttempt), Value: aws.String(strconv.Itoa(req.Attempt))},
	}
	if s.cfg.FromIdentityARN != "" {
		in.FromEmailAddressIdentityArn = aws.String(s.cfg.FromIdentityARN)
	}
	if s.cfg.ConfigurationSet != "" {
		in.ConfigurationSetName = aws.String(s.cfg.ConfigurationSet)
	}
	var out *sesv2.SendEmailOutput
	wrote, err := awsCall(ctx, s.cfg.Timeout, func(ctx context.Context) error {
		var err error
		out, err = s.cfg.Client.SendEmail(ctx, in, func(o *sesv2.Options) { o.RetryMaxAttempts = 1 })
		return err
	})
	if err != nil {
		return Receipt{}, s.classify(err, wrote, req.Address, name)
	}
	return Receipt{ID: aws.ToString(out.MessageId)}, nil
}

// classify turns SES's answer into a failure outcome. The provider contract
// table in docs/providers.md lists the same rows.
func (s *SES) classify(err error, wrote bool, address, template string) error {
	a, ok := answerOf(err)
	if !ok {
		return transportFailure("ses", err, wrote, address)
	}
	e, handled := answerFrom("ses", err, a, address)
	if handled != nil {
		return handled
	}
	lower := strings.ToLower(a.message)
	permanent := func(class failure.Class) error { return failure.WithClass(failure.Permanent(e), class) }
	switch {
	case a.code == "MessageRejected" && strings.Contains(lower, "suppress"):
		return permanent(failure.ClassSuppressed)
	case a.code == "MessageRejected" && strings.Contains(lower, "not verified"):
		return permanent(failure.ClassConfig) // an unverified sender (or, in the sandbox, recipient)
	case a.code == "MessageRejected", a.code == "BadRequestException":
		return permanent(failure.ClassRejected)
	case a.code == "MailFromDomainNotVerifiedException":
		return permanent(failure.ClassConfig)
	case a.code == "NotFoundException", a.status == 404:
		e.Message = fmt.Sprintf("no template %q, identity or configuration set; deploy the template (templates/email) or fix the stage's SES settings, then redrive", template)
		return permanent(failure.ClassConfig)
	case a.code == "TooManyRequestsException", a.code == "Throttling", a.code == "ThrottlingException":
		return failure.WithClass(e, failure.ClassThrottled)
	case a.code == "LimitExceededException" && (strings.Contains(lower, "daily") || strings.Contains(lower, "quota")):
		return failure.Retryable(failure.WithClass(e, failure.ClassThrottled), s.cfg.LongBackoff)
	case a.code == "LimitExceededException":
		return failure.WithClass(e, failure.ClassThrottled)
	case a.code == "SendingPausedException", a.code == "AccountSuspendedException":
		return failure.Retryable(failure.WithClass(e, failure.ClassPaused), s.cfg.LongBackoff)
	case a.code == "AccessDeniedException", a.code == "AccessDenied", a.code == "UnauthorizedOperation":
		// The consumer may not send as this identity, with this template or
		// through this configuration set: the stage is wrong, not the
		// address.
		return permanent(failure.ClassConfig)
	case credentialCodes[a.code]:
		return failure.WithClass(e, failure.ClassAWS)
	}
	return byStatus(e)
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

// SESTemplateAPI is the part of the SES v2 client that reads templates.
type SESTemplateAPI interface {
	GetEmailTemplate(ctx context.Context, in *sesv2.GetEmailTemplateInput, optFns ...func(*sesv2.Options)) (*sesv2.GetEmailTemplateOutput, error)
}

var _ SESTemplateAPI = (*sesv2.Client)(nil)

// SESTemplates tells whether a templateRef names a deployed SES template
// and which data it needs (schedule.Templates), asking SES once per
// template for Remember (SES throttles its template reads to about one a
// second: an import of thousands of reminders makes one call per template,
// found or not). It suits one short-lived process, such as the operator
// CLI's import; the intake, whose warm instances would each ask for every
// name a caller gives, uses DeployedTemplates, which knows the stack's
// templates without a call.
type SESTemplates struct {
	// Client reads templates. Required.
	Client SESTemplateAPI
	// Prefix is the stage's template prefix (SESConfig.TemplatePrefix).
	Prefix string
	// Remember is how long an answer is kept, found or not: a long-lived
	// intake (a warm Lambda instance) sees a template deployed, changed or
	// removed after it asked within this long. Default 5 minutes.
	Remember time.Duration
	// Now tells the time. Default clock.Real{}.Now.
	Now func() time.Time

	mu    sync.Mutex
	known map[string]templateAnswer
}

// readTemplate asks SES for the template name: the variables it renders,
// or false if SES has no template of that name.
func readTemplate(ctx context.Context, c SESTemplateAPI, name string) ([]string, bool, error) {
	out, err := c.GetEmailTemplate(ctx, &sesv2.GetEmailTemplateInput{TemplateName: aws.String(name)})
	switch a, answered := answerOf(err); {
	case err == nil:
		var tpl EmailTemplate
		if c := out.TemplateContent; c != nil {
			tpl = EmailTemplate{Name: name, Subject: aws.ToString(c.Subject), HTML: aws.ToString(c.Html), Text: aws.ToString(c.Text)}
		}
		return tpl.Variables(), true, nil
	case answered && (a.code == "NotFoundException" || a.status == 404):
		return nil, false, nil
	}
	return nil, false, err
}

type templateAnswer struct {
	vars   []string
	exists bool
	at     time.Time
}

// TemplateVariables returns the data the template ref names needs (its
// required variables), and false if no such template is deployed.
func (t *SESTemplates) TemplateVariables(ctx context.Context, ref string) ([]string, bool, error) {
	now := clock.Real{}.Now
	if t.Now != nil {
		now = t.Now
	}
	remember := cmp.Or(t.Remember, 5*time.Minute)
	t.mu.Lock()
	ans, known := t.known[ref]
	t.mu.Unlock()
	if known && now().Sub(ans.at) < remember {
		return ans.vars, ans.exists, nil
	}
	vars, exists, err := readTemplate(ctx, t.Client, t.Prefix+ref)
	if err != nil {
		return nil, false, err // not remembered: the next reminder asks again
	}
	ans = templateAnswer{vars: vars, exists: exists, at: now()}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.known == nil {
		t.known = map[string]templateAnswer{}
	}
	t.known[ref] = ans
	return ans.vars, ans.exists, nil
}
