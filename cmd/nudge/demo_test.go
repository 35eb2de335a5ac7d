package main

import (
	"io"
	"testing"

	"github.com/nudgehq/nudge/pkg/local/demo"
)

// TestARunWithoutFlagsIsItsPreset: every setting of the chaos and demo
// presets reaches the run when no flag overrides it (the chaos preset's SES
// rate once did not, and the run was paced at the demo's).
func TestARunWithoutFlagsIsItsPreset(t *testing.T) {
	for name, d := range map[string]demo.Config{"chaos": demo.ChaosDefaults(), "demo": demo.Defaults()} {
		cfg, _, code, ok := runConfig(name, d, nil, io.Discard, io.Discard)
		if !ok {
			t.Fatalf("%s: exit %d", name, code)
		}
		if cfg.Reminders != d.Reminders || cfg.Rate != d.Rate || cfg.SESRate != d.SESRate || cfg.Spread != d.Spread || cfg.MaxConcurrency != d.MaxConcurrency ||
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
		cfg, _, code, ok := runConfig("chaos", demo.ChaosDefaults(), c.args, io.Discard, io.Discard)
		if !ok || cfg.Kills != c.kills || cfg.EnqueueKills != c.enqueueKills {
			t.Errorf("%v: %d consumer kills, %d enqueue kills (exit %d); want %d and %d", c.args, cfg.Kills, cfg.EnqueueKills, code, c.kills, c.enqueueKills)
		}
	}
	cfg, _, _, _ := runConfig("chaos", demo.ChaosDefaults(), []string{"--ses-rate", "0"}, io.Discard, io.Discard)
	if cfg.SESRate != -1 {
		t.Errorf("--ses-rate 0 gives %v; want no limit (-1)", cfg.SESRate)
	}
}
