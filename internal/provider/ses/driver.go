package ses

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/nudgehq/nudge/internal/envconfig"
	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// Name is the SES provider's name, as deliveries give it.
const Name = "ses"

// The functions' variables of the SES provider.
const (
	// EnvFrom is the sender address, of a verified SES identity (the
	// consumer's; required).
	EnvFrom = "NUDGE_SES_FROM"
	// EnvIdentityARN is the sender identity's ARN, for sending
	// authorisation (the consumer's; optional).
	EnvIdentityARN = "NUDGE_SES_IDENTITY_ARN"
	// EnvConfigurationSet is the configuration set every e-mail is sent
	// with (the consumer's; optional).
	EnvConfigurationSet = "NUDGE_SES_CONFIGURATION_SET"
	// EnvTemplatePrefix is put before a templateRef to name the SES
	// template (every function's; default "").
	EnvTemplatePrefix = "NUDGE_SES_TEMPLATE_PREFIX"
	// EnvRecordWindow and EnvRecordMaxWait are the consumer's wait for
	// SES's record of an ambiguous send (provider.Reports; Go durations;
	// default the contract's, RecordWindow and RecordMaxWait).
	EnvRecordWindow  = "NUDGE_SES_RECORD_WINDOW"
	EnvRecordMaxWait = "NUDGE_SES_RECORD_MAX_WAIT"
	// EnvTemplates is the stack's catalogue of the templates it deploys
	// (Catalog.String): the intake's, which knows them without asking SES.
	EnvTemplates = "NUDGE_SES_TEMPLATES"
)

// The stage's settings of the SES provider (CDK context keys).
const (
	// SettingFrom is the sender address.
	SettingFrom = "sesFrom"
	// SettingIdentity is the verified identity the sender belongs to (a
	// domain or an address); default the sender's domain.
	SettingIdentity = "sesIdentity"
	// SettingRecordWindow and SettingRecordMaxWait are the stage's wait for
	// SES's record of an ambiguous send (EnvRecordWindow, EnvRecordMaxWait).
	SettingRecordWindow  = "sesRecordWindow"
	SettingRecordMaxWait = "sesRecordMaxWait"
)

// The contract's wait for SES's record of an ambiguous send. AWS documents
// no bound on how late SES's sending events reach EventBridge (AWS services
// deliver events "best effort" or "durable", retried up to 24 hours through
// an EventBridge disruption; docs/providers.md), so the window is chosen:
// a Send event comes within seconds of the send, and 15 minutes is far
// beyond a healthy path; the feedback mark (a later e-mail's event arrived)
// is what says the path is healthy. MaxWait outlasts an outage of a few
// hours of the path before an operator is called.
const (
	RecordWindow  = 15 * time.Minute
	RecordMaxWait = 6 * time.Hour
)

// recordWait reads the stage's wait for SES's record from getenv, the
// contract's where unset, and checks it: a window of 1 minute to 12
// hours, a longest wait of one window to 7 days.
func recordWait(getenv func(string) string) (provider.RecordWait, error) {
	w := provider.RecordWait{Window: RecordWindow, MaxWait: RecordMaxWait}
	for _, v := range []struct {
		name string
		dst  *time.Duration
	}{{EnvRecordWindow, &w.Window}, {EnvRecordMaxWait, &w.MaxWait}} {
		if s := getenv(v.name); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				return w, fmt.Errorf("%s %q is not a duration; give one like 15m or 6h", v.name, s)
			}
			*v.dst = d
		}
	}
	switch {
	case w.Window < 10*time.Second || w.Window > 12*time.Hour:
		return w, fmt.Errorf("%s %v is outside 10s to 12h: SES's record of a send takes seconds to minutes (keep a minute or more in AWS), and a wait is one queue visibility (at most 12 h)",
			EnvRecordWindow, w.Window)
	case w.MaxWait < w.Window || w.MaxWait > 7*24*time.Hour:
		return w, fmt.Errorf("%s %v must be from the window (%v) to 7 days", EnvRecordMaxWait, w.MaxWait, w.Window)
	}
	return w, nil
}

// LocalSender is the sender address of the local stage's e-mail: the SES
// stand-in accepts any.
const LocalSender = "reminders@nudge.local"

// ResourceTemplates names the deployment's catalogue of the templates it
// deploys (Catalog.String), in provider.Deployment.Resources.
const ResourceTemplates = "templates"

