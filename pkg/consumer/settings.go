package consumer

import (
	"fmt"
	"time"

	"github.com/nudgehq/nudge/pkg/envconfig"
)

// Settings are the consumer function's deployment settings, read from its
// environment. The CDK stack and the local runner set the same variables.
type Settings struct {
	Table           string        // NUDGE_TABLE: the ledger table. Required.
	QueueURL        string        // NUDGE_QUEUE_URL: the work queue. Required.
	DLQURL          string        // NUDGE_DLQ_URL: the dead-letter queue. Required.
	WebhookURL      string        // NUDGE_WEBHOOK_URL: the webhook provider's endpoint. Required.
	WebhookSecret   string        // NUDGE_WEBHOOK_SECRET: its signing secret; or
	WebhookSecretID string        // NUDGE_WEBHOOK_SECRET_ID: the Secrets Manager secret (name or ARN) holding it, read once at start. One of the two is required.
	ProviderTimeout time.Duration // NUDGE_PROVIDER_TIMEOUT: one send's limit. Default 10s.
	MaxAttempts     int           // NUDGE_MAX_ATTEMPTS: the attempt budget. Default 5.
	MaxReceiveCount int           // NUDGE_MAX_RECEIVE_COUNT: the queue's redrive maxReceiveCount. Default 10.
	Visibility      time.Duration // NUDGE_VISIBILITY_TIMEOUT: the queue's visibility timeout. Default 180s.
	Concurrency     int           // NUDGE_CONCURRENCY: records in flight per invocation. Default 10.
	CutoffMargin    time.Duration // NUDGE_CUTOFF_MARGIN: stop starting records this long before the deadline. Default ProviderTimeout + 2s.
	BackoffBase     time.Duration // NUDGE_BACKOFF_BASE: default 15s.
	BackoffCap      time.Duration // NUDGE_BACKOFF_CAP: default 6h.
	Shards          int           // NUDGE_SHARDS: due index shards (ledger.Config.Shards). Default 8.
	Lookahead       time.Duration // NUDGE_LOOKAHEAD: hand-off lookahead (ledger.Config.Lookahead). Default 15m.
}

// SettingsFromEnv reads Settings with getenv (os.Getenv in the function).
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	r := &envconfig.Reader{Getenv: getenv, Who: "consumer"}
	s := Settings{
		Table: r.Required("NUDGE_TABLE"), QueueURL: r.Required("NUDGE_QUEUE_URL"), DLQURL: r.Required("NUDGE_DLQ_URL"),
		WebhookURL: r.Required("NUDGE_WEBHOOK_URL"), WebhookSecret: getenv("NUDGE_WEBHOOK_SECRET"), WebhookSecretID: getenv("NUDGE_WEBHOOK_SECRET_ID"),
		ProviderTimeout: r.Duration("NUDGE_PROVIDER_TIMEOUT", 10*time.Second),
		Visibility:      r.Duration("NUDGE_VISIBILITY_TIMEOUT", 180*time.Second),
		BackoffBase:     r.Duration("NUDGE_BACKOFF_BASE", 15*time.Second),
		BackoffCap:      r.Duration("NUDGE_BACKOFF_CAP", 6*time.Hour),
		CutoffMargin:    r.Duration("NUDGE_CUTOFF_MARGIN", 0),
		MaxAttempts:     r.Int("NUDGE_MAX_ATTEMPTS", 5),
		MaxReceiveCount: r.Int("NUDGE_MAX_RECEIVE_COUNT", 10),
		Concurrency:     r.Int("NUDGE_CONCURRENCY", 10),
		Shards:          r.Int("NUDGE_SHARDS", 8),
		Lookahead:       r.Duration("NUDGE_LOOKAHEAD", 15*time.Minute),
	}
	if err := r.Err(); err != nil {
		return s, err
	}
	if (s.WebhookSecret == "") == (s.WebhookSecretID == "") {
		return s, fmt.Errorf("consumer: set exactly one of NUDGE_WEBHOOK_SECRET (the signing secret) and NUDGE_WEBHOOK_SECRET_ID (a Secrets Manager secret holding it)")
	}
	if s.CutoffMargin == 0 {
		s.CutoffMargin = s.ProviderTimeout + 2*time.Second
	}
	if s.Visibility <= s.ProviderTimeout {
		return s, fmt.Errorf("consumer: NUDGE_VISIBILITY_TIMEOUT %v must exceed NUDGE_PROVIDER_TIMEOUT %v (AWS recommends 6× the function timeout)", s.Visibility, s.ProviderTimeout)
	}
	return s, nil
}
