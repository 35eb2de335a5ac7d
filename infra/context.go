package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/provider/registry"
)

// StagesFromContext returns the stages to define. With the "stage" key
// (-c stage=prod), that stage alone, or its error. Without it, every stage
// whose settings hold (dev and prod), each with the overrides the other
// keys give; a stage left out comes back as a note saying why (prod
// without an alarm target), so that `cdk deploy Nudge-dev` works while
// prod is not configured, and `cdk deploy Nudge-prod` says what to set.
// The error is the first stage's if none holds.
func StagesFromContext(get func(key string) any) (stages []deployment.Stage, left []string, err error) {
	if v := get("stage"); v != nil {
		s, err := StageFromContext(get)
		if err != nil {
			return nil, nil, err
		}
		return []deployment.Stage{s}, nil, nil
	}
	var first error
	for _, name := range deployment.Names {
		s, err := StageFromContext(func(key string) any {
			if key == "stage" {
				return name
			}
			return get(key)
		})
		if err != nil {
			first = cmp.Or(first, err)
			left = append(left, fmt.Sprintf("Nudge-%s is left out (cdk deploy Nudge-%s would find no such stack): %v", name, name, err))
			continue
		}
		stages = append(stages, s)
	}
	if len(stages) == 0 {
		return nil, nil, first
	}
	return stages, left, nil
}

