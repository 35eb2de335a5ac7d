package consumer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/envconfig"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/internal/ratelimit"
	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/provider"
)

// Settings are the consumer function's deployment settings, read from its
// environment. The CDK stack and the local runner set the same variables.
// Each provider's own variables are its driver's (provider.Driver.Env),
// checked here with its CheckEnv and read by its Build.
type Settings struct {
	Table           string                              // NUDGE_TABLE: the ledger table. Required.
	QueueURL        string                              // NUDGE_QUEUE_URL: the work queue. Required.
	DLQURL          string                              // NUDGE_DLQ_URL: the dead-letter queue. Required.
	Providers       []string                            // NUDGE_PROVIDERS: the providers this stage runs, comma-separated, of the registry's. Default registry.Default().
	Rates           map[string]float64                  // NUDGE_<PROVIDER>_RATE: the stage's sends per second to the provider, shared by the instances; 0 is no limit. Default: its contract's.
	Ambiguous       map[string]provider.AmbiguousPolicy // NUDGE_<PROVIDER>_AMBIGUOUS: retry, review or record (if it reports). Default: its contract's.
	RecordWaits     map[string]provider.RecordWait      // each record provider's wait for its report: its driver's variables (provider.WaitFor).
	ProviderTimeout time.Duration                       // NUDGE_PROVIDER_TIMEOUT: one send's limit. Default 10s.
	MaxAttempts     int                                 // NUDGE_MAX_ATTEMPTS: the attempt budget. Default 5.
	MaxReceiveCount int                                 // NUDGE_MAX_RECEIVE_COUNT: the queue's redrive maxReceiveCount. Default 10.
	Visibility      time.Duration                       // NUDGE_VISIBILITY_TIMEOUT: the queue's visibility timeout. Default 180s.
	Concurrency     int                                 // NUDGE_CONCURRENCY: records in flight per invocation. Default 10.
	CutoffMargin    time.Duration                       // NUDGE_CUTOFF_MARGIN: stop starting records this long before the deadline. Default ProviderTimeout + 2s (LedgerAllowance and the 1 s reserve); no less than that.
	BackoffBase     time.Duration                       // NUDGE_BACKOFF_BASE: default 15s.
	BackoffCap      time.Duration                       // NUDGE_BACKOFF_CAP: default 6h.
	Shards          int                                 // NUDGE_SHARDS: due index shards (ledger.Config.Shards). Default 8.
	Lookahead       time.Duration                       // NUDGE_LOOKAHEAD: hand-off lookahead (ledger.Config.Lookahead). Default 15m.
	// Each provider's circuit (Config.Circuit): unwell sends in a row that
	// open it, its first cool-down, and the bound of the cool-down, which
	// doubles while probes fail (at most 15m, SQS's longest delay, which
	// defers the records).
	CircuitFailures    int           // NUDGE_CIRCUIT_FAILURES: default 5.
	CircuitCoolDown    time.Duration // NUDGE_CIRCUIT_COOLDOWN: default 30s.
	CircuitMaxCoolDown time.Duration // NUDGE_CIRCUIT_MAX_COOLDOWN: default 5m.

	// PacedConcurrency is NUDGE_PACED_CONCURRENCY: each paced provider's
	// mapping's maximum concurrency, which divides its rate. Default 2.
	PacedConcurrency int
	// Routes are NUDGE_QUEUE_URL and NUDGE_PROVIDER_QUEUES: each
	// provider's work queue (envelope.Routes).
	Routes envelope.Routes
}

