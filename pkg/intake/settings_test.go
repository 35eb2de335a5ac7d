package intake_test

import (
	"strings"
	"testing"

	"github.com/nudgehq/nudge/pkg/intake"
)

// TestTheSendWindowsSettingIsReadByChannel: NUDGE_SEND_WINDOWS gives each
// channel it names its default window; unset, none; one that cannot be
// read stops the intake at start, naming the variable and the fix.
func TestTheSendWindowsSettingIsReadByChannel(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NUDGE_TABLE": "t", "NUDGE_SEND_WINDOWS": "sms=08:00-21:00 mon-sat; email=07:00-22:00"}
	getenv := func(k string) string { return env[k] }
	s, err := intake.SettingsFromEnv(getenv)
	if err != nil || len(s.Windows) != 2 || s.Windows["sms"].String() != "08:00-21:00 mon-sat" || s.Windows["email"].String() != "07:00-22:00" {
		t.Fatalf("settings %v, %v", s.Windows, err)
	}
	delete(env, "NUDGE_SEND_WINDOWS")
	if s, err := intake.SettingsFromEnv(getenv); err != nil || s.Windows != nil {
		t.Fatalf("unset: %v, %v; want none", s.Windows, err)
	}
	for bad, fix := range map[string]string{
		"sms=8am-9pm":                      "give HH:MM",
		"fax=08:00-21:00":                  "use one of email, sms, push, voice, webhook",
		"sms=08:00-21:00, email=07:00":     "separate them by ;",
		"sms=08:00-21:00 America/New_York": "leave the zone out",
	} {
		env["NUDGE_SEND_WINDOWS"] = bad
		if _, err := intake.SettingsFromEnv(getenv); err == nil || !strings.Contains(err.Error(), "NUDGE_SEND_WINDOWS") || !strings.Contains(err.Error(), fix) {
			t.Errorf("%q: %v; want an error naming NUDGE_SEND_WINDOWS and the fix %q", bad, err, fix)
		}
	}
}
