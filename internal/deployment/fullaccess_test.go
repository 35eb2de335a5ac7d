package deployment_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/pkg/intake"
)

// TestTheStageNamesTheIntakesFullAccessPrincipals: the stage's full-access
// principals reach the intake's environment, which reads them back; one
// that is not an IAM role's or user's ARN fails the stage's check, naming
// the setting.
func TestTheStageNamesTheIntakesFullAccessPrincipals(t *testing.T) {
	t.Parallel()
	r := deployment.Resources{Table: "t"}
	s := deployment.Dev()
	if _, ok := s.IntakeEnv(r)[intake.FullAccessSetting]; ok {
		t.Errorf("a stage naming no full-access principal sets %s", intake.FullAccessSetting)
	}
	s.IntakeFullAccess = []string{"arn:aws:iam::123456789012:role/Support", "arn:aws:iam::123456789012:user/ops"}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	env := s.IntakeEnv(r)
	got, err := intake.SettingsFromEnv(func(k string) string { return env[k] })
	if err != nil || !slices.Equal(got.FullAccessPrincipals, s.IntakeFullAccess) {
		t.Fatalf("the intake reads %v, %v; want %v", got.FullAccessPrincipals, err, s.IntakeFullAccess)
	}
	s.IntakeFullAccess = []string{"arn:aws:sts::123456789012:assumed-role/Support/ana"}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), intake.FullAccessSetting) {
		t.Errorf("a session's ARN: %v; want the stage refused, naming %s", err, intake.FullAccessSetting)
	}
}
