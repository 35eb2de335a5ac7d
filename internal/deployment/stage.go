package deployment

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/feedback"
	"github.com/nudgehq/nudge/internal/outcome"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// Stage is one deployment's settings.
type Stage struct {
	// Name is the stage: "dev" or "prod". It names the stack and resources.
	Name string

	// ConsumerMemoryMB and ConsumerTimeout size the consumer function.
	ConsumerMemoryMB int
	ConsumerTimeout  time.Duration
	// EnqueueMemoryMB and EnqueueTimeout size the enqueue function; the
	// enqueue runs every TickPeriod, so its timeout stays under it.
	EnqueueMemoryMB int
	EnqueueTimeout  time.Duration
	// IntakeMemoryMB and IntakeTimeout size the HTTP intake function
	// (functions/intake, behind a function URL). IntakeReservedConcurrency,
	// if above 0, caps its instances: the most requests it serves at once,
	// and so the most DynamoDB writes callers can drive (a request over the
	// cap is refused with 429 by Lambda and may be retried).
	IntakeMemoryMB            int
	IntakeTimeout             time.Duration
	IntakeReservedConcurrency int
	// IntakeFullAccess are the IAM role and user ARNs that act on every
	// reminder through the intake, whoever created it (operators, support
	// tools): the intake's NUDGE_FULL_ACCESS_PRINCIPALS. Every other caller
	// acts on the reminders it created alone. Default none.
	IntakeFullAccess []string
	// OutcomesMemoryMB and OutcomesTimeout size the outcomes function,
	// which reads the ledger's stream and puts the outcome events.
	OutcomesMemoryMB int
	OutcomesTimeout  time.Duration
	// FeedbackMemoryMB and FeedbackTimeout size the feedback function,
	// which records SES's sending events on their deliveries; it is needed
	// only when the stage runs ses (the stack decides).
	FeedbackMemoryMB int
	FeedbackTimeout  time.Duration
	// EventBus is where the outcome events go: "" for the stage's own bus
	// (EventBusName), "default" for the account's default bus.
	EventBus string
	// OperatorsTopicArn, if set, is an existing SNS topic the outcomes
	// function notifies of each escalation (a delivery of a reminder whose
	// late policy is escalate expired unsent): a short message of ids and
	// times, never an address. Default none: the escalation event alone.
	OperatorsTopicArn string

	// BatchSize, BatchingWindow and MaxConcurrency configure the consumer's
	// event source mappings: the default work queue's, and each unpaced
	// provider's own (ProviderQueues), so the consumer may run up to
	// MaxConcurrency instances per such queue at once. The window is 0 in
	// both stages: at low load a record would wait up to the window's
	// length for others to join its batch, which is lateness; under load
	// batches fill without it. The invocations it would save cost at most
	// about $0.21 per million reminders (docs/performance.md, "On time to
	// the second").
	BatchSize      int
	BatchingWindow time.Duration
	MaxConcurrency int
	// PacedConcurrency is the maximum concurrency of each paced provider's
	// event source mapping (ProviderQueues): the instances that share its
	// rate. 2 to 1000; default 2, Lambda's least for SQS, so that each
	// instance's share of the rate is as large as it can be.
	PacedConcurrency int
	// RecordConcurrency is how many records of a batch one invocation runs
	// at once (NUDGE_CONCURRENCY).
	RecordConcurrency int

	// ProviderTimeout bounds one send.
	ProviderTimeout time.Duration
	// MaxAttempts is the consumer's attempt budget; MaxReceiveCount the
	// work queue's redrive threshold, the safety net behind it.
	MaxAttempts     int
	MaxReceiveCount int
	// Shards is the due index shard count (may grow, never shrink).
	Shards int

	// AlarmEmail, if set, is subscribed to the alarm topic.
	AlarmEmail string
	// AlarmTopicArn, if set, is an existing SNS topic the alarms notify
	// instead of one the stack creates.
	AlarmTopicArn string
	// RequireAlarmTarget refuses the stage unless AlarmEmail or
	// AlarmTopicArn is set: its alarms must reach someone. On in prod.
	RequireAlarmTarget bool
	// EnqueueReservedConcurrency, if above 0, reserves that many instances
	// for the enqueue, so that the once-a-minute tick runs even when the
	// account's concurrency is used up. It takes them from the account's
	// unreserved pool (which must keep 100), at no charge. 2 in prod (a run
	// may overlap the next when DynamoDB is slow); 0 in dev, where a new
	// account's pool may be too small to reserve from.
	EnqueueReservedConcurrency int
	// RetainData keeps the table (with deletion protection) and the queues
	// when the stack is deleted. On in prod.
	RetainData bool
	// LogRetentionDays is how long the functions' logs are kept.
	LogRetentionDays int
	// OldestMessageAlarm is the work queue's ApproximateAgeOfOldestMessage
	// alarm threshold. A retried message legitimately waits up to the
	// backoff cap (6 h) between attempts, so the default is 12 h.
	OldestMessageAlarm time.Duration

	// Providers are the providers the stage runs, of the registry's
	// (internal/provider/registry): at least one. The intake refuses a delivery
	// naming another. Default the registry's default alone.
	Providers []string
	// ProviderSettings are the providers' own settings, by the key each
	// driver declares (provider.Driver.Settings; -c key=value), such as a
	// sender address. Default none.
	ProviderSettings map[string]string
	// Rates override providers' sending rates per second, shared by the
	// consumer's instances (0: no limit), by provider; a provider not named
	// keeps its contract's (provider.Contract.Rate: SES's 14, its starting
	// rate out of the sandbox; set it to the account's quota).
	Rates map[string]float64
	// Ambiguous overrides providers' ambiguous policies (retry, review or record),
	// by provider; see provider.Contract.Ambiguous.
	Ambiguous map[string]string
	// SendWindows are the stage's default send windows by channel
	// ("sms=08:00-21:00 mon-sat; email=07:00-22:00":
	// schedule.ParseDefaultWindows), each on the recipient's wall clock,
	// for the deliveries of a reminder with a timeZone that name no window
	// of their own (docs/api.md, "Send windows"). The intake applies them
	// (NUDGE_SEND_WINDOWS); the enqueue records them in the table, for the
	// CLI's creates and imports. Default none (-c sendWindows=…).
	SendWindows string
}

