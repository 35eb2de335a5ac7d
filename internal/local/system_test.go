package local_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/provider/ses"
)

// TestIntakeEnvIsTheStacks: the intake gets the stage's intake settings,
// its timeout and memory, and the endpoints it is given.
func TestIntakeEnvIsTheStacks(t *testing.T) {
	s := &local.System{Stage: deployment.Dev(), SESEndpoint: "http://127.0.0.1:3",
		Resources: local.Provisioned{Table: "nudge-dev-ledger"}}
	env, err := s.Env("intake", local.Endpoints{DynamoDB: "http://127.0.0.1:1", SQS: "http://127.0.0.1:2"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"NUDGE_TABLE=nudge-dev-ledger",
		"AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:1",
		"AWS_LAMBDA_FUNCTION_NAME=nudge-dev-intake",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=10",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
	} {
		if !slices.Contains(env, want) {
			t.Errorf("the intake's environment has no %s:\n%s", want, strings.Join(env, "\n"))
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "NUDGE_SHARDS=") {
			t.Errorf("the intake is given %s; it reads the table's registry, as in the stack", kv)
		}
	}
	// With ses, the templates the system created in the SES stand-in, as
	// the stack passes those it deploys.
	email := *s
	email.Stage.Providers, email.Stage.ProviderSettings = []string{"webhook", "ses"}, map[string]string{ses.SettingFrom: "reminders@nudge.local"}
	email.Templates = []ses.Template{{Name: "renewal-notice", Subject: "{{plan}} renews", Text: "On {{renewsOn}}."}}
	env, err = email.Env("intake", local.Endpoints{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := `NUDGE_SES_TEMPLATES={"renewal-notice":["plan","renewsOn"]}`; !slices.Contains(env, want) {
		t.Errorf("the intake's environment has no %s:\n%s", want, strings.Join(env, "\n"))
	}
	if _, err := s.Env("intakes", local.Endpoints{}, 0); err == nil || !strings.Contains(err.Error(), "intake") {
		t.Errorf("an unknown function: %v; want an error naming the functions", err)
	}
	if _, err := s.StartIntake(context.Background(), "build/local/intake/bootstrap", 0, local.Endpoints{}, nil); err == nil {
		t.Error("StartIntake with 0 instances succeeded")
	}
}
