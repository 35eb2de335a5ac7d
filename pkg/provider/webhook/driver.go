package webhook

import (
	"context"
	"errors"
	"fmt"

	"github.com/nudgehq/nudge/internal/envconfig"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/provider"
)

// Name is the webhook provider's name, as deliveries give it.
const Name = "webhook"

// The consumer's variables of the webhook provider.
const (
	// EnvURL is the endpoint the deliveries are POSTed to.
	EnvURL = "NUDGE_WEBHOOK_URL"
	// EnvSecret is the signing secret itself (the local system's way), and
	// EnvSecretID the Secrets Manager secret (name or ARN) holding it, read
	// once at start (the stack's way). Exactly one is set.
	EnvSecret   = "NUDGE_WEBHOOK_SECRET"
	EnvSecretID = "NUDGE_WEBHOOK_SECRET_ID"
)

// The stack's parameters of the webhook provider: the receiver's URL, the
// Secrets Manager secret holding the signing secret, and the secret's
// customer managed key, if any.
const (
	ParamURL       = "WebhookUrl"
	ParamSecret    = "WebhookSigningRef"
	ParamSecretKey = "WebhookSigningKmsArn"
)

// The resources a deployment gives the webhook provider
// (provider.Deployment.Resources).
const (
	// ResourceURL is the receiver's URL (the stack's WebhookUrl parameter).
	ResourceURL = "url"
	// ResourceSecretID is the signing secret's name or ARN in Secrets
	// Manager; ResourceSecret the secret itself, locally.
	ResourceSecretID = "secretId"
	ResourceSecret   = "secret"
)

// Driver declares the webhook provider: a signed HTTPS POST of the
// delivery's identifiers and references, which the receiver verifies and
// deduplicates by its Idempotency-Key (docs/webhook.md).
var Driver = provider.Driver{
	Name:  Name,
	Title: "the webhook",
	Contract: provider.Contract{
		Deduplicates: "the receiver, by the Idempotency-Key header (the delivery key), for as long as it keeps the keys",
		Ambiguous:    provider.AmbiguousRetry,
		Classification: []provider.Row{
			{Answer: "429, with or without Retry-After", Kind: failure.KindRetry, Class: failure.ClassThrottled},
			{Answer: "5xx", Kind: failure.KindRetry, Class: failure.ClassServer},
			{Answer: "other 4xx", Kind: failure.KindPermanent, Class: failure.ClassRejected},
			{Answer: "3xx, a redirect (not followed)", Kind: failure.KindPermanent, Class: failure.ClassConfig},
			{Answer: "no answer in the timeout, after the request was written", Kind: failure.KindAmbiguous, Class: failure.ClassTimeout},
			{Answer: "connection dropped after the request was written", Kind: failure.KindAmbiguous, Class: failure.ClassNetwork},
			{Answer: "connection refused, before the request was written", Kind: failure.KindRetry, Class: failure.ClassNetwork},
		},
	},
	Env: func(d provider.Deployment) map[provider.Function]map[string]string {
		env := map[string]string{EnvURL: d.Resources[ResourceURL]}
		if id := d.Resources[ResourceSecretID]; id != "" {
			env[EnvSecretID] = id
		}
		if s := d.Resources[ResourceSecret]; s != "" {
			env[EnvSecret] = s
		}
		return map[provider.Function]map[string]string{provider.Consumer: env}
	},
	Example: map[string]string{ResourceURL: "https://hooks.invalid/", ResourceSecret: "-"},
	CheckEnv: func(fn provider.Function, getenv func(string) string) error {
		if fn != provider.Consumer {
			return nil
		}
		r := &envconfig.Reader{Getenv: getenv, Who: string(fn)}
		r.Required(EnvURL)
		if err := r.Err(); err != nil {
			return err
		}
		if (getenv(EnvSecret) == "") == (getenv(EnvSecretID) == "") {
			return fmt.Errorf("consumer: set exactly one of %s (the signing secret) and %s (a Secrets Manager secret holding it)", EnvSecret, EnvSecretID)
		}
		return nil
	},
	Intake: provider.IntakeRules{Address: provider.NoAddress},
	Build: func(ctx context.Context, env provider.Env) (provider.Provider, error) {
		secret := env.Getenv(EnvSecret)
		if id := env.Getenv(EnvSecretID); id != "" {
			if env.ReadSecret == nil {
				return nil, errors.New("consumer: the webhook's secret is in Secrets Manager, and nothing reads it")
			}
			var err error
			if secret, err = env.ReadSecret(ctx, provider.Secret{ID: id, Setting: ParamSecret, KeySetting: ParamSecretKey}); err != nil {
				return nil, fmt.Errorf("consumer: %w", err)
			}
		}
		return New(Config{URL: env.Getenv(EnvURL), Secret: []byte(secret), Timeout: env.Timeout})
	},
	StandIn: provider.StandIn{Kind: provider.SinkStandIn,
		Resources: func(l provider.Local) map[string]string {
			return map[string]string{ResourceURL: l.URL, ResourceSecret: l.Secret}
		},
		Evidence: "the sink's acceptances (deduplicated by Idempotency-Key)"},
}
