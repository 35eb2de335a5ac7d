package consumer

import (
	"fmt"
	"strconv"
	"time"
)

// Settings are the consumer function's deployment settings, read from its
// environment. The CDK stack and the local runner set the same variables.
type Settings struct {
	Table           string        // NUDGE_TABLE: the ledger table. Required.
	QueueURL        string        // NUDGE_QUEUE_URL: the work queue. Required.
	DLQURL          string        // NUDGE_DLQ_URL: the dead-letter queue. Required.
	WebhookURL      string        // NUDGE_WEBHOOK_URL: the webhook provider's endpoint. Required.
	WebhookSecret   string        // NUDGE_WEBHOOK_SECRET: its signing secret. Required.
	ProviderTimeout time.Duration // NUDGE_PROVIDER_TIMEOUT: one send's limit. Default 10s.
	MaxAttempts     int           // NUDGE_MAX_ATTEMPTS: the attempt budget. Default 5.
	MaxReceiveCount int           // NUDGE_MAX_RECEIVE_COUNT: the queue's redrive maxReceiveCount. Default 10.
	Visibility      time.Duration // NUDGE_VISIBILITY_TIMEOUT: the queue's visibility timeout. Default 180s.
	Concurrency     int           // NUDGE_CONCURRENCY: records in flight per invocation. Default 10.
	CutoffMargin    time.Duration // NUDGE_CUTOFF_MARGIN: stop starting records this long before the deadline. Default ProviderTimeout + 2s.
	BackoffBase     time.Duration // NUDGE_BACKOFF_BASE: default 15s.
	BackoffCap      time.Duration // NUDGE_BACKOFF_CAP: default 6h.
}

// SettingsFromEnv reads Settings with getenv (os.Getenv in the function).
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	s := Settings{
		Table: getenv("NUDGE_TABLE"), QueueURL: getenv("NUDGE_QUEUE_URL"), DLQURL: getenv("NUDGE_DLQ_URL"),
		WebhookURL: getenv("NUDGE_WEBHOOK_URL"), WebhookSecret: getenv("NUDGE_WEBHOOK_SECRET"),
	}
	for name, v := range map[string]string{"NUDGE_TABLE": s.Table, "NUDGE_QUEUE_URL": s.QueueURL, "NUDGE_DLQ_URL": s.DLQURL,
		"NUDGE_WEBHOOK_URL": s.WebhookURL, "NUDGE_WEBHOOK_SECRET": s.WebhookSecret} {
		if v == "" {
			return s, fmt.Errorf("consumer: %s is not set; the stack (or `nudge local`) sets it", name)
		}
	}
	var err error
	durations := []struct {
		name string
		dst  *time.Duration
		def  time.Duration
	}{
		{"NUDGE_PROVIDER_TIMEOUT", &s.ProviderTimeout, 10 * time.Second},
		{"NUDGE_VISIBILITY_TIMEOUT", &s.Visibility, 180 * time.Second},
		{"NUDGE_BACKOFF_BASE", &s.BackoffBase, 15 * time.Second},
		{"NUDGE_BACKOFF_CAP", &s.BackoffCap, 6 * time.Hour},
		{"NUDGE_CUTOFF_MARGIN", &s.CutoffMargin, 0},
	}
	for _, d := range durations {
		if *d.dst, err = duration(getenv, d.name, d.def); err != nil {
			return s, err
		}
	}
	if s.CutoffMargin == 0 {
		s.CutoffMargin = s.ProviderTimeout + 2*time.Second
	}
	ints := []struct {
		name string
		dst  *int
		def  int
	}{
		{"NUDGE_MAX_ATTEMPTS", &s.MaxAttempts, 5},
		{"NUDGE_MAX_RECEIVE_COUNT", &s.MaxReceiveCount, 10},
		{"NUDGE_CONCURRENCY", &s.Concurrency, 10},
	}
	for _, n := range ints {
		v := getenv(n.name)
		if v == "" {
			*n.dst = n.def
			continue
		}
		if *n.dst, err = strconv.Atoi(v); err != nil || *n.dst < 1 {
			return s, fmt.Errorf("consumer: %s=%q is not a positive whole number", n.name, v)
		}
	}
	if s.Visibility <= s.ProviderTimeout {
		return s, fmt.Errorf("consumer: NUDGE_VISIBILITY_TIMEOUT %v must exceed NUDGE_PROVIDER_TIMEOUT %v (AWS recommends 6× the function timeout)", s.Visibility, s.ProviderTimeout)
	}
	return s, nil
}

func duration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("consumer: %s=%q is not a positive duration such as 30s or 6h", name, v)
	}
	return d, nil
}