// ConfigurationSet is the SES configuration set the stack creates for a
// stage.
func ConfigurationSet(stage string) string { return "nudge-" + stage }

// TemplatePrefix is put before a template's name in SES, so that stages in
// one account keep their own templates.
func TemplatePrefix(stage string) string { return "nudge-" + stage + "-" }

// IdentityName is the identity a deployment's consumer sends as: its
// sesIdentity, or the sender's domain.
func IdentityName(d provider.Deployment) string {
	if id := d.Settings[SettingIdentity]; id != "" {
		return id
	}
	from := d.Settings[SettingFrom]
	if at := strings.LastIndexByte(from, '@'); at >= 0 {
		return from[at+1:]
	}
	return ""
}

// Driver declares the SES provider: e-mail through Amazon SES (API v2)
// with stored templates, rendered with the reminder's metadata, to the
// address the delivery gives (docs/providers.md).
var Driver = provider.Driver{
	Name:  Name,
	Title: "SES",
	Contract: provider.Contract{
		// SES takes no idempotency key, but publishes a Send event for every
		// e-mail it accepted: an e-mail that may have gone out waits for it
		// (sent if it comes, sent again if it does not while later e-mails'
		// do), and is reviewed only when the record cannot settle it.
		Deduplicates: "",
		Ambiguous:    provider.AmbiguousRecord,
		Reports:      &provider.Reports{Record: "SES's record", Window: RecordWindow, MaxWait: RecordMaxWait},
		Rate:         14, // SES's starting sending rate out of the sandbox
		// Per 1,000 e-mails sent (outbound, without attachments): AWS's list
		// price, us-east-1, 2025.
		Price: provider.Price{USD: 0.10, Per: 1000, Unit: "e-mails"},
		Classification: []provider.Row{
			{Answer: "NotFoundException: no such template, identity or configuration set", Kind: failure.KindPermanent, Class: failure.ClassConfig},
			{Answer: "TooManyRequestsException", Kind: failure.KindRetry, Class: failure.ClassThrottled},
			{Answer: "LimitExceededException: maximum sending rate", Kind: failure.KindRetry, Class: failure.ClassThrottled},
			{Answer: "LimitExceededException: daily quota (retried after LongBackoff)", Kind: failure.KindRetry, Class: failure.ClassThrottled},
			{Answer: "MessageRejected", Kind: failure.KindPermanent, Class: failure.ClassRejected},
			{Answer: "MessageRejected: on the suppression list", Kind: failure.KindPermanent, Class: failure.ClassSuppressed},
			{Answer: "MessageRejected: address not verified", Kind: failure.KindPermanent, Class: failure.ClassConfig},
			{Answer: "MailFromDomainNotVerifiedException", Kind: failure.KindPermanent, Class: failure.ClassConfig},
			{Answer: "SendingPausedException (retried after LongBackoff)", Kind: failure.KindRetry, Class: failure.ClassPaused},
			{Answer: "AccountSuspendedException (retried after LongBackoff)", Kind: failure.KindRetry, Class: failure.ClassPaused},
			{Answer: "500 InternalFailure", Kind: failure.KindAmbiguous, Class: failure.ClassServer},
			{Answer: "503 ServiceUnavailable", Kind: failure.KindRetry, Class: failure.ClassServer},
			{Answer: "accepted, the answer lost", Kind: failure.KindAmbiguous, Class: failure.ClassNetwork},
			{Answer: "no answer in the timeout, after the request was written", Kind: failure.KindAmbiguous, Class: failure.ClassTimeout},
		},
	},
	Settings: []provider.Setting{
		{Key: SettingFrom, Doc: "the sender address, of a verified SES identity; required with ses"},
		{Key: SettingIdentity, Doc: "the verified identity the sender belongs to (a domain or an address); default the sender's domain"},
		{Key: SettingRecordWindow, Doc: "how long after an ambiguous send SES's record may take (a Go duration, 10s to 12h; a minute or more in AWS); default 15m"},
		{Key: SettingRecordMaxWait, Doc: "how long an ambiguous send waits for SES's record before review (a Go duration, up to 7 days); default 6h"},
	},
	CheckStage: func(d provider.Deployment) error {
		if !ValidEmail(d.Settings[SettingFrom]) {
			return errors.New("runs ses without a sender: set -c sesFrom=reminders@your-verified-domain (an address of a verified SES identity)")
		}
		if _, err := recordWait(recordEnv(d)); err != nil {
			return fmt.Errorf("-c %s / %s: %w", SettingRecordWindow, SettingRecordMaxWait, err)
		}
		return nil
	},
	RecordWait: recordWait,
	Env: func(d provider.Deployment) map[provider.Function]map[string]string {
		prefix := TemplatePrefix(d.Stage)
		consumer := map[string]string{EnvFrom: d.Settings[SettingFrom], EnvConfigurationSet: ConfigurationSet(d.Stage), EnvTemplatePrefix: prefix}
		get := recordEnv(d)
		for _, k := range []string{EnvRecordWindow, EnvRecordMaxWait} {
			if v := get(k); v != "" {
				consumer[k] = v
			}
		}
		return map[provider.Function]map[string]string{
			provider.Consumer: consumer,
			provider.Intake:   {EnvTemplatePrefix: prefix, EnvTemplates: d.Resources[ResourceTemplates]},
		}
	},
	Example: map[string]string{ResourceTemplates: "{}"},
	CheckEnv: func(fn provider.Function, getenv func(string) string) error {
		switch fn {
		case provider.Consumer:
			r := &envconfig.Reader{Getenv: getenv, Who: string(fn)}
			r.Required(EnvFrom)
			if err := r.Err(); err != nil {
				return err
			}
			if _, err := recordWait(getenv); err != nil {
				return fmt.Errorf("%s: %w", fn, err)
			}
			return nil
		case provider.Intake:
			raw := getenv(EnvTemplates)
			if raw == "" {
				return fmt.Errorf("intake: NUDGE_PROVIDERS names ses, but %s is not set: the stack sets it to the templates it deploys (templates/email); deploy the stack again", EnvTemplates)
			}
			if _, err := ParseCatalog(raw); err != nil {
				return fmt.Errorf("intake: %s is %v; the stack sets it from templates/email", EnvTemplates, err)
			}
		}
		return nil
	},
	Intake: provider.IntakeRules{
		Address:          provider.EmailAddress,
		RendersTemplates: true,
		Recorded:         []string{EnvTemplatePrefix},
		Door:             newDoor,
	},
	Build: func(_ context.Context, env provider.Env) (provider.Provider, error) {
		cfg, ok := env.AWS.(aws.Config)
		if !ok {
			return nil, errors.New("consumer: ses needs the function's AWS configuration")
		}
		return New(Config{Client: sesv2.NewFromConfig(cfg), From: env.Getenv(EnvFrom), FromIdentityARN: env.Getenv(EnvIdentityARN),
			ConfigurationSet: env.Getenv(EnvConfigurationSet), TemplatePrefix: env.Getenv(EnvTemplatePrefix), Timeout: env.Timeout})
	},
	StandIn: provider.StandIn{Kind: provider.EmailStandIn,
		Resources: func(l provider.Local) map[string]string { return map[string]string{ResourceTemplates: l.Templates} },
		// The stand-in for SES's events reports within seconds, and a local
		// run lasts minutes: its wait for the record is as short.
		Settings: map[string]string{SettingFrom: LocalSender, SettingRecordWindow: "10s", SettingRecordMaxWait: "2m"},
		Evidence: "the SES stand-in's store, by the " + HeaderDeliveryKey + " header",
		Faults: map[string]provider.Answer{
			"500":  {Status: 500, Code: "InternalFailure", Message: "internal error"},
			"429":  {Status: 429, Code: "TooManyRequestsException", Message: "Maximum sending rate exceeded."},
			"400":  {Status: 400, Code: "MessageRejected", Message: "Email address is not valid"},
			"down": {Status: 503, Code: "ServiceUnavailable", Message: "Service unavailable"},
		},
		Rate: 20,
	},
}

