package deployment_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/feedback"
	"github.com/nudgehq/nudge/internal/provider/ses"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/provider/webhook"
)

func TestStagesAreValid(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"dev", "prod"} {
		s, err := deployment.Named(name)
		if err != nil {
			t.Fatal(err)
		}
		if s.RequireAlarmTarget {
			// Prod's alarms must reach someone: it is valid once told whom.
			if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "would notify nobody") {
				t.Errorf("%s without an alarm target: %v", name, err)
			}
			s.AlarmEmail = "oncall@example.com"
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
	for name, tc := range map[string]struct {
		edit func(*deployment.Stage)
		want string
	}{
		"budget above maxReceiveCount":  {func(s *deployment.Stage) { s.MaxAttempts = 11 }, "maxReceiveCount 10 must be at least the attempt budget 11 plus 3"},
		"no receive margin":             {func(s *deployment.Stage) { s.MaxAttempts = 8 }, "maxReceiveCount 10 must be at least the attempt budget 8 plus 3"},
		"timeout not above provider":    {func(s *deployment.Stage) { s.ConsumerTimeout = s.ProviderTimeout }, "leaves 0s in which records may start"},
		"consumer can never send (11s)": {func(s *deployment.Stage) { s.ConsumerTimeout = 11 * time.Second }, "raise the consumer timeout to 22s or more"},
		"consumer can never send (13s)": {func(s *deployment.Stage) { s.ConsumerTimeout = 13 * time.Second }, "a function timeout of 13s leaves 1s in which records may start"},
		"start window under a send":     {func(s *deployment.Stage) { s.ConsumerTimeout = 21 * time.Second }, "it must leave at least one provider timeout"},
		"visibility above 12h":          {func(s *deployment.Stage) { s.ConsumerTimeout = 3 * time.Hour }, "above SQS's 12 h"},
		"window beyond the visibility":  {func(s *deployment.Stage) { s.BatchingWindow = 151 * time.Second }, "does not span the 2m31s batching window"},
		"enqueue past the schedule":     {func(s *deployment.Stage) { s.EnqueueTimeout = time.Minute }, "not below the schedule's 1m0s period"},
		"enqueue without a budget":      {func(s *deployment.Stage) { s.EnqueueTimeout = 7 * time.Second }, "raise the enqueue timeout to 8s or more"},
		"zero shards":                   {func(s *deployment.Stage) { s.Shards = 0 }, "0 shards"},
		"big batch without window":      {func(s *deployment.Stage) { s.BatchSize, s.BatchingWindow = 100, 0 }, "needs a batching window"},
		"batch beyond what can start":   {func(s *deployment.Stage) { s.BatchSize, s.BatchingWindow = 100, 5*time.Second }, "starts at most 20 while every send takes the 10s provider timeout (2 rounds in the 18s before the cut-off)"},
		"concurrency below 2":           {func(s *deployment.Stage) { s.MaxConcurrency = 1 }, "maximum concurrency 1"},
		"memory above Lambda's limit":   {func(s *deployment.Stage) { s.ConsumerMemoryMB = 10241 }, "function memory 10241 MB (consumer)"},
		"intake memory below Lambda's":  {func(s *deployment.Stage) { s.IntakeMemoryMB = 64 }, "intake memory 64 MB; Lambda allows 128 to 10240"},
		"intake memory above Lambda's":  {func(s *deployment.Stage) { s.IntakeMemoryMB = 10241 }, "intake memory 10241 MB"},
		"intake timeout below 3s":       {func(s *deployment.Stage) { s.IntakeTimeout = 2 * time.Second }, "intake timeout 2s; use 3 s to 15 minutes"},
		"intake timeout above Lambda's": {func(s *deployment.Stage) { s.IntakeTimeout = 16 * time.Minute }, "intake timeout 16m0s"},
		"intake reserving below 0":      {func(s *deployment.Stage) { s.IntakeReservedConcurrency = -1 }, "intake reserved concurrency -1; use 0 (no cap) to 1000"},
		"intake reserving above 1000":   {func(s *deployment.Stage) { s.IntakeReservedConcurrency = 1001 }, "intake reserved concurrency 1001"},
		"feedback timeout below 1s":     {func(s *deployment.Stage) { s.FeedbackTimeout = 0 }, "the feedback function needs a timeout of 1 s to 15 minutes"},
		"feedback memory below 128":     {func(s *deployment.Stage) { s.FeedbackMemoryMB = 64 }, "(it has 30s, 64 MB)"},
		"feedback timeout above Lambda": {func(s *deployment.Stage) { s.FeedbackTimeout = 16 * time.Minute }, "(it has 16m0s, 128 MB)"},
		"feedback without a stage name": {func(s *deployment.Stage) { s.Name = "" }, "feedback: NUDGE_STAGE_NAME is not set"},
	} {
		s := deployment.Dev()
		tc.edit(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", name, err, tc.want)
		}
	}
	// At the limits the relations allow, the stage is valid.
	for name, edit := range map[string]func(*deployment.Stage){
		"start window of one provider timeout": func(s *deployment.Stage) { s.ConsumerTimeout = 22 * time.Second },
		"window the visibility just spans":     func(s *deployment.Stage) { s.BatchingWindow = 150 * time.Second },
		"receive margin of 3":                  func(s *deployment.Stage) { s.MaxAttempts = 7 },
		"enqueue budget of 5s":                 func(s *deployment.Stage) { s.EnqueueTimeout = 8 * time.Second },
		"the most memory Lambda gives":         func(s *deployment.Stage) { s.ConsumerMemoryMB, s.EnqueueMemoryMB = 10240, 10240 },
		"a batch of 100 at 50 at a time":       func(s *deployment.Stage) { s.BatchSize, s.BatchingWindow, s.RecordConcurrency = 100, 5*time.Second, 50 },
		"the least intake Lambda allows": func(s *deployment.Stage) {
			s.IntakeMemoryMB, s.IntakeTimeout, s.IntakeReservedConcurrency = 128, 3*time.Second, 0
		},
		"the most intake Lambda allows": func(s *deployment.Stage) {
			s.IntakeMemoryMB, s.IntakeTimeout, s.IntakeReservedConcurrency = 10240, 15*time.Minute, 1000
		},
	} {
		s := deployment.Dev()
		edit(&s)
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestFunctionsAcceptTheEnvironmentTheStageGives: the environment the stack
// (and `nudge local`) sets is read by each function into the stage's values.
func TestFunctionsAcceptTheEnvironmentTheStageGives(t *testing.T) {
	t.Parallel()
	s := deployment.Prod()
	r := deployment.Resources{Table: "t", WorkQueueURL: "https://sqs/w", DLQURL: "https://sqs/d",
		Providers: map[string]map[string]string{webhook.Name: {webhook.ResourceURL: "https://hooks.example/x", webhook.ResourceSecret: "s"}}}
	getenv := func(env map[string]string) func(string) string { return func(k string) string { return env[k] } }
	c, err := consumer.SettingsFromEnv(getenv(s.ConsumerEnv(r)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Visibility != s.Visibility() || c.MaxAttempts != s.MaxAttempts || c.MaxReceiveCount != s.MaxReceiveCount || c.Shards != s.Shards || c.ProviderTimeout != s.ProviderTimeout || c.Concurrency != s.RecordConcurrency {
		t.Fatalf("consumer settings %+v do not match stage %+v", c, s)
	}
	e, err := enqueue.SettingsFromEnv(getenv(s.EnqueueEnv(r)))
	if err != nil || e.Shards != s.Shards || e.Table != "t" {
		t.Fatalf("enqueue settings %+v, %v", e, err)
	}
	i, err := intake.SettingsFromEnv(getenv(s.IntakeEnv(r)))
	if err != nil || i.Table != "t" || !slices.Equal(i.Providers, s.Providers) || s.IntakeEnv(r)[ses.EnvTemplatePrefix] != "" {
		t.Fatalf("intake settings %+v, %v", i, err)
	}
	email := deployment.Dev()
	email.Providers, email.ProviderSettings = []string{"webhook", "ses"}, map[string]string{ses.SettingFrom: "reminders@mail.example.com"}
	catalog := ses.Catalog{"renewal-notice": {"plan", "renewsOn"}, "plain": {}}
	r.Providers[ses.Name] = map[string]string{ses.ResourceTemplates: catalog.String()}
	ienv := email.IntakeEnv(r)
	got, perr := ses.ParseCatalog(ienv[ses.EnvTemplates])
	if i, err := intake.SettingsFromEnv(getenv(ienv)); err != nil || ienv[ses.EnvTemplatePrefix] != ses.TemplatePrefix("dev") || !slices.Equal(i.Providers, email.Providers) ||
		perr != nil || !reflect.DeepEqual(got, catalog) {
		t.Fatalf("intake settings of a stage running ses %+v, %v; want the templates %v, got %v (%v)", i, err, catalog, got, perr)
	}
	if e, err := enqueue.SettingsFromEnv(getenv(email.EnqueueEnv(r))); err != nil || e.ProviderEnv[ses.EnvTemplatePrefix] != ses.TemplatePrefix("dev") {
		t.Fatalf("the enqueue of a stage running ses records %v (%v); want its template prefix", e.ProviderEnv, err)
	}
	if f, err := feedback.SettingsFromEnv(getenv(email.FeedbackEnv(r))); err != nil || f.Table != "t" || f.Stage != "dev" ||
		ses.ConfigurationSet(f.Stage) != "nudge-dev" {
		t.Fatalf("feedback settings %+v, %v; want the table and the stage whose configuration set it reads", f, err)
	}
	if s.FeedbackMemoryMB != 128 || s.FeedbackTimeout != 30*time.Second {
		t.Fatalf("the feedback function is sized %d MB, %v; want 128 MB, 30 s", s.FeedbackMemoryMB, s.FeedbackTimeout)
	}
	if _, ok := s.IntakeEnv(r)["NUDGE_SHARDS"]; ok {
		t.Error("the intake is given a shard count; it reads the table's registry")
	}
	if got := deployment.EnvList(map[string]string{"B": "2", "A": "1"}); strings.Join(got, " ") != "A=1 B=2" {
		t.Fatalf("EnvList = %v", got)
	}
}

// TestBadConfigurationIsRefusedWithTheFix: configuration that cannot work
// is refused where it is read, by the stack's stage check and by each
// function at start (so Lambda reports an init error, not a silent
// misbehaviour), with a message naming the setting.
func TestBadConfigurationIsRefusedWithTheFix(t *testing.T) {
	t.Parallel()
	r := deployment.Resources{Table: "t", WorkQueueURL: "https://sqs/w", DLQURL: "https://sqs/d",
		Providers: map[string]map[string]string{webhook.Name: {webhook.ResourceURL: "https://hooks.example/x", webhook.ResourceSecret: "s"}}}
	with := func(env map[string]string, kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return env[k]
		}
	}
	dev := deployment.Dev()
	cenv, eenv, ienv := dev.ConsumerEnv(r), dev.EnqueueEnv(r), dev.IntakeEnv(r)
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"consumer: visibility below the provider timeout", func() error {
			_, err := consumer.SettingsFromEnv(with(cenv, "NUDGE_VISIBILITY_TIMEOUT", "5s"))
			return err
		}, "NUDGE_VISIBILITY_TIMEOUT 5s must exceed NUDGE_PROVIDER_TIMEOUT 10s"},
		{"consumer: zero shards", func() error { _, err := consumer.SettingsFromEnv(with(cenv, "NUDGE_SHARDS", "0")); return err }, "NUDGE_SHARDS"},
		{"consumer: missing table", func() error { _, err := consumer.SettingsFromEnv(with(cenv, "NUDGE_TABLE", "")); return err }, "NUDGE_TABLE is not set"},
		{"consumer: missing DLQ", func() error { _, err := consumer.SettingsFromEnv(with(cenv, "NUDGE_DLQ_URL", "")); return err }, "NUDGE_DLQ_URL is not set"},
		{"consumer: unreadable duration", func() error {
			_, err := consumer.SettingsFromEnv(with(cenv, "NUDGE_PROVIDER_TIMEOUT", "ten seconds"))
			return err
		}, "NUDGE_PROVIDER_TIMEOUT"},
		{"enqueue: zero shards", func() error { _, err := enqueue.SettingsFromEnv(with(eenv, "NUDGE_SHARDS", "0")); return err }, "NUDGE_SHARDS"},
		{"enqueue: missing table", func() error { _, err := enqueue.SettingsFromEnv(with(eenv, "NUDGE_TABLE", "")); return err }, "NUDGE_TABLE is not set"},
		{"enqueue: missing queue", func() error { _, err := enqueue.SettingsFromEnv(with(eenv, "NUDGE_QUEUE_URL", "")); return err }, "NUDGE_QUEUE_URL is not set"},
		{"intake: missing table", func() error { _, err := intake.SettingsFromEnv(with(ienv, "NUDGE_TABLE", "")); return err }, "NUDGE_TABLE is not set"},
		{"intake: ses without its templates", func() error {
			_, err := intake.SettingsFromEnv(with(ienv, "NUDGE_PROVIDERS", "webhook,ses"))
			return err
		}, "NUDGE_SES_TEMPLATES is not set"},
		{"intake: an unreadable template list", func() error {
			_, err := intake.SettingsFromEnv(with(ienv, "NUDGE_PROVIDERS", "webhook,ses", "NUDGE_SES_TEMPLATES", "renewal-notice"))
			return err
		}, "NUDGE_SES_TEMPLATES is not the stack's template list"},
		{"intake: unknown provider", func() error {
			_, err := intake.SettingsFromEnv(with(ienv, "NUDGE_PROVIDERS", "webhook,pigeon"))
			return err
		}, `"pigeon"`},
		{"stage: the intake's reading of its environment", func() error { s := deployment.Dev(); s.Providers = []string{"pigeon"}; return s.Validate() }, "intake: NUDGE_PROVIDERS"},
		{"stage: zero shards", func() error { s := deployment.Dev(); s.Shards = 0; return s.Validate() }, "0 shards; use 1 to 1000"},
		{"stage: a provider twice", func() error { s := deployment.Dev(); s.Providers = []string{"webhook", "webhook"}; return s.Validate() }, `provider "webhook" is listed twice`},
		{"consumer: a blank provider", func() error {
			_, err := consumer.SettingsFromEnv(with(cenv, "NUDGE_PROVIDERS", "webhook,"))
			return err
		}, `NUDGE_PROVIDERS names ""`},
		{"stage: consumer timeout not above the provider's", func() error {
			s := deployment.Dev()
			s.ProviderTimeout = s.ConsumerTimeout
			return s.Validate()
		}, "raise the consumer timeout to 1m2s or more, or lower the provider timeout"},
		{"stage: attempts above maxReceiveCount", func() error { s := deployment.Dev(); s.MaxAttempts = 11; return s.Validate() }, "maxReceiveCount 10 must be at least the attempt budget 11"},
		{"consumer: cut-off margin below a send", func() error {
			_, err := consumer.SettingsFromEnv(with(cenv, "NUDGE_CUTOFF_MARGIN", "10s"))
			return err
		}, "NUDGE_CUTOFF_MARGIN 10s is below NUDGE_PROVIDER_TIMEOUT 10s + 1s for the ledger writes after a send + the 1s reserve (12s)"},
		{"consumer: maxReceiveCount without a margin", func() error {
			_, err := consumer.SettingsFromEnv(with(cenv, "NUDGE_MAX_RECEIVE_COUNT", "6"))
			return err
		}, "NUDGE_MAX_RECEIVE_COUNT: the queue's maxReceiveCount 6 must be at least the attempt budget 5 plus 3"},
	} {
		err := tc.err()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		}
	}
}
