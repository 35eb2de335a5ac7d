package deployment_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/envelope"
)

// TestPacedQueuesAreSizedForTheirRate: a paced provider's queue takes the
// batch one instance sends at its share of the rate in the time an
// invocation has to wait for turns, at most 10; the figures by hand:
// window = 30 s − 11 s to send − 12 s cut-off margin = 7 s.
func TestPacedQueuesAreSizedForTheirRate(t *testing.T) {
	t.Parallel()
	s := deployment.Prod()
	s.Providers = []string{"webhook", "ses", "sns"}
	if w := s.PaceWindow(); w != 7*time.Second {
		t.Fatalf("pace window %v, want 7s", w)
	}
	for _, tc := range []struct {
		rate     float64
		batch    int
		interval time.Duration
	}{
		{14, 10, 142857142 * time.Nanosecond}, // SES's default: 7/s per instance, 49 in 7 s, capped at 10
		{2, 7, time.Second},                   // 1/s per instance: 7 in 7 s
		{1, 3, 2 * time.Second},               // 3.5 in 7 s: 3 whole
		{2.0 / 7, 1, 7 * time.Second},         // one in exactly 7 s (a product whole on paper)
	} {
		s.Rates = map[string]float64{"ses": tc.rate}
		q, err := s.ProviderQueue("ses")
		if err != nil {
			t.Fatalf("rate %v: %v", tc.rate, err)
		}
		want := deployment.ProviderQueue{Provider: "ses", Rate: tc.rate, Name: "nudge-prod-work-ses", MaxConcurrency: 2, BatchSize: tc.batch}
		if q != want || q.Interval() != tc.interval {
			t.Errorf("rate %v: %+v every %v; want %+v every %v", tc.rate, q, q.Interval(), want, tc.interval)
		}
	}
	s.Rates = map[string]float64{"sns": 50}
	if _, err := s.ProviderQueue("webhook"); !errors.Is(err, deployment.ErrDefaultQueue) {
		t.Fatalf("the webhook, which has no rate: %v", err)
	}
	var names []string
	for _, q := range s.ProviderQueues() {
		names = append(names, q.Name)
	}
	if !reflect.DeepEqual(names, []string{"nudge-prod-work-ses", "nudge-prod-work-sns"}) {
		t.Fatalf("paced queues %v", names)
	}
	if got := s.WorkQueueNames(); !reflect.DeepEqual(got, []string{"nudge-prod-work", "nudge-prod-work-ses", "nudge-prod-work-sns"}) {
		t.Fatalf("work queues %v", got)
	}
}

// TestAStageRefusesARateTooLowForOneRecordPerInvocation: the error names
// the rate, the timeout and the fixes.
func TestAStageRefusesARateTooLowForOneRecordPerInvocation(t *testing.T) {
	t.Parallel()
	s := deployment.Dev()
	s.Providers = []string{"webhook", "ses"}
	s.ProviderSettings = map[string]string{"sesFrom": "reminders@example.com"}
	s.Rates = map[string]float64{"ses": 0.2}
	err := s.Validate()
	for _, want := range []string{"provider ses's rate 0.2 per second", "one send every 10s", "the 30s consumer timeout", "7s to wait for turns",
		"raise the rate to 0.286 or more", "raise the consumer timeout to 33s or more (-c consumerTimeout=33)", "-c rates=ses=0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v; want it to say %q", err, want)
		}
	}
	// The fixes it names work.
	for _, fix := range []func(*deployment.Stage){
		func(s *deployment.Stage) { s.Rates["ses"] = 0.286 },
		func(s *deployment.Stage) { s.ConsumerTimeout = 33 * time.Second },
		func(s *deployment.Stage) { s.Rates["ses"] = 0 },
	} {
		f := s
		f.Rates = map[string]float64{"ses": 0.2}
		fix(&f)
		if err := f.Validate(); err != nil {
			t.Errorf("after the fix: %v", err)
		}
	}
	for _, n := range []int{1, 1001} {
		p := deployment.Dev()
		p.PacedConcurrency = n
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "paced concurrency") {
			t.Errorf("paced concurrency %d: %v", n, err)
		}
	}
}

