package intake

import (
	"fmt"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/envconfig"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// Settings are the intake function's deployment settings, read from its
// environment. The CDK stack and the local runner set the same variables.
// There is no shard count: the intake takes it from the table's registry,
// which the enqueue writes (ledger.Config.ShardsFromRegistry), and may not
// write the registry itself.
type Settings struct {
	Table     string        // NUDGE_TABLE: the ledger table. Required.
	Providers []string      // NUDGE_PROVIDERS: the providers the stage runs; others are refused. Default all.
	Lateness  time.Duration // NUDGE_LATENESS: the default expiresAt − dueAt. Default 24h.
	MaxAhead  time.Duration // NUDGE_MAX_AHEAD: how far ahead dueAt and expiresAt may be. Default 5 years.
	// QueueURL (NUDGE_QUEUE_URL) is the work queue: a delivery due within
	// the lookahead (NUDGE_LOOKAHEAD, the enqueue's; default 15m) is
	// published there at once, after its write (the short-notice hand-off,
	// schedule.Config.HandOff). Default none: every delivery waits for the
	// enqueue's next tick.
	QueueURL  string
	Lookahead time.Duration
	// Routes are the work queues by provider (NUDGE_QUEUE_URL and
	// NUDGE_PROVIDER_QUEUES: a paced provider's own), where a hand-off
	// goes; empty without QueueURL.
	Routes envelope.Routes
	// Each provider's own variables (its templates, say) are its driver's
	// (provider.Driver.Env), checked here with its CheckEnv and read by its
	// intake door (registry.Doors).
	// FullAccessPrincipals (NUDGE_FULL_ACCESS_PRINCIPALS, comma-separated)
	// are the IAM role and user ARNs that act on every reminder through the
	// API, whoever created it: operators' and support tools' roles. Every
	// other caller acts on the reminders it created alone. Default none.
	FullAccessPrincipals []string
	// Windows (NUDGE_SEND_WINDOWS, "sms=08:00-21:00 mon-sat;
	// email=07:00-22:00") are the stage's default send windows by channel,
	// for the deliveries of a reminder with a timeZone that name none
	// (schedule.Config.Windows). Default none.
	Windows map[string]schedule.DefaultWindow
}

// SettingsFromEnv reads Settings with getenv (os.Getenv in the function).
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	r := &envconfig.Reader{Getenv: getenv, Who: "intake"}
	s := Settings{
		Table:     r.Required("NUDGE_TABLE"),
		Lateness:  r.Duration("NUDGE_LATENESS", 24*time.Hour),
		MaxAhead:  r.Duration("NUDGE_MAX_AHEAD", schedule.DefaultMaxAhead),
		QueueURL:  getenv("NUDGE_QUEUE_URL"),
		Lookahead: r.Duration("NUDGE_LOOKAHEAD", 15*time.Minute),
	}
	for _, p := range strings.Split(getenv("NUDGE_PROVIDERS"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			s.Providers = append(s.Providers, p)
		}
	}
	if err := r.Err(); err != nil {
		return s, err
	}
	fa, err := parseFullAccess(getenv(FullAccessSetting))
	if err != nil {
		return s, err
	}
	s.FullAccessPrincipals = fa
	if s.Windows, err = schedule.ParseDefaultWindows(getenv("NUDGE_SEND_WINDOWS")); err != nil {
		return s, fmt.Errorf("intake: NUDGE_SEND_WINDOWS: %w", err)
	}
	if s.QueueURL != "" {
		if s.Routes, err = envelope.ParseRoutes(s.QueueURL, getenv("NUDGE_PROVIDER_QUEUES")); err != nil {
			return s, fmt.Errorf("intake: %w", err)
		}
	}
	if err := registry.Check("intake: NUDGE_PROVIDERS", s.Providers); err != nil {
		return s, err
	}
	for _, p := range s.Providers {
		if d, _ := registry.Lookup(p); d.CheckEnv != nil {
			if err := d.CheckEnv(provider.Intake, getenv); err != nil {
				return s, err
			}
		}
	}
	return s, nil
}