// recordEnv reads the stage's settings of the wait as the consumer's
// variables.
func recordEnv(d provider.Deployment) func(string) string {
	return func(k string) string {
		switch k {
		case EnvRecordWindow:
			return d.Settings[SettingRecordWindow]
		case EnvRecordMaxWait:
			return d.Settings[SettingRecordMaxWait]
		}
		return ""
	}
}

// door checks a delivery to SES at intake: an e-mail channel, a plain
// address SES can send to, a templateRef that can name a template.
type door struct{ prefix string }

// Templates tells whether a template is deployed and which data it
// renders: DeployedTemplates, TemplateLookup.
type Templates interface {
	// TemplateVariables returns the variables template ref renders (the
	// reminder's metadata must hold each), and false if it is not deployed.
	TemplateVariables(ctx context.Context, ref string) ([]string, bool, error)
}

// templateDoor also checks that the template is deployed, and that the
// reminder gives the data it renders.
type templateDoor struct {
	door
	templates Templates
}

// NewDoor returns the intake's door for SES deliveries of a stage whose
// template prefix is prefix, which asks templates whether a delivery's
// template is deployed. The intake and the CLI get theirs from the
// driver (registry.Doors).
func NewDoor(prefix string, templates Templates) provider.TemplateDoor {
	return templateDoor{door: door{prefix: prefix}, templates: templates}
}