// EnvSendWindows is the intake's and the enqueue's variable of the stage's
// default send windows (Stage.SendWindows).
const EnvSendWindows = "NUDGE_SEND_WINDOWS"

// Dev is the development stage: small, and removable.
func Dev() Stage {
	return Stage{
		Name:             "dev",
		ConsumerMemoryMB: 256, ConsumerTimeout: 30 * time.Second,
		EnqueueMemoryMB: 256, EnqueueTimeout: 55 * time.Second,
		IntakeMemoryMB: 256, IntakeTimeout: 10 * time.Second,
		OutcomesMemoryMB: 128, OutcomesTimeout: 30 * time.Second,
		FeedbackMemoryMB: 128, FeedbackTimeout: 30 * time.Second,
		BatchSize: 10, BatchingWindow: 0, MaxConcurrency: 5, PacedConcurrency: 2, RecordConcurrency: 10,
		ProviderTimeout: 10 * time.Second, MaxAttempts: 5, MaxReceiveCount: 10, Shards: 8,
		LogRetentionDays: 14, OldestMessageAlarm: 12 * time.Hour,
		Providers: []string{registry.Default()},
	}
}

// Prod is the production stage: more concurrency, data retained.
func Prod() Stage {
	s := Dev()
	s.Name = "prod"
	s.ConsumerMemoryMB, s.EnqueueMemoryMB = 512, 512
	s.MaxConcurrency = 50
	s.Shards = 16
	s.RetainData = true
	s.LogRetentionDays = 365
	s.RequireAlarmTarget = true
	s.EnqueueReservedConcurrency = 2
	s.IntakeReservedConcurrency = 20
	return s
}

