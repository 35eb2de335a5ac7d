package intake

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nudgehq/nudge/pkg/envconfig"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// Settings are the intake function's deployment settings, read from its
// environment. The CDK stack and the local runner set the same variables.
type Settings struct {
	Table             string        // NUDGE_TABLE: the ledger table. Required.
	Shards            int           // NUDGE_SHARDS: due index shards (the table's registry wins once recorded). Default 8.
	Providers         []string      // NUDGE_PROVIDERS: the providers the stage runs; others are refused. Default all.
	SESTemplatePrefix string        // NUDGE_SES_TEMPLATE_PREFIX: the stage's SES template prefix. Optional.
	Lateness          time.Duration // NUDGE_LATENESS: the default expiresAt − dueAt. Default 24h.
	MaxAhead          time.Duration // NUDGE_MAX_AHEAD: how far ahead dueAt and expiresAt may be. Default 5 years.
}

// SettingsFromEnv reads Settings with getenv (os.Getenv in the function).
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	r := &envconfig.Reader{Getenv: getenv, Who: "intake"}
	s := Settings{
		Table:             r.Required("NUDGE_TABLE"),
		Shards:            r.Int("NUDGE_SHARDS", 8),
		SESTemplatePrefix: getenv("NUDGE_SES_TEMPLATE_PREFIX"),
		Lateness:          r.Duration("NUDGE_LATENESS", 24*time.Hour),
		MaxAhead:          r.Duration("NUDGE_MAX_AHEAD", schedule.DefaultMaxAhead),
	}
	for _, p := range strings.Split(getenv("NUDGE_PROVIDERS"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			s.Providers = append(s.Providers, p)
		}
	}
	if err := r.Err(); err != nil {
		return s, err
	}
	for _, p := range s.Providers {
		if !slices.Contains(provider.Names, p) {
			return s, fmt.Errorf("intake: NUDGE_PROVIDERS names %q; the providers are %s", p, strings.Join(provider.Names, ", "))
		}
	}
	if s.Shards < 1 || s.Shards > 1000 {
		return s, fmt.Errorf("intake: NUDGE_SHARDS is %d; use 1 to 1000", s.Shards)
	}
	return s, nil
}
