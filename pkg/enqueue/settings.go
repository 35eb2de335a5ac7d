package enqueue

import (
	"time"

	"github.com/nudgehq/nudge/pkg/envconfig"
)

// Settings are the enqueue function's deployment settings, read from its
// environment. The CDK stack and the local runner set the same variables.
type Settings struct {
	Table        string        // NUDGE_TABLE: the ledger table. Required.
	QueueURL     string        // NUDGE_QUEUE_URL: the work queue. Required.
	Shards       int           // NUDGE_SHARDS: due index shards. Default 8.
	Lookahead    time.Duration // NUDGE_LOOKAHEAD: hand-off lookahead. Default 15m.
	Settle       time.Duration // NUDGE_SETTLE: how far behind now the cursors stay. Default 15s.
	OverdueAfter time.Duration // NUDGE_OVERDUE_AFTER: default 5m.
	RepairAfter  time.Duration // NUDGE_REPAIR_AFTER: default 10m.
	RepairLimit  int           // NUDGE_REPAIR_LIMIT: overdue deliveries examined per run. Default 1000.
	Concurrency  int           // NUDGE_ENQUEUE_CONCURRENCY: shards worked at once. Default 4.
	PageSize     int           // NUDGE_PAGE_SIZE: entries per cursor step. Default 100.
	CutoffMargin time.Duration // NUDGE_CUTOFF_MARGIN: stop this long before the deadline. Default 3s.
}

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
	return s, r.Err()
}
