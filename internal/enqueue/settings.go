package enqueue

import (
	"fmt"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/envconfig"
	"github.com/nudgehq/nudge/internal/envelope"
)

// Settings are the enqueue function's deployment settings, read from its
// environment. The CDK stack and the local runner set the same variables.
type Settings struct {
	Table    string // NUDGE_TABLE: the ledger table. Required.
	QueueURL string // NUDGE_QUEUE_URL: the default work queue. Required.
	// Routes are each provider's work queue: NUDGE_QUEUE_URL and
	// NUDGE_PROVIDER_QUEUES (envelope.Routes).
	Routes       envelope.Routes
	Shards       int           // NUDGE_SHARDS: due index shards. Default 8.
	Lookahead    time.Duration // NUDGE_LOOKAHEAD: hand-off lookahead. Default 15m.
	Settle       time.Duration // NUDGE_SETTLE: how far behind now the cursors stay. Default 15s.
	OverdueAfter time.Duration // NUDGE_OVERDUE_AFTER: default 5m.
	RepairAfter  time.Duration // NUDGE_REPAIR_AFTER: default 10m.
	RepairLimit  int           // NUDGE_REPAIR_LIMIT: overdue deliveries examined per run. Default 1000.
	Concurrency  int           // NUDGE_ENQUEUE_CONCURRENCY: shards worked at once. Default 4.
	PageSize     int           // NUDGE_PAGE_SIZE: entries per cursor step. Default 100.
	CutoffMargin time.Duration // NUDGE_CUTOFF_MARGIN: stop this long before the deadline. Default 3s.
	Providers    []string      // NUDGE_PROVIDERS: the providers the consumer runs, recorded in the table for the intake. Optional.
	// ProviderEnv are the providers' variables the intake's checks read
	// (provider.IntakeRules.Recorded), recorded with them, so that the CLI
	// checks a delivery as the intake function does: those NUDGE_RECORDED
	// names, comma-separated, read from the environment. Optional.
	ProviderEnv map[string]string
}

// EnvRecorded names the variables the enqueue records for the intake
// (Settings.ProviderEnv).
const EnvRecorded = "NUDGE_RECORDED"

// SettingsFromEnv reads Settings with getenv (os.Getenv in the function).
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	r := &envconfig.Reader{Getenv: getenv, Who: "enqueue"}
	s := Settings{
		Table: r.Required("NUDGE_TABLE"), QueueURL: r.Required("NUDGE_QUEUE_URL"),
		Shards:       r.Int("NUDGE_SHARDS", 8),
		Lookahead:    r.Duration("NUDGE_LOOKAHEAD", 15*time.Minute),
		Settle:       r.Duration("NUDGE_SETTLE", 15*time.Second),
		OverdueAfter: r.Duration("NUDGE_OVERDUE_AFTER", 5*time.Minute),
		RepairAfter:  r.Duration("NUDGE_REPAIR_AFTER", 10*time.Minute),
		RepairLimit:  r.Int("NUDGE_REPAIR_LIMIT", 1000),
		Concurrency:  r.Int("NUDGE_ENQUEUE_CONCURRENCY", 4),
		PageSize:     r.Int("NUDGE_PAGE_SIZE", 100),
		CutoffMargin: r.Duration("NUDGE_CUTOFF_MARGIN", 3*time.Second),
	}
	for _, p := range strings.Split(getenv("NUDGE_PROVIDERS"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			s.Providers = append(s.Providers, p)
		}
	}
	// The names come from the stage (the drivers' declarations), so that
	// the enqueue needs no driver, nor the clients drivers bring.
	for _, k := range strings.Split(getenv(EnvRecorded), ",") {
		if k = strings.TrimSpace(k); k != "" {
			if s.ProviderEnv == nil {
				s.ProviderEnv = map[string]string{}
			}
			s.ProviderEnv[k] = getenv(k)
		}
	}
	if err := r.Err(); err != nil {
		return s, err
	}
	routes, err := envelope.ParseRoutes(s.QueueURL, getenv(envelope.EnvProviderQueues))
	if err != nil {
		return s, fmt.Errorf("enqueue: %w", err)
	}
	s.Routes = routes
	return s, nil
}

// MinBudget is the least time a run must have before its cut-off margin:
// one page per shard and the overdue scan's first query take that long
// when DynamoDB answers slowly.
const MinBudget = 5 * time.Second

// CheckTimeout checks the settings against the function's timeout and the
// schedule's period:
//
//	cut-off margin + MinBudget ≤ timeout < period
//
// A run stops starting work CutoffMargin before its deadline; with less
// than MinBudget before that, it hands off little or nothing (with no time
// at all, every run fails). A timeout at or above the period lets runs
// overlap and pile up while DynamoDB is slow.
func (s Settings) CheckTimeout(timeout, period time.Duration) error {
	if need := s.CutoffMargin + MinBudget; timeout < need {
		return fmt.Errorf("enqueue: a function timeout of %v leaves %v before the %v cut-off margin (NUDGE_CUTOFF_MARGIN); a run needs at least %v: raise the enqueue timeout to %v or more",
			timeout, max(timeout-s.CutoffMargin, 0), s.CutoffMargin, MinBudget, need)
	}
	if timeout >= period {
		return fmt.Errorf("enqueue: a function timeout of %v is not below the schedule's %v period; runs would overlap and pile up: lower it", timeout, period)
	}
	return nil
}