// Names are the stages Named knows, in the order the CDK app defines them.
var Names = []string{"dev", "prod"}

// Named returns the stage called name.
func Named(name string) (Stage, error) {
	switch name {
	case "dev", "":
		return Dev(), nil
	case "prod":
		return Prod(), nil
	}
	return Stage{}, fmt.Errorf("deployment: unknown stage %q; use dev or prod (cdk deploy -c stage=prod)", name)
}

// Derived settings.
const (
	// TickPeriod is how often EventBridge Scheduler invokes the enqueue.
	TickPeriod = time.Minute
	// TickMaxEventAge and TickRetryAttempts configure the enqueue's
	// asynchronous invocation (Scheduler invokes it asynchronously, so a
	// failed run is retried by Lambda, not by the schedule): a tick is
	// worth nothing once the next has come, because every run reads the
	// whole calendar from its cursors. So a failed run is not retried (the
	// next tick is the retry) and an event that waited a tick is dropped;
	// both go to the enqueue's failure destination, which an alarm watches.
	// Lambda's defaults would retry twice and keep events for 6 hours.
	TickMaxEventAge   = time.Minute
	TickRetryAttempts = 0
	// VisibilityFactor is how many consumer timeouts the work queue's
	// visibility timeout spans; AWS recommends six for an event source
	// mapping, so that a batch retried by Lambda is not redelivered early.
	VisibilityFactor = 6
	// WorkRetention is how long the work queue keeps a message.
	WorkRetention = 4 * 24 * time.Hour
	// DLQRetention is how long the DLQ keeps one: SQS's maximum, 14 days,
	// longer than the work queue's, so a redriven message never outlives it.
	DLQRetention = 14 * 24 * time.Hour
)

// Visibility is the work queue's visibility timeout.
func (s Stage) Visibility() time.Duration { return VisibilityFactor * s.ConsumerTimeout }

// Names of the stage's resources. Fixed names let the DLQ's
// RedriveAllowPolicy name the work queue without a reference cycle.
func (s Stage) TableName() string     { return "nudge-" + s.Name + "-ledger" }
func (s Stage) WorkQueueName() string { return "nudge-" + s.Name + "-work" }
func (s Stage) DLQName() string       { return "nudge-" + s.Name + "-dlq" }

// DefaultBus is the EventBus setting for the account's default bus.
const DefaultBus = "default"

// EventBusName is the bus the outcome events go to: the stage's own
// ("nudge-<stage>") or, when EventBus says so, the account's default.
func (s Stage) EventBusName() string {
	if s.EventBus == DefaultBus {
		return DefaultBus
	}
	return "nudge-" + s.Name
}

// Runs reports whether the stage runs provider p.
func (s Stage) Runs(p string) bool { return slices.Contains(s.Providers, p) }

// Provider returns what the driver of provider p is told of this stage,
// with res the resources made for it (nil before they exist).
func (s Stage) Provider(p string, res map[string]string) provider.Deployment {
	d := provider.Deployment{Stage: s.Name, Settings: map[string]string{}, Resources: res}
	if drv, ok := registry.Lookup(p); ok {
		for _, set := range drv.Settings {
			if v, ok := s.ProviderSettings[set.Key]; ok {
				d.Settings[set.Key] = v
			}
		}
	}
	return d
}

// Rate is the stage's sending rate to provider p: its override, or the
// contract's.
func (s Stage) Rate(p string) float64 {
	if r, ok := s.Rates[p]; ok {
		return r
	}
	d, _ := registry.Lookup(p)
	return d.Contract.Rate
}

