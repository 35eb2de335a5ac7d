package outcome

import (
	"github.com/nudgehq/nudge/internal/envconfig"
	"github.com/nudgehq/nudge/internal/ledger"
)

// Settings are the outcomes function's deployment settings, read from its
// environment. The CDK stack and the local system set the same variables.
type Settings struct {
	Bus   string // NUDGE_EVENT_BUS: the bus's name or ARN ("default": the account's default bus). Required.
	Stage string // NUDGE_STAGE_NAME: the stage, named in every event's detail. Optional.
	Table string // NUDGE_TABLE: the ledger table, where fallbacks are taken. Required.
	// OperatorsTopic is NUDGE_OPERATORS_TOPIC_ARN: the SNS topic notified of
	// each escalation. Optional: without it, the escalation event alone.
	OperatorsTopic string
}

// SettingsFromEnv reads Settings with getenv (os.Getenv in the function).
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	r := &envconfig.Reader{Getenv: getenv, Who: "outcomes"}
	s := Settings{Bus: r.Required("NUDGE_EVENT_BUS"), Stage: getenv("NUDGE_STAGE_NAME"), Table: r.Required("NUDGE_TABLE"),
		OperatorsTopic: getenv("NUDGE_OPERATORS_TOPIC_ARN")}
	return s, r.Err()
}

// LedgerConfig is the ledger the function takes fallbacks in: the table,
// and the shard count read from its registry (the enqueue records the
// stack's), never written: the function's role may read the registry and
// write reminders' items alone.
func (s Settings) LedgerConfig() ledger.Config {
	return ledger.Config{Table: s.Table, ShardsFromRegistry: true}
}
