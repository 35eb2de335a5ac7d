package main

import (
	"maps"
	"testing"

	"github.com/spf13/pflag"

	"github.com/nudgehq/nudge/internal/local/demo"
)

// runConfig is the run args ask for over the preset d.
func runConfig(d demo.Config, args []string) (demo.Config, error) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f := addRunFlags(fs, d)
	if err := fs.Parse(args); err != nil {
		return demo.Config{}, err
	}
	return f.config()
}

// TestARunWithoutFlagsIsItsPreset: every setting of the chaos and demo
// presets reaches the run when no flag overrides it (the chaos preset's SES
// rate once did not, and the run was paced at the demo's).
func TestARunWithoutFlagsIsItsPreset(t *testing.T) {
	for name, d := range map[string]demo.Config{"chaos": demo.ChaosDefaults(), "demo": demo.Defaults()} {
		cfg, err := runConfig(d, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.Reminders != d.Reminders || cfg.Rate != d.Rate || !maps.Equal(cfg.Rates, d.Rates) || cfg.Spread != d.Spread || cfg.MaxConcurrency != d.MaxConcurrency ||
			cfg.Kills != d.Kills || cfg.EnqueueKills != d.EnqueueKills || cfg.ConsumerTimeout != d.ConsumerTimeout || cfg.EnqueueBudget != d.EnqueueBudget || cfg.Seed != d.Seed ||
			cfg.BatchSize != d.BatchSize || cfg.Tick != d.Tick || cfg.Stage != d.Stage {
			t.Errorf("%s: the run's settings %+v differ from the preset's %+v", name, cfg, d)
		}
	}
	for _, c := range []struct {
		args                []string
		kills, enqueueKills int
	}{
		{[]string{"--reminders", "5000"}, 500, 5},
		{[]string{"--reminders", "300"}, 30, 1},
		{[]string{"--reminders", "10"}, 1, 1},
		{[]string{"--reminders", "100000"}, 1000, 10},
		{[]string{"--reminders", "300", "--kills", "200", "--enqueue-kills", "0"}, 200, 0},
	} {
		cfg, err := runConfig(demo.ChaosDefaults(), c.args)
		if err != nil || cfg.Kills != c.kills || cfg.EnqueueKills != c.enqueueKills {
			t.Errorf("%v: %d consumer kills, %d enqueue kills (%v); want %d and %d", c.args, cfg.Kills, cfg.EnqueueKills, err, c.kills, c.enqueueKills)
		}
	}
	cfg, _ := runConfig(demo.ChaosDefaults(), []string{"--ses-rate", "0"})
	if cfg.Rates["ses"] != -1 {
		t.Errorf("--ses-rate 0 gives %v; want no limit (-1)", cfg.Rates["ses"])
	}
	if d := demo.ChaosDefaults(); d.Rates["ses"] != 200 {
		t.Errorf("the chaos preset paces SES at %v; want 200 a second", d.Rates["ses"])
	}
	if d := demo.Defaults(); d.Rates["ses"] != 20 {
		t.Errorf("the demo preset paces SES at %v; want 20 a second", d.Rates["ses"])
	}
}