// SettingsFromEnv reads Settings with getenv (os.Getenv in the function).
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	r := &envconfig.Reader{Getenv: getenv, Who: "consumer"}
	s := Settings{
		Table: r.Required("NUDGE_TABLE"), QueueURL: r.Required("NUDGE_QUEUE_URL"), DLQURL: r.Required("NUDGE_DLQ_URL"),
		PacedConcurrency: r.Int("NUDGE_PACED_CONCURRENCY", 2),
		ProviderTimeout:  r.Duration("NUDGE_PROVIDER_TIMEOUT", 10*time.Second),
		Visibility:       r.Duration("NUDGE_VISIBILITY_TIMEOUT", 180*time.Second),
		BackoffBase:      r.Duration("NUDGE_BACKOFF_BASE", 15*time.Second),
		BackoffCap:       r.Duration("NUDGE_BACKOFF_CAP", 6*time.Hour),
		CutoffMargin:     r.Duration("NUDGE_CUTOFF_MARGIN", 0),
		MaxAttempts:      r.Int("NUDGE_MAX_ATTEMPTS", 5),
		MaxReceiveCount:  r.Int("NUDGE_MAX_RECEIVE_COUNT", 10),
		Concurrency:      r.Int("NUDGE_CONCURRENCY", 10),
		Shards:           r.Int("NUDGE_SHARDS", 8),
		Lookahead:        r.Duration("NUDGE_LOOKAHEAD", 15*time.Minute),

		CircuitFailures:    r.Int("NUDGE_CIRCUIT_FAILURES", 5),
		CircuitCoolDown:    r.Duration("NUDGE_CIRCUIT_COOLDOWN", 30*time.Second),
		CircuitMaxCoolDown: r.Duration("NUDGE_CIRCUIT_MAX_COOLDOWN", 5*time.Minute),
	}
	providers, err := ParseProviders(getenv("NUDGE_PROVIDERS"))
	if err != nil {
		return s, err
	}
	if s.QueueURL != "" {
		if s.Routes, err = envelope.ParseRoutes(s.QueueURL, getenv(envelope.EnvProviderQueues)); err != nil {
			return s, fmt.Errorf("consumer: %w", err)
		}
	}
	s.Providers = providers
	s.Rates, s.Ambiguous, s.RecordWaits = map[string]float64{}, map[string]provider.AmbiguousPolicy{}, map[string]provider.RecordWait{}
	for _, p := range s.Providers {
		d, _ := registry.Lookup(p)
		if rate := r.Rate(provider.EnvName(p, "RATE"), d.Contract.Rate); rate > 0 {
			s.Rates[p] = rate
		}
		s.Ambiguous[p] = d.Contract.Ambiguous
		if v := getenv(provider.EnvName(p, "AMBIGUOUS")); v != "" {
			pol, err := provider.ParseAmbiguousPolicy(v)
			if err != nil {
				return s, fmt.Errorf("consumer: %s: %w; use retry (send again), review (dead-letter for an operator) or record (wait for the provider's record)",
					provider.EnvName(p, "AMBIGUOUS"), err)
			}
			s.Ambiguous[p] = pol
		}
		if err := provider.CheckAmbiguousPolicy(d, s.Ambiguous[p]); err != nil {
			return s, fmt.Errorf("consumer: %s: %w", provider.EnvName(p, "AMBIGUOUS"), err)
		}
		if s.Ambiguous[p] == provider.AmbiguousRecord {
			w, err := provider.WaitFor(d, getenv)
			if err != nil {
				return s, fmt.Errorf("consumer: %w", err)
			}
			s.RecordWaits[p] = w
		}
	}
	if err := r.Err(); err != nil {
		return s, err
	}
	for _, p := range s.Providers {
		if d, _ := registry.Lookup(p); d.CheckEnv != nil {
			if err := d.CheckEnv(provider.Consumer, getenv); err != nil {
				return s, err
			}
		}
	}
	if s.CutoffMargin == 0 {
		s.CutoffMargin = DefaultCutoffMargin(s.ProviderTimeout)
	}
	if s.Visibility <= s.ProviderTimeout {
		return s, fmt.Errorf("consumer: NUDGE_VISIBILITY_TIMEOUT %v must exceed NUDGE_PROVIDER_TIMEOUT %v (AWS recommends 6× the function timeout)", s.Visibility, s.ProviderTimeout)
	}
	if err := s.checkCircuit(); err != nil {
		return s, err
	}
	if err := CheckReceiveMargin(s.MaxAttempts, s.MaxReceiveCount); err != nil {
		return s, fmt.Errorf("consumer: NUDGE_MAX_RECEIVE_COUNT: %w", err)
	}
	if need := s.ProviderTimeout + LedgerAllowance + batch.DefaultReserve(s.CutoffMargin); s.CutoffMargin < need {
		return s, fmt.Errorf("consumer: NUDGE_CUTOFF_MARGIN %v is below NUDGE_PROVIDER_TIMEOUT %v + %v for the ledger writes after a send + the %v reserve (%v): a record started at the cut-off could not finish before the deadline; raise it or leave it unset",
			s.CutoffMargin, s.ProviderTimeout, LedgerAllowance, batch.DefaultReserve(s.CutoffMargin), need)
	}
	return s, nil
}

// ParseProviders reads a comma-separated list of providers; empty is the
// registry's default alone.
func ParseProviders(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return []string{registry.Default()}, nil
	}
	for _, p := range strings.Split(v, ",") {
		if strings.TrimSpace(p) == "" {
			return nil, registry.Check("consumer: NUDGE_PROVIDERS", []string{""})
		}
	}
	return registry.Parse("consumer: NUDGE_PROVIDERS", v)
}