// Validate checks the relations the code relies on.
func (s Stage) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("deployment: stage %q: "+format, append([]any{s.Name}, args...)...))
		}
	}
	check(s.Name != "", "no name")
	check(s.ProviderTimeout >= time.Second, "provider timeout %v is below 1 s", s.ProviderTimeout)
	check(s.ConsumerTimeout <= 15*time.Minute && s.EnqueueTimeout <= 15*time.Minute && s.OutcomesTimeout <= 15*time.Minute, "a function timeout above Lambda's 15 minutes")
	check(s.OutcomesTimeout >= time.Second && s.OutcomesMemoryMB >= 128, "the outcomes function needs a timeout of 1 s or more and 128 MB or more (it has %v, %d MB)", s.OutcomesTimeout, s.OutcomesMemoryMB)
	check(s.FeedbackTimeout >= time.Second && s.FeedbackTimeout <= 15*time.Minute && s.FeedbackMemoryMB >= 128 && s.FeedbackMemoryMB <= 10240,
		"the feedback function needs a timeout of 1 s to 15 minutes and 128 to 10240 MB (it has %v, %d MB)", s.FeedbackTimeout, s.FeedbackMemoryMB)
	check(s.EventBus == "" || s.EventBus == DefaultBus, "event bus %q: leave it empty for the stage's own bus, or set default for the account's default bus (-c eventBus=default)", s.EventBus)
	check(s.Visibility() <= 12*time.Hour, "visibility %v above SQS's 12 h", s.Visibility())
	// The event source mapping receives a message up to the batching
	// window before it invokes the function with it, and the message is
	// invisible from that receive: the visibility must span the window and
	// the whole invocation, or a second consumer gets the message while the
	// first still sends it. (It also means the heartbeat never fires in the
	// deployed stack: see docs/architecture.md.)
	check(s.Visibility() >= s.BatchingWindow+s.ConsumerTimeout, "visibility %v (%d × the %v consumer timeout) does not span the %v batching window and the invocation; shorten the window or raise the timeout",
		s.Visibility(), VisibilityFactor, s.ConsumerTimeout, s.BatchingWindow)
	check(s.MaxAttempts >= 1, "attempt budget %d is below 1", s.MaxAttempts)
	if _, err := schedule.ParseDefaultWindows(s.SendWindows); err != nil {
		check(false, "%v (-c sendWindows=\"sms=08:00-21:00 mon-sat; email=07:00-22:00\")", err)
	}
	// The functions' own settings, read from the environment the stack
	// gives them by the functions' own readers, against the stage's
	// timeouts: the relations the code relies on, checked once, here and
	// at each function's start.
	names := registry.Names()
	check(len(s.Providers) > 0, "runs no provider; set providers to one or more of %s (-c providers=%s)", strings.Join(names, ", "), strings.Join(names[:min(2, len(names))], ","))
	placeholders := Resources{Table: "t", WorkQueueURL: "https://sqs/w", DLQURL: "https://sqs/d", Providers: map[string]map[string]string{},
		ProviderQueueURLs: map[string]string{}}
	for _, q := range s.ProviderQueues() {
		placeholders.ProviderQueueURLs[q.Provider] = "https://sqs/" + q.Name
	}
	for i, p := range s.Providers {
		d, ok := registry.Lookup(p)
		check(ok, "provider %q is unknown; the providers are %s", p, strings.Join(names, ", "))
		check(!slices.Contains(s.Providers[:i], p), "provider %q is listed twice; list each provider once", p)
		if ok && d.CheckStage != nil {
			if err := d.CheckStage(s.Provider(p, nil)); err != nil {
				check(false, "%v", err)
			}
		}
		placeholders.Providers[p] = d.Example
	}
	for _, p := range slices.Sorted(maps.Keys(s.Rates)) {
		_, ok := registry.Lookup(p)
		r := s.Rates[p]
		check(ok && (r == 0 || r >= 0.001 && r <= 1e6), "rate %s=%v per second: name a provider and give 0.001 to 1000000 (0: no limit)", p, r)
	}
	for _, p := range slices.Sorted(maps.Keys(s.Ambiguous)) {
		pol := s.Ambiguous[p]
		parsed, err := provider.ParseAmbiguousPolicy(pol)
		d, ok := registry.Lookup(p)
		check(ok && err == nil, "ambiguous policy %s=%q: name a provider and retry, review or record", p, pol)
		if ok && err == nil {
			if err := provider.CheckAmbiguousPolicy(d, parsed); err != nil {
				check(false, "ambiguous policy %s=%q: %v", p, pol, err)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.ProviderSettings)) {
		check(settingOf(k) != "", "setting %q is no provider's; the providers' settings are %s", k, strings.Join(settingKeys(), ", "))
	}
	if cs, err := consumer.SettingsFromEnv(mapEnv(s.ConsumerEnv(placeholders))); err != nil {
		check(false, "%v", err)
	} else if err := cs.CheckTimeout(s.ConsumerTimeout, s.BatchSize); err != nil {
		check(false, "%v", err)
	}
	if es, err := enqueue.SettingsFromEnv(mapEnv(s.EnqueueEnv(placeholders))); err != nil {
		check(false, "%v", err)
	} else if err := es.CheckTimeout(s.EnqueueTimeout, TickPeriod); err != nil {
		check(false, "%v", err)
	}
	check(s.BatchSize >= 1 && s.BatchSize <= 10000, "batch size %d outside 1–10000", s.BatchSize)
	check(s.BatchSize <= 10 || s.BatchingWindow > 0, "a batch size above 10 needs a batching window")
	check(s.BatchingWindow <= 5*time.Minute, "batching window %v above 5 minutes", s.BatchingWindow)
	check(s.MaxConcurrency >= 2 && s.MaxConcurrency <= 1000, "maximum concurrency %d outside 2–1000 (Lambda's limits for SQS)", s.MaxConcurrency)
	check(s.PacedConcurrency >= 2 && s.PacedConcurrency <= 1000, "paced concurrency %d outside 2–1000 (Lambda's limits for SQS; -c pacedConcurrency=2)",
		s.PacedConcurrency)
	if s.PacedConcurrency >= 2 {
		for _, p := range s.Providers {
			if _, err := s.ProviderQueue(p); err != nil && !errors.Is(err, ErrDefaultQueue) {
				check(false, "%v", err)
			}
		}
	}
	check(s.Shards >= 1 && s.Shards <= 1000, "%d shards; use 1 to 1000", s.Shards)
	check(!s.RequireAlarmTarget || s.AlarmEmail != "" || s.AlarmTopicArn != "",
		"its alarms would notify nobody: set an e-mail (-c alarmEmail=oncall@example.com) or an existing SNS topic (-c alarmTopicArn=arn:aws:sns:REGION:ACCOUNT:TOPIC)")
	check(s.AlarmTopicArn == "" || topicARN.MatchString(s.AlarmTopicArn),
		"alarmTopicArn %q is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:TOPIC)", s.AlarmTopicArn)
	check(s.EnqueueReservedConcurrency >= 0 && s.EnqueueReservedConcurrency <= 10, "enqueue reserved concurrency %d; use 0 (none) to 10", s.EnqueueReservedConcurrency)
	check(DLQRetention > WorkRetention, "DLQ retention must exceed the work queue's")
	check(s.ConsumerMemoryMB >= 128 && s.EnqueueMemoryMB >= 128 && s.ConsumerMemoryMB <= 10240 && s.EnqueueMemoryMB <= 10240,
		"function memory %d MB (consumer) and %d MB (enqueue); Lambda allows 128 to 10240", s.ConsumerMemoryMB, s.EnqueueMemoryMB)
	check(s.IntakeMemoryMB >= 128 && s.IntakeMemoryMB <= 10240, "intake memory %d MB; Lambda allows 128 to 10240", s.IntakeMemoryMB)
	check(s.IntakeTimeout >= 3*time.Second && s.IntakeTimeout <= 15*time.Minute, "intake timeout %v; use 3 s to 15 minutes (a caller waits for it)", s.IntakeTimeout)
	check(s.IntakeReservedConcurrency >= 0 && s.IntakeReservedConcurrency <= 1000, "intake reserved concurrency %d; use 0 (no cap) to 1000", s.IntakeReservedConcurrency)
	if _, err := intake.SettingsFromEnv(mapEnv(s.IntakeEnv(placeholders))); err != nil {
		check(false, "%v", err)
	}
	check(s.OperatorsTopicArn == "" || topicARN.MatchString(s.OperatorsTopicArn),
		"operatorsTopicArn %q is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:TOPIC)", s.OperatorsTopicArn)
	if _, err := outcome.SettingsFromEnv(mapEnv(s.OutcomesEnv(placeholders))); err != nil {
		check(false, "%v", err)
	}
	if _, err := feedback.SettingsFromEnv(mapEnv(s.FeedbackEnv(placeholders))); err != nil {
		check(false, "%v", err)
	}
	check(s.LogRetentionDays > 0, "log retention must be set")
	return errors.Join(errs...)
}

