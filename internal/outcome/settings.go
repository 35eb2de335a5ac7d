package outcome

import (
	"github.com/nudgehq/nudge/internal/envconfig"
)

// Settings are the outcomes function's deployment settings, read from its
// environment. The CDK stack and the local system set the same variables.
type Settings struct {
	Bus   string // NUDGE_EVENT_BUS: the bus's name or ARN ("default": the account's default bus). Required.
	Stage string // NUDGE_STAGE_NAME: the stage, named in every event's detail. Optional.
}

// SettingsFromEnv reads Settings with getenv (os.Getenv in the function).
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	r := &envconfig.Reader{Getenv: getenv, Who: "outcomes"}
	s := Settings{Bus: r.Required("NUDGE_EVENT_BUS"), Stage: getenv("NUDGE_STAGE_NAME")}
	return s, r.Err()
}
