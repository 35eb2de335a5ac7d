package consumer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/consumer"
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
		{map[string]string{"NUDGE_WEBHOOK_SECRET": ""}, "exactly one of NUDGE_WEBHOOK_SECRET"},
		{map[string]string{"NUDGE_WEBHOOK_SECRET_ID": "nudge/webhook"}, "exactly one of NUDGE_WEBHOOK_SECRET"},
	} {
		if _, err := consumer.SettingsFromEnv(env(tc.kv)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.kv, err, tc.want)
		}
	}
}
