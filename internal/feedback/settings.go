package feedback

import "github.com/nudgehq/nudge/internal/envconfig"

// Settings are the feedback function's deployment settings, read from its
// environment. The CDK stack sets them (deployment.Stage.FeedbackEnv).
type Settings struct {
	// Table is the ledger table (NUDGE_TABLE). Required.
	Table string
	// Stage is the stage (NUDGE_STAGE_NAME): events of its configuration
	// set, nudge-<stage>, are recorded, any other's ignored. Required.
	Stage string
}

// SettingsFromEnv reads Settings with getenv (os.Getenv in the function).
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	r := &envconfig.Reader{Getenv: getenv, Who: "feedback"}
	s := Settings{Table: r.Required("NUDGE_TABLE"), Stage: r.Required("NUDGE_STAGE_NAME")}
	return s, r.Err()
}
