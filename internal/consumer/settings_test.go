package consumer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/pkg/provider"
)

func env(kv map[string]string) func(string) string {
	base := map[string]string{"NUDGE_TABLE": "t", "NUDGE_QUEUE_URL": "q", "NUDGE_DLQ_URL": "d", "NUDGE_WEBHOOK_URL": "https://x", "NUDGE_WEBHOOK_SECRET": "s"}
	for k, v := range kv {
		base[k] = v
	}
	return func(k string) string { return base[k] }
}

func TestSettingsDefaults(t *testing.T) {
	t.Parallel()
	s, err := consumer.SettingsFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxAttempts != 5 || s.MaxReceiveCount != 10 || s.Visibility != 180*time.Second || s.CutoffMargin != 12*time.Second || s.BackoffCap != 6*time.Hour {
		t.Fatalf("defaults %+v", s)
	}
	if s.CircuitFailures != 5 || s.CircuitCoolDown != 30*time.Second || s.CircuitMaxCoolDown != 5*time.Minute {
		t.Fatalf("circuit defaults %d, %v, %v; want 5, 30s, 5m", s.CircuitFailures, s.CircuitCoolDown, s.CircuitMaxCoolDown)
	}
}

func TestSettingsErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kv   map[string]string
		want string
	}{
		{map[string]string{"NUDGE_TABLE": ""}, "NUDGE_TABLE is not set"},
		{map[string]string{"NUDGE_MAX_ATTEMPTS": "0"}, "NUDGE_MAX_ATTEMPTS"},
		{map[string]string{"NUDGE_BACKOFF_CAP": "forever"}, "NUDGE_BACKOFF_CAP"},
		{map[string]string{"NUDGE_VISIBILITY_TIMEOUT": "5s"}, "must exceed"},
		{map[string]string{"NUDGE_CIRCUIT_FAILURES": "0"}, `NUDGE_CIRCUIT_FAILURES="0" is not a positive whole number`},
		{map[string]string{"NUDGE_CIRCUIT_COOLDOWN": "500ms"}, "NUDGE_CIRCUIT_COOLDOWN 500ms is below 1s"},
		{map[string]string{"NUDGE_CIRCUIT_MAX_COOLDOWN": "20s"}, "NUDGE_CIRCUIT_MAX_COOLDOWN 20s must be between"},
		{map[string]string{"NUDGE_CIRCUIT_MAX_COOLDOWN": "1h"}, "SQS's longest delay, 15m"},
		{map[string]string{"NUDGE_WEBHOOK_SECRET": ""}, "exactly one of NUDGE_WEBHOOK_SECRET"},
		{map[string]string{"NUDGE_WEBHOOK_SECRET_ID": "nudge/webhook"}, "exactly one of NUDGE_WEBHOOK_SECRET"},
	} {
		if _, err := consumer.SettingsFromEnv(env(tc.kv)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.kv, err, tc.want)
		}
	}
}