// TestProducersAreToldThePacedQueues: the consumer and the enqueue get
// NUDGE_PROVIDER_QUEUES, which parses back into the routes; the DLQ's
// redrive-allow policy names every work queue.
func TestProducersAreToldThePacedQueues(t *testing.T) {
	t.Parallel()
	s := deployment.Prod()
	s.Providers = []string{"webhook", "ses"}
	res := deployment.Resources{Table: "t", WorkQueueURL: "https://sqs/w", DLQURL: "https://sqs/d",
		ProviderQueueURLs: map[string]string{"ses": "https://sqs/w-ses"}}
	for name, env := range map[string]map[string]string{"consumer": s.ConsumerEnv(res), "enqueue": s.EnqueueEnv(res)} {
		r, err := envelope.ParseRoutes(env["NUDGE_QUEUE_URL"], env[envelope.EnvProviderQueues])
		if err != nil || r.For("ses") != "https://sqs/w-ses" || r.For("webhook") != "https://sqs/w" {
			t.Errorf("%s: routes %+v, %v", name, r, err)
		}
	}
	if got := s.ConsumerEnv(res)["NUDGE_PACED_CONCURRENCY"]; got != "2" {
		t.Errorf("NUDGE_PACED_CONCURRENCY %q", got)
	}
	attrs := s.DLQAttributes("arn:w", "arn:w-ses")
	if attrs["RedriveAllowPolicy"] != `{"redrivePermission":"byQueue","sourceQueueArns":["arn:w","arn:w-ses"]}` {
		t.Fatalf("RedriveAllowPolicy %s", attrs["RedriveAllowPolicy"])
	}
}

// TestEveryProviderButTheDefaultHasItsOwnQueue: isolation. The webhook
// (the registry's default) keeps the default work queue; SNS, with no
// rate, gets a queue of its own with the default's mapping (batch,
// concurrency, no rate); SES its paced one. A provider that hangs holds
// only its own mapping's instances. No change of the stage's list but
// taking a provider's rate away, or no longer running it, removes a
// queue.
func TestEveryProviderButTheDefaultHasItsOwnQueue(t *testing.T) {
	t.Parallel()
	s := deployment.Prod()
	s.Providers = []string{"webhook", "ses", "sns"}
	if s.DefaultProvider() != "webhook" {
		t.Fatalf("default provider %q, want webhook", s.DefaultProvider())
	}
	if _, err := s.ProviderQueue("webhook"); !errors.Is(err, deployment.ErrDefaultQueue) {
		t.Fatalf("the webhook: %v; want the default queue", err)
	}
	q, err := s.ProviderQueue("sns")
	want := deployment.ProviderQueue{Provider: "sns", Name: "nudge-prod-work-sns", MaxConcurrency: s.MaxConcurrency, BatchSize: s.BatchSize}
	if err != nil || q != want || q.Interval() != 0 {
		t.Fatalf("sns: %+v, %v; want %+v", q, err, want)
	}
	queues := func(s deployment.Stage) []string { return s.WorkQueueNames() }
	all := []string{"nudge-prod-work", "nudge-prod-work-ses", "nudge-prod-work-sns"}
	if got := queues(s); !reflect.DeepEqual(got, all) {
		t.Fatalf("work queues %v, want %v", got, all)
	}
	for _, c := range []struct {
		name      string
		providers []string
		rates     map[string]float64
		def       string
		want      []string
	}{
		{"another order", []string{"sns", "ses", "webhook"}, nil, "webhook", []string{"nudge-prod-work", "nudge-prod-work-sns", "nudge-prod-work-ses"}},
		{"without the webhook", []string{"ses", "sns"}, nil, "", all},
		{"the webhook paced", []string{"webhook", "ses", "sns"}, map[string]float64{"webhook": 50}, "", append(all[:3:3], "nudge-prod-work-webhook")},
		{"every provider paced", []string{"webhook", "ses", "sns"}, map[string]float64{"webhook": 50, "sns": 30}, "", append(all[:3:3], "nudge-prod-work-webhook")},
	} {
		s := deployment.Prod()
		s.Providers, s.Rates = c.providers, c.rates
		if got := s.DefaultProvider(); got != c.def {
			t.Errorf("%s: default provider %q, want %q", c.name, got, c.def)
		}
		got := queues(s)
		slices.Sort(got)
		w := slices.Clone(c.want)
		slices.Sort(w)
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s: work queues %v, want %v", c.name, got, w)
		}
		// Every queue the stage started with is still there (none removed).
		for _, q := range all {
			if !slices.Contains(got, q) {
				t.Errorf("%s: the deploy would remove %s", c.name, q)
			}
		}
	}
}