// Resources are the names and addresses a function needs.
type Resources struct {
	Table, WorkQueueURL, DLQURL string
	// ProviderQueueURLs are the providers' own work queues, by provider
	// (ProviderQueues): the functions' NUDGE_PROVIDER_QUEUES.
	ProviderQueueURLs map[string]string
	// Providers are what the stack (or the local system) made for each
	// provider the stage runs, by provider, as its driver's Env reads them
	// (provider.Deployment.Resources): an endpoint and its secret's name, a
	// topic's ARN, the templates deployed.
	Providers map[string]map[string]string
}

// providerEnv returns fn's variables of the providers the stage runs: each
// driver's, and for the consumer each provider's rate (where the stage or
// its contract sets one) and ambiguous policy (where the stage overrides
// it).
func (s Stage) providerEnv(fn provider.Function, r Resources) map[string]string {
	env := map[string]string{}
	for _, p := range s.Providers {
		d, ok := registry.Lookup(p)
		if !ok || d.Env == nil {
			continue
		}
		vars := d.Env(s.Provider(p, r.Providers[p]))
		if fn == provider.Enqueue {
			// The enqueue records the intake's checks' variables in the
			// table, for the CLI's intake, told which by name.
			for _, k := range d.Intake.Recorded {
				env[k] = vars[provider.Intake][k]
				env[enqueue.EnvRecorded] = strings.Trim(env[enqueue.EnvRecorded]+","+k, ",")
			}
			continue
		}
		maps.Copy(env, vars[fn])
	}
	if fn == provider.Consumer {
		for _, p := range s.Providers {
			d, _ := registry.Lookup(p)
			if _, set := s.Rates[p]; set || d.Contract.Rate > 0 {
				env[provider.EnvName(p, "RATE")] = strconv.FormatFloat(s.Rate(p), 'f', -1, 64)
			}
		}
		for p, pol := range s.Ambiguous {
			env[provider.EnvName(p, "AMBIGUOUS")] = pol
		}
	}
	return env
}

