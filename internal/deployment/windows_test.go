package deployment_test

import (
	"strings"
	"testing"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/pkg/intake"
)

// TestTheStagesSendWindowsReachTheIntakeAndTheRecord: a stage's default
// send windows are the intake's (read by its settings) and recorded by the
// enqueue for the CLI; a stage without them sets none for the intake and
// records none (so that removing them reaches the CLI); one that cannot
// be read is refused with the fix.
func TestTheStagesSendWindowsReachTheIntakeAndTheRecord(t *testing.T) {
	t.Parallel()
	r := deployment.Resources{Table: "t", WorkQueueURL: "https://sqs/w"}
	s := deployment.Dev()
	if _, ok := s.IntakeEnv(r)[deployment.EnvSendWindows]; ok {
		t.Errorf("a stage with no send windows sets %s", deployment.EnvSendWindows)
	}
	// Removing the windows must reach the record too: a record keeps a
	// variable the enqueue does not give it, so none is recorded as "".
	if env := s.EnqueueEnv(r); !strings.Contains(env[enqueue.EnvRecorded], deployment.EnvSendWindows) {
		t.Errorf("a stage with no send windows records %q: an earlier deploy's windows would stay", env[enqueue.EnvRecorded])
	} else if v, ok := env[deployment.EnvSendWindows]; !ok || v != "" {
		t.Errorf("a stage with no send windows records %s=%q", deployment.EnvSendWindows, v)
	}
	s.SendWindows = "sms=08:00-21:00 mon-sat; email=07:00-22:00"
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	env := s.IntakeEnv(r)
	got, err := intake.SettingsFromEnv(func(k string) string { return env[k] })
	if err != nil || len(got.Windows) != 2 || got.Windows["sms"].String() != "08:00-21:00 mon-sat" {
		t.Fatalf("the intake reads %v, %v", got.Windows, err)
	}
	env = s.EnqueueEnv(r)
	rec, err := enqueue.SettingsFromEnv(func(k string) string { return env[k] })
	if err != nil || rec.ProviderEnv[deployment.EnvSendWindows] != s.SendWindows {
		t.Fatalf("the enqueue records %v, %v", rec.ProviderEnv, err)
	}
	for bad, want := range map[string]string{
		"sms=8am-9pm":                     `sms: send window "8am-9pm": "8am" is not a time of day`,
		"email=07:00-22:00 Europe/Berlin": "email: send window \"07:00-22:00 Europe/Berlin\": \"Europe/Berlin\" is a time zone",
		"fax=08:00-21:00":                 `"fax" is not a known channel`,
	} {
		s.SendWindows = bad
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "sendWindows=") {
			t.Errorf("%q: %v; want the stage refused saying %q, with the form", bad, err, want)
		}
	}
	bad := map[string]string{"NUDGE_TABLE": "t", deployment.EnvSendWindows: "fax=08:00-21:00"}
	if _, err := intake.SettingsFromEnv(func(k string) string { return bad[k] }); err == nil || !strings.Contains(err.Error(), "NUDGE_SEND_WINDOWS") {
		t.Errorf("the intake took %v: %v", bad, err)
	}
}