// BuildProviders makes the providers s names with their drivers, each
// with its share of the stage's rate limit (env: the function's
// environment, AWS configuration and secret reader; its Timeout is
// s.ProviderTimeout).
func BuildProviders(ctx context.Context, s Settings, env provider.Env) (map[string]provider.Provider, map[string]*ratelimit.Limiter, error) {
	env.Timeout = s.ProviderTimeout
	providers := map[string]provider.Provider{}
	for _, name := range s.Providers {
		d, ok := registry.Lookup(name)
		if !ok {
			return nil, nil, registry.Check("consumer: NUDGE_PROVIDERS", []string{name})
		}
		p, err := d.Build(ctx, env)
		if err != nil {
			return nil, nil, err
		}
		providers[name] = p
	}
	limits := map[string]*ratelimit.Limiter{}
	for name, rate := range s.Rates {
		// Cold: a paced mapping's slot may land on any execution
		// environment, and one idle since its last batch must not add a
		// free send to the slot's rate.
		l, err := ratelimit.New(ratelimit.Config{PerSecond: ratelimit.Share(rate, s.PacedConcurrency), Cold: true})
		if err != nil {
			return nil, nil, fmt.Errorf("consumer: %s: %w", provider.EnvName(name, "RATE"), err)
		}
		limits[name] = l
	}
	return providers, limits, nil
}

// DefaultCutoffMargin is NUDGE_CUTOFF_MARGIN's default for a provider
// timeout: the timeout, LedgerAllowance and the batch processor's 1 s
// reserve at this margin.
func DefaultCutoffMargin(providerTimeout time.Duration) time.Duration {
	return providerTimeout + LedgerAllowance + time.Second
}

// LedgerAllowance is the time a record needs besides its send: the claim
// before it, and the ledger's complete or retry write after it (or the DLQ
// send and the dead-letter write).
const LedgerAllowance = time.Second

// CheckTimeout checks the settings against the function's timeout and the
// event source mapping's batch size, the relations the consumer's time
// budget relies on:
//
//	timeout ≥ cut-off margin + one provider timeout
//	batch size ≤ concurrency × ⌈(timeout − cut-off margin) / provider timeout⌉
//
// The cut-off margin (NUDGE_CUTOFF_MARGIN, by default the provider timeout +
// the ledger allowance + the reserve) is the end of the invocation in which
// no record starts; what comes before it is the window in which records
// start. That window must hold at least one provider timeout, so that a
// batch larger than the concurrency gets a second round started after a
// first that took as long as a send may. With a shorter timeout most
// records are returned unstarted on every receive until SQS moves them to
// the DLQ without a reason. And while a provider answers as slowly as its
// timeout, records start in rounds of Concurrency, one round per provider
// timeout of that window: a batch must fit in those rounds, or its tail is
// returned unstarted on every receive for as long as the slowdown lasts.
func (s Settings) CheckTimeout(timeout time.Duration, batchSize int) error {
	if need := s.CutoffMargin + s.ProviderTimeout; timeout < need {
		return fmt.Errorf("consumer: a function timeout of %v leaves %v in which records may start (the cut-off margin is %v: the %v provider timeout + %v for the claim and the write after a send + the %v reserve); it must leave at least one provider timeout: raise the consumer timeout to %v or more, or lower the provider timeout",
			timeout, max(timeout-s.CutoffMargin, 0), s.CutoffMargin, s.ProviderTimeout, LedgerAllowance, batch.DefaultReserve(s.CutoffMargin), need)
	}
	window := timeout - s.CutoffMargin
	rounds := int((window + s.ProviderTimeout - 1) / s.ProviderTimeout)
	if batchSize > s.Concurrency*rounds {
		return fmt.Errorf("consumer: a batch of %d records, %d at a time (NUDGE_CONCURRENCY), starts at most %d while every send takes the %v provider timeout (%d rounds in the %v before the cut-off); the rest would return unstarted on every receive: raise the concurrency to %d, or lower the batch size to %d",
			batchSize, s.Concurrency, s.Concurrency*rounds, s.ProviderTimeout, rounds, window, (batchSize+rounds-1)/rounds, s.Concurrency*rounds)
	}
	return nil
}

// checkCircuit checks the circuit settings.
func (s Settings) checkCircuit() error {
	switch {
	case s.CircuitCoolDown < time.Second:
		return fmt.Errorf("consumer: NUDGE_CIRCUIT_COOLDOWN %v is below 1s; records wait at least a second (default 30s)", s.CircuitCoolDown)
	case s.CircuitMaxCoolDown < s.CircuitCoolDown || s.CircuitMaxCoolDown > envelope.MaxDelaySeconds*time.Second:
		return fmt.Errorf("consumer: NUDGE_CIRCUIT_MAX_COOLDOWN %v must be between NUDGE_CIRCUIT_COOLDOWN %v and SQS's longest delay, 15m (default 5m)",
			s.CircuitMaxCoolDown, s.CircuitCoolDown)
	}
	return nil
}