// settingOf returns the provider whose driver declares setting key, or "".
func settingOf(key string) string {
	for _, d := range registry.All() {
		for _, set := range d.Settings {
			if set.Key == key {
				return d.Name
			}
		}
	}
	return ""
}

// settingKeys are every driver's setting keys.
func settingKeys() []string {
	var keys []string
	for _, d := range registry.All() {
		for _, set := range d.Settings {
			keys = append(keys, set.Key)
		}
	}
	return keys
}

// ConsumerEnv is the consumer function's environment (see
// consumer.Settings).
func (s Stage) ConsumerEnv(r Resources) map[string]string {
	env := map[string]string{
		"NUDGE_TABLE": r.Table, "NUDGE_QUEUE_URL": r.WorkQueueURL, "NUDGE_DLQ_URL": r.DLQURL,
		"NUDGE_PROVIDERS":          strings.Join(s.Providers, ","),
		"NUDGE_PACED_CONCURRENCY":  strconv.Itoa(s.PacedConcurrency),
		"NUDGE_PROVIDER_TIMEOUT":   s.ProviderTimeout.String(),
		"NUDGE_CONCURRENCY":        strconv.Itoa(s.RecordConcurrency),
		"NUDGE_MAX_ATTEMPTS":       strconv.Itoa(s.MaxAttempts),
		"NUDGE_MAX_RECEIVE_COUNT":  strconv.Itoa(s.MaxReceiveCount),
		"NUDGE_VISIBILITY_TIMEOUT": s.Visibility().String(),
		"NUDGE_SHARDS":             strconv.Itoa(s.Shards),
	}
	maps.Copy(env, s.providerEnv(provider.Consumer, r))
	s.routeEnv(env, r)
	return env
}