// newDoor makes the intake's door for SES: with the stack's catalogue
// (EnvTemplates, the intake function), deployed templates are known
// without a call and SES is asked about another name at most once a
// minute (DeployedTemplates); without it (the CLI), SES is asked once per
// template (TemplateLookup). Without an AWS configuration no template is
// looked up.
func newDoor(env provider.Env) (provider.Door, error) {
	d := door{prefix: env.Getenv(EnvTemplatePrefix)}
	if env.AWS == nil {
		return d, nil
	}
	cfg, ok := env.AWS.(aws.Config)
	if !ok {
		return nil, fmt.Errorf("ses: the intake's AWS configuration is a %T, not an aws.Config: no template could be checked", env.AWS)
	}
	client := sesv2.NewFromConfig(cfg)
	if raw := env.Getenv(EnvTemplates); raw != "" {
		c, err := ParseCatalog(raw)
		if err != nil {
			return nil, fmt.Errorf("intake: %s is %v; the stack sets it from templates/email", EnvTemplates, err)
		}
		return NewDoor(d.prefix, &DeployedTemplates{Catalog: c, SES: client, Prefix: d.prefix}), nil
	}
	return NewDoor(d.prefix, &TemplateLookup{Client: client, Prefix: d.prefix}), nil
}

// Check checks the channel, the address and the template's name.
func (d door) Check(del provider.Delivery) *provider.Problem {
	switch {
	case del.Channel != "email":
		return &provider.Problem{Field: "channel", Problem: fmt.Sprintf("is %q, but SES sends e-mail", del.Channel), Fix: `use channel "email" with provider "ses"`}
	case del.Address == "":
		return &provider.Problem{Field: "address", Problem: "is missing; SES sends to an address", Fix: "give the recipient's e-mail address"}
	case !ValidEmail(del.Address):
		return &provider.Problem{Field: "address", Problem: "is not an e-mail address SES can send to",
			Fix: "give a plain address like name@example.com (no display name), up to 254 bytes"}
	case !ValidTemplateRef(del.TemplateRef, len(d.prefix)):
		return &provider.Problem{Field: "templateRef", Problem: fmt.Sprintf("%q cannot name an SES template", text.Clip(del.TemplateRef, 43)),
			Fix: fmt.Sprintf("use a template name from templates/email: letters, digits, '-' and '_', at most %d characters", MaxTemplateName-len(d.prefix))}
	}
	return nil
}

// CheckTemplate refuses a template that is not deployed, or whose data
// the reminder lacks: SES accepts such a send and fails it afterwards.
func (d templateDoor) CheckTemplate(ctx context.Context, ref string, metadata map[string]string) (*provider.Problem, error) {
	vars, ok, err := d.templates.TemplateVariables(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("cannot check template %q: %w", ref, err)
	}
	if !ok {
		return &provider.Problem{Field: "templateRef", Problem: fmt.Sprintf("%q is not a deployed SES template", ref),
			Fix: "add it to templates/email and deploy (cdk deploy), or use a deployed template"}, nil
	}
	var missing []string
	for _, v := range vars {
		if _, ok := metadata[v]; !ok {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		return &provider.Problem{Field: "metadata", Problem: fmt.Sprintf("lacks %s, which template %q renders", strings.Join(missing, ", "), ref),
			Fix: "give each as metadata (--meta " + missing[0] + "=…), or use a template that does not need it"}, nil
	}
	return nil, nil
}