func TestSettingsProviders(t *testing.T) {
	t.Parallel()
	s, err := consumer.SettingsFromEnv(env(map[string]string{"NUDGE_PROVIDERS": "webhook, ses,sns", "NUDGE_SES_FROM": "reminders@example.com",
		"NUDGE_SNS_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:nudge", "NUDGE_SNS_RATE": "50", "NUDGE_SES_AMBIGUOUS": "retry", "NUDGE_PACED_CONCURRENCY": "5",
		"NUDGE_PROVIDER_QUEUES": "ses=https://sqs/work-ses"}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Providers, ",") != "webhook,ses,sns" || s.PacedConcurrency != 5 || s.Routes.For("ses") != "https://sqs/work-ses" || s.Routes.For("sns") != s.QueueURL {
		t.Fatalf("settings %+v", s)
	}
	if s.Rates["ses"] != 14 || s.Rates["sns"] != 50 || s.Rates["webhook"] != 0 {
		t.Fatalf("rates %v; want ses's default 14, sns 50 as set, webhook none", s.Rates)
	}
	if s.Ambiguous["ses"] != provider.AmbiguousRetry || s.Ambiguous["sns"] != provider.AmbiguousRetry || s.Ambiguous["webhook"] != provider.AmbiguousRetry {
		t.Fatalf("policies %v", s.Ambiguous)
	}
	d, err := consumer.SettingsFromEnv(env(map[string]string{"NUDGE_PROVIDERS": "ses", "NUDGE_SES_FROM": "a@example.com", "NUDGE_WEBHOOK_URL": "", "NUDGE_WEBHOOK_SECRET": ""}))
	if err != nil {
		t.Fatalf("ses alone needs no webhook settings: %v", err)
	}
	if d.Ambiguous["ses"] != provider.AmbiguousRecord || d.RecordWaits["ses"].Window != 15*time.Minute || d.RecordWaits["ses"].MaxWait != 6*time.Hour {
		t.Fatalf("ses's default policy %q, wait %+v; want record, 15m, 6h", d.Ambiguous["ses"], d.RecordWaits["ses"])
	}
	// The stage's wait, and record refused for a provider that reports nothing.
	d, err = consumer.SettingsFromEnv(env(map[string]string{"NUDGE_PROVIDERS": "ses", "NUDGE_SES_FROM": "a@example.com",
		"NUDGE_SES_RECORD_WINDOW": "5m", "NUDGE_SES_RECORD_MAX_WAIT": "1h"}))
	if err != nil || d.RecordWaits["ses"].Window != 5*time.Minute || d.RecordWaits["ses"].MaxWait != time.Hour {
		t.Fatalf("the stage's wait: %+v, %v", d.RecordWaits["ses"], err)
	}
	for _, bad := range []map[string]string{
		{"NUDGE_PROVIDERS": "ses", "NUDGE_SES_FROM": "a@example.com", "NUDGE_SES_RECORD_WINDOW": "soon"},
		{"NUDGE_PROVIDERS": "ses", "NUDGE_SES_FROM": "a@example.com", "NUDGE_SES_RECORD_WINDOW": "1h", "NUDGE_SES_RECORD_MAX_WAIT": "30m"},
		{"NUDGE_PROVIDERS": "sns", "NUDGE_SNS_TOPIC_ARN": "arn:x", "NUDGE_SNS_AMBIGUOUS": "record"},
	} {
		if _, err := consumer.SettingsFromEnv(env(bad)); err == nil {
			t.Errorf("%v was taken", bad)
		}
	}
	if w, _ := consumer.SettingsFromEnv(env(nil)); strings.Join(w.Providers, ",") != "webhook" {
		t.Fatalf("without NUDGE_PROVIDERS the providers are %v, want the webhook alone", w.Providers)
	}
}

func TestSettingsProviderErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kv   map[string]string
		want string
	}{
		{map[string]string{"NUDGE_PROVIDERS": "webhook,pigeon"}, `NUDGE_PROVIDERS names "pigeon"`},
		{map[string]string{"NUDGE_PROVIDERS": "ses"}, "NUDGE_SES_FROM is not set"},
		{map[string]string{"NUDGE_PROVIDERS": "sns"}, "NUDGE_SNS_TOPIC_ARN is not set"},
		{map[string]string{"NUDGE_PROVIDERS": "sns", "NUDGE_SNS_TOPIC_ARN": "arn:x", "NUDGE_SNS_RATE": "-1"}, "NUDGE_SNS_RATE"},
		{map[string]string{"NUDGE_PROVIDERS": "sns", "NUDGE_SNS_TOPIC_ARN": "arn:x", "NUDGE_SNS_AMBIGUOUS": "sometimes"}, "NUDGE_SNS_AMBIGUOUS"},
		{map[string]string{"NUDGE_PACED_CONCURRENCY": "0"}, "NUDGE_PACED_CONCURRENCY"},
		{map[string]string{"NUDGE_PROVIDER_QUEUES": "ses"}, "NUDGE_PROVIDER_QUEUES: \"ses\" is not provider=queueURL"},
	} {
		_, err := consumer.SettingsFromEnv(env(tc.kv))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error naming %q", tc.kv, err, tc.want)
		}
	}
}
