package deployment_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/consumer"
	"github.com/nudgehq/nudge/pkg/deployment"
	"github.com/nudgehq/nudge/pkg/enqueue"
)

func TestStagesAreValid(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"dev", "prod"} {
		s, err := deployment.Named(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := deployment.Named("staging"); err == nil || !strings.Contains(err.Error(), "use dev or prod") {
		t.Fatalf("unknown stage: %v", err)
	}
}

func TestValidateRefusesBrokenRelations(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string]func(*deployment.Stage){
		"budget above maxReceiveCount": func(s *deployment.Stage) { s.MaxAttempts = 11 },
		"timeout not above provider":   func(s *deployment.Stage) { s.ConsumerTimeout = s.ProviderTimeout },
		"visibility above 12h":         func(s *deployment.Stage) { s.ConsumerTimeout = 3 * time.Hour },
		"enqueue past the schedule":    func(s *deployment.Stage) { s.EnqueueTimeout = 2 * time.Minute },
		"zero shards":                  func(s *deployment.Stage) { s.Shards = 0 },
		"big batch without window":     func(s *deployment.Stage) { s.BatchSize, s.BatchingWindow = 100, 0 },
		"concurrency below 2":          func(s *deployment.Stage) { s.MaxConcurrency = 1 },
	} {
		s := deployment.Dev()
		edit(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestFunctionsAcceptTheEnvironmentTheStageGives: the environment the stack
// (and `nudge local`) sets is read by each function into the stage's values.
func TestFunctionsAcceptTheEnvironmentTheStageGives(t *testing.T) {
	t.Parallel()
	s := deployment.Prod()
	r := deployment.Resources{Table: "t", WorkQueueURL: "https://sqs/w", DLQURL: "https://sqs/d", WebhookURL: "https://hooks.example/x", WebhookSecret: "s"}
	getenv := func(env map[string]string) func(string) string { return func(k string) string { return env[k] } }
	c, err := consumer.SettingsFromEnv(getenv(s.ConsumerEnv(r)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Visibility != s.Visibility() || c.MaxAttempts != s.MaxAttempts || c.MaxReceiveCount != s.MaxReceiveCount || c.Shards != s.Shards || c.ProviderTimeout != s.ProviderTimeout {
		t.Fatalf("consumer settings %+v do not match stage %+v", c, s)
	}
	e, err := enqueue.SettingsFromEnv(getenv(s.EnqueueEnv(r)))
	if err != nil || e.Shards != s.Shards || e.Table != "t" {
		t.Fatalf("enqueue settings %+v, %v", e, err)
	}
	if got := deployment.EnvList(map[string]string{"B": "2", "A": "1"}); strings.Join(got, " ") != "A=1 B=2" {
		t.Fatalf("EnvList = %v", got)
	}
}
