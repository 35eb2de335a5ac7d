package intake_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// TestTheFullAccessSettingTakesRoleAndUserARNsOnly: the setting is a
// comma-separated list of IAM role and user ARNs (paths, other partitions);
// anything else (a session's ARN, a wildcard, the account's root, a group,
// a bare name) stops the intake at start with the setting and the fix, as
// does the handler's own configuration.
func TestTheFullAccessSettingTakesRoleAndUserARNsOnly(t *testing.T) {
	led, err := ledger.NewMemory(ledger.MemoryConfig{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	store, err := schedule.New(schedule.Config{Ledger: led})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := intake.New(intake.Config{Store: store, FullAccess: []string{"arn:aws:iam::123456789012:role/Support"}}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NUDGE_TABLE": "t"}
	getenv := func(k string) string { return env[k] }
	good := []string{"arn:aws:iam::123456789012:role/Support", "arn:aws:iam::123456789012:role/tools/ops/Support",
		"arn:aws:iam::123456789012:user/ana.ops@example.com",
		"arn:aws-cn:iam::123456789012:user/division/alice"}
	env[intake.FullAccessSetting] = " " + strings.Join(good, " , ") + ", "
	s, err := intake.SettingsFromEnv(getenv)
	if err != nil || !slices.Equal(s.FullAccessPrincipals, good) {
		t.Fatalf("settings %v, %v; want %v", s.FullAccessPrincipals, err, good)
	}
	delete(env, intake.FullAccessSetting)
	if s, err := intake.SettingsFromEnv(getenv); err != nil || s.FullAccessPrincipals != nil {
		t.Fatalf("unset: %v, %v; want none", s.FullAccessPrincipals, err)
	}
	for bad, fix := range map[string]string{
		"arn:aws:sts::123456789012:assumed-role/Support/ana":        "not an assumed-role session's",
		"arn:aws:iam::123456789012:role/*":                          "arn:aws:iam::ACCOUNT:role/NAME",
		"arn:aws:iam::123456789012:root":                            "arn:aws:iam::ACCOUNT:user/NAME",
		"arn:aws:iam::123456789012:group/ops":                       "comma-separated",
		"Support":                                                   "IAM role or user ARNs",
		"arn:aws:iam::12345:role/Support":                           "IAM role or user ARNs",
		"arn:aws:iam::123456789012:role/" + strings.Repeat("x", 65): "IAM role or user ARNs",
	} {
		env[intake.FullAccessSetting] = good[0] + "," + bad
		_, err := intake.SettingsFromEnv(getenv)
		if err == nil || !strings.Contains(err.Error(), intake.FullAccessSetting) || !strings.Contains(err.Error(), "not an IAM role's or user's ARN") ||
			!strings.Contains(err.Error(), fix) {
			t.Errorf("%q: %v; want an error naming %s and the fix %q", bad, err, intake.FullAccessSetting, fix)
		}
		if _, err := intake.New(intake.Config{Store: store, FullAccess: []string{bad}}); err == nil || !strings.Contains(err.Error(), fix) {
			t.Errorf("intake.New took %q: %v", bad, err)
		}
	}
}