// StageFromContext builds the stage named by the "stage" context key (dev
// by default) and applies the overrides the other keys give, then checks
// the relations between them.
//
//	stage             dev | prod
//	consumerMemory    MB          enqueueMemory   MB
//	consumerTimeout   seconds     enqueueTimeout  seconds
//	batchSize         records     batchingWindow  seconds
//	maxConcurrency    instances   maxAttempts     attempts
//	maxReceiveCount   receives    shards          due index shards
//	providerTimeout   seconds     recordConcurrency  records of a batch at once
//	alarmEmail        address     alarmTopicArn   an existing SNS topic
//	enqueueReservedConcurrency    instances reserved for the enqueue (0: none)
//	intakeMemory      MB          intakeTimeout   seconds (the HTTP intake)
//	intakeReservedConcurrency     the most intake instances at once (0: no cap)
//	sendWindows       default send windows by channel: "sms=08:00-21:00 mon-sat; email=07:00-22:00"
//	intakeFullAccess  IAM role and user ARNs (comma-separated) that act on every reminder through the API
//	outcomesMemory    MB          outcomesTimeout seconds (the outcomes function)
//	feedbackMemory    MB          feedbackTimeout seconds (the feedback function, with ses)
//	eventBus          default (the account's default bus for the outcome events; absent: the stage's own, nudge-<stage>)
//	operatorsTopicArn an existing SNS topic notified of escalations (late policy escalate)
//	outcomeQueue      true | false: a stack option, not the stage's (OptionsFromContext)
//	retainData        true | false (the removal policy)
//	providers         a comma-separated subset of the registry's providers (default its first)
//	<provider>Rate    sends per second for the stage (default: its contract's; 0: no limit)
//	<provider>Ambiguous   retry | review | record (record: a provider that reports, as SES; default: its contract's)
//	and each provider's own settings, as its driver declares them (provider.Driver.Settings;
//	docs/infrastructure.md lists them)
//
// A key prefixed with a stage's name and a colon applies to that stage
// alone and wins over the plain key, which applies to every stage the app
// defines: "prod:alarmEmail" in cdk.json, or -c prod:shards=32.
//
// Each override goes through the same validation as the stages
// themselves (deployment.Stage.Validate): a setting that breaks a relation
// the code relies on stops the synthesis with the relation and the fix.
func StageFromContext(get func(key string) any) (deployment.Stage, error) {
	name := ""
	if v := get("stage"); v != nil {
		name = fmt.Sprint(v)
	}
	s, err := deployment.Named(name)
	if err != nil {
		return s, err
	}
	str := func(key string) (string, bool) { return contextValue(get, s.Name, key) }
	ints := map[string]*int{
		"consumerMemory": &s.ConsumerMemoryMB, "enqueueMemory": &s.EnqueueMemoryMB, "batchSize": &s.BatchSize,
		"maxConcurrency": &s.MaxConcurrency, "maxAttempts": &s.MaxAttempts, "maxReceiveCount": &s.MaxReceiveCount, "shards": &s.Shards,
		"recordConcurrency": &s.RecordConcurrency, "enqueueReservedConcurrency": &s.EnqueueReservedConcurrency,
		"intakeMemory": &s.IntakeMemoryMB, "intakeReservedConcurrency": &s.IntakeReservedConcurrency, "outcomesMemory": &s.OutcomesMemoryMB,
		"feedbackMemory": &s.FeedbackMemoryMB, "pacedConcurrency": &s.PacedConcurrency,
	}
	for key, dst := range ints {
		if v, ok := str(key); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return s, fmt.Errorf("context %s=%q is not a whole number", key, v)
			}
			*dst = n
		}
	}
	seconds := map[string]*time.Duration{"consumerTimeout": &s.ConsumerTimeout, "enqueueTimeout": &s.EnqueueTimeout, "batchingWindow": &s.BatchingWindow, "providerTimeout": &s.ProviderTimeout,
		"intakeTimeout": &s.IntakeTimeout, "outcomesTimeout": &s.OutcomesTimeout, "feedbackTimeout": &s.FeedbackTimeout}
	for key, dst := range seconds {
		if v, ok := str(key); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return s, fmt.Errorf("context %s=%q is not a whole number of seconds", key, v)
			}
			*dst = time.Duration(n) * time.Second
		}
	}
	if v, ok := str("alarmEmail"); ok {
		s.AlarmEmail = v
	}
	if v, ok := str("alarmTopicArn"); ok {
		s.AlarmTopicArn = v
	}
	if v, ok := str("operatorsTopicArn"); ok {
		s.OperatorsTopicArn = v
	}
	if v, ok := str("eventBus"); ok {
		s.EventBus = v // Validate refuses anything but "default"
	}
	if v, ok := str("providers"); ok {
		s.Providers = nil
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" && !slices.Contains(s.Providers, p) {
				s.Providers = append(s.Providers, p) // each once: the stack defines a provider's part once
			}
		}
	}
	if v, ok := str("sendWindows"); ok {
		s.SendWindows = v // Validate parses it
	}
	if v, ok := str("intakeFullAccess"); ok {
		s.IntakeFullAccess = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				s.IntakeFullAccess = append(s.IntakeFullAccess, a)
			}
		}
	}
	// Each provider's own settings, rate and ambiguous policy, as its
	// driver declares them.
	for _, d := range registry.All() {
		for _, set := range d.Settings {
			if v, ok := str(set.Key); ok {
				if s.ProviderSettings == nil {
					s.ProviderSettings = map[string]string{}
				}
				s.ProviderSettings[set.Key] = v
			}
		}
		if v, ok := str(d.Name + "Rate"); ok {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return s, fmt.Errorf("context %sRate=%q is not a number of sends per second", d.Name, v)
			}
			if s.Rates == nil {
				s.Rates = map[string]float64{}
			}
			s.Rates[d.Name] = r
		}
		if v, ok := str(d.Name + "Ambiguous"); ok {
			if s.Ambiguous == nil {
				s.Ambiguous = map[string]string{}
			}
			s.Ambiguous[d.Name] = v
		}
	}
	if v, ok := str("retainData"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("context retainData=%q is not true or false", v)
		}
		s.RetainData = b
	}
	return s, s.Validate()
}

// contextValue is key's value for the stage: "<stage>:key" if set, else
// key.
func contextValue(get func(key string) any, stage, key string) (string, bool) {
	v := get(stage + ":" + key)
	if v == nil {
		v = get(key)
	}
	if v == nil {
		return "", false
	}
	return fmt.Sprint(v), true
}

// Options are the stack's settings that are not the stage's
// (deployment.Stage): parts a deployer adds for itself, which no function
// relies on.
type Options struct {
	// OutcomeQueue adds the example subscriber of the outcome events: the
	// queue nudge-<stage>-outcomes and a rule on the bus that sends it every
	// event of source "nudge" (context outcomeQueue=true). Default false.
	OutcomeQueue bool
}

// OptionsFromContext reads the stack's options for a stage, with the
// stage's scoping (a "prod:outcomeQueue" key wins over "outcomeQueue"):
//
//	outcomeQueue      true | false (the example queue of outcome events)
func OptionsFromContext(stage string, get func(key string) any) (Options, error) {
	var o Options
	if v, ok := contextValue(get, stage, "outcomeQueue"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("context outcomeQueue=%q is not true or false", v)
		}
		o.OutcomeQueue = b
	}
	return o, nil
}