// EnqueueEnv is the enqueue function's environment (see enqueue.Settings).
func (s Stage) EnqueueEnv(r Resources) map[string]string {
	env := map[string]string{
		"NUDGE_TABLE": r.Table, "NUDGE_QUEUE_URL": r.WorkQueueURL,
		"NUDGE_SHARDS":    strconv.Itoa(s.Shards),
		"NUDGE_PROVIDERS": strings.Join(s.Providers, ","),
	}
	maps.Copy(env, s.providerEnv(provider.Enqueue, r))
	s.routeEnv(env, r)
	// Recorded in the table with the providers' variables, for the CLI's
	// creates: they apply the stage's windows as the intake does. Recorded
	// even when empty: a record keeps a variable it is not given, so a
	// stage whose windows were removed must record "none".
	env[EnvSendWindows] = s.SendWindows
	env[enqueue.EnvRecorded] = strings.Trim(env[enqueue.EnvRecorded]+","+EnvSendWindows, ",")
	return env
}

// IntakeEnv is the HTTP intake function's environment (see
// intake.Settings): the table, and what the stage runs, so that it refuses
// at the door what the stage cannot send; with ses, the templates it
// deploys, so that the intake knows them without asking SES (each driver's
// Env); the work queue, where it hands off what is due within the
// lookahead. No shard count: the intake reads the table's registry.
func (s Stage) IntakeEnv(r Resources) map[string]string {
	env := map[string]string{
		"NUDGE_TABLE":     r.Table,
		"NUDGE_PROVIDERS": strings.Join(s.Providers, ","),
		// The short-notice hand-off's queues (schedule.Config.HandOff).
		"NUDGE_QUEUE_URL": r.WorkQueueURL,
	}
	maps.Copy(env, s.providerEnv(provider.Intake, r))
	s.routeEnv(env, r)
	if len(s.IntakeFullAccess) > 0 {
		env[intake.FullAccessSetting] = strings.Join(s.IntakeFullAccess, ",")
	}
	if s.SendWindows != "" {
		env[EnvSendWindows] = s.SendWindows
	}
	return env
}

// OutcomesEnv is the outcomes function's environment (see
// outcome.Settings): the bus, the stage's name, the ledger table (where it
// takes fallbacks) and, if the stage names one, the operators' topic.
func (s Stage) OutcomesEnv(r Resources) map[string]string {
	env := map[string]string{"NUDGE_EVENT_BUS": s.EventBusName(), "NUDGE_STAGE_NAME": s.Name, "NUDGE_TABLE": r.Table}
	if s.OperatorsTopicArn != "" {
		env["NUDGE_OPERATORS_TOPIC_ARN"] = s.OperatorsTopicArn
	}
	return env
}

// FeedbackEnv is the feedback function's environment (see
// feedback.Settings): the ledger table, and the stage's name, whose
// configuration set's (nudge-<stage>) events it records. The function is
// needed only when the stage runs ses, the one provider that reports
// feedback; the stack decides whether to deploy it.
func (s Stage) FeedbackEnv(r Resources) map[string]string {
	return map[string]string{"NUDGE_TABLE": r.Table, "NUDGE_STAGE_NAME": s.Name}
}

// topicARN matches an SNS topic's ARN (for the alarm topic).
var topicARN = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$`)

func mapEnv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// EnvList renders env as KEY=VALUE lines, sorted.
func EnvList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
