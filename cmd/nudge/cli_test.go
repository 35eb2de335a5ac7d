package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestEveryCommandPrintsItsUsage: -h and --help print the usage on stdout
// and exit 0 for every command, subcommand and group; each flag appears as
// --name with its default once.
func TestEveryCommandPrintsItsUsage(t *testing.T) {
	t.Parallel()
	commands := [][]string{
		{}, {"schedule"}, {"import"}, {"cancel"}, {"reschedule"}, {"status"}, {"reminder"}, {"reminder", "show"}, {"reminder", "purge"},
		{"dlq"}, {"dlq", "list"}, {"dlq", "redrive"}, {"ledger"}, {"ledger", "retain"}, {"ledger", "revive"},
		{"local"}, {"local", "exec"}, {"local", "invoke"}, {"local", "demo"}, {"local", "chaos"}, {"local", "serve"},
	}
	flagLine := regexp.MustCompile(`^  -(-?)[a-z]`)
	for _, cmd := range commands {
		for _, help := range []string{"-h", "--help"} {
			args := append(append([]string{}, cmd...), help)
			var out, errs bytes.Buffer
			code := run(args, strings.NewReader(""), &out, &errs)
			name := "nudge " + strings.Join(args, " ")
			if code != exitOK || !strings.HasPrefix(out.String(), "usage:") || errs.Len() != 0 {
				t.Errorf("%s: exit %d, stdout %q…, stderr %q; want the usage on stdout and exit 0", name, code, head(out.String()), errs.String())
				continue
			}
			for _, line := range strings.Split(out.String(), "\n") {
				if m := flagLine.FindStringSubmatch(line); m != nil && m[1] != "-" {
					t.Errorf("%s: a flag in the single-dash form: %q", name, line)
				}
				if strings.Count(line, "(default") > 1 || strings.Count(line, "default") > 2 {
					t.Errorf("%s: a default given twice: %q", name, line)
				}
				// A flag that takes a value names it in capitals (--max N),
				// never the flag package's generic "string" or "int".
				if f := strings.Fields(line); flagLine.MatchString(line) && len(f) > 1 && strings.HasPrefix(f[0], "--") && genericValue[f[1]] {
					t.Errorf("%s: a flag's value unnamed: %q", name, line)
				}
			}
		}
	}
	// Defaults that are not zero are shown, once.
	for cmd, want := range map[string][]string{
		"dlq list":     {"--limit N", "(default 50)"},
		"dlq redrive":  {"--rate R", "(default 10)"},
		"import":       {"--concurrency N", "(default 16)"},
		"cancel":       {"(default cancelled by operator)", "(default 24h0m0s)"},
		"status":       {"--overdue-after DURATION", "(default 5m0s)"},
		"local demo":   {"--reminders N", "(default 300)"},
		"local invoke": {"--event FILE", "(default events/sqs-batch.json)"},
	} {
		var out, errs bytes.Buffer
		run(append(strings.Fields(cmd), "--help"), strings.NewReader(""), &out, &errs)
		for _, w := range want {
			if strings.Count(out.String(), w) != 1 {
				t.Errorf("nudge %s --help: %q appears %d times, want once:\n%s", cmd, w, strings.Count(out.String(), w), out.String())
			}
		}
	}
	// A mistake is an error with the usage, exit 2.
	for _, args := range [][]string{{"dlq", "lsit"}, {"status", "--no-such-flag"}, {"nosuch"}, {"local", "nosuch"}} {
		var out, errs bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errs); code != exitUsage || !strings.Contains(errs.String(), "usage") {
			t.Errorf("nudge %s: exit %d, stderr %q; want the usage on stderr and exit 2", strings.Join(args, " "), code, head(errs.String()))
		}
	}
}

// TestMalformedEnvironmentIsRefused: a NUDGE_* variable that gives a flag its
// default is refused when it cannot be read, naming it; before, it fell back
// to the default in silence.
func TestMalformedEnvironmentIsRefused(t *testing.T) {
	for _, tc := range []struct{ name, value, cmd string }{
		{"NUDGE_LATENESS", "a day", "cancel"},
		{"NUDGE_MAX_AHEAD", "-5m", "schedule"},
		{"NUDGE_OVERDUE_AFTER", "soon", "status"},
	} {
		t.Setenv(tc.name, tc.value)
		var out, errs bytes.Buffer
		if code := run([]string{tc.cmd, "x"}, strings.NewReader(""), &out, &errs); code != exitUsage || !strings.Contains(errs.String(), tc.name) {
			t.Errorf("%s=%q for nudge %s: exit %d, %q; want exit 2 naming the variable", tc.name, tc.value, tc.cmd, code, errs.String())
		}
		t.Setenv(tc.name, "")
	}
}

// genericValue are the placeholders the flag package uses for a flag whose
// usage names none.
var genericValue = map[string]bool{"string": true, "int": true, "int64": true, "uint": true, "float": true, "duration": true, "value": true}

// TestFlagsWinOverTheEnvironment: a malformed variable is no obstacle when
// the flag it would have given a value is given; a flag beats a variable;
// a stage and a table naming two tables are refused (exit 2), saying where
// each came from; every malformed variable is named at once.
func TestFlagsWinOverTheEnvironment(t *testing.T) {
	t.Setenv("NUDGE_TABLE", "")
	t.Setenv("NUDGE_STAGE", "")
	t.Setenv("NUDGE_LATENESS", "a day")
	var out, errs bytes.Buffer
	if code := run([]string{"cancel", "--lateness", "1h", "x"}, strings.NewReader(""), &out, &errs); strings.Contains(errs.String(), "NUDGE_LATENESS") || !strings.Contains(errs.String(), "no ledger table") || code != exitUsage {
		t.Errorf("NUDGE_LATENESS malformed, --lateness given: exit %d, %q; want it ignored (and the missing table named, exit 2)", code, errs.String())
	}
	t.Setenv("NUDGE_MAX_AHEAD", "never")
	errs.Reset()
	if code := run([]string{"cancel", "x"}, strings.NewReader(""), &out, &errs); code != exitUsage || !strings.Contains(errs.String(), "NUDGE_LATENESS") || !strings.Contains(errs.String(), "NUDGE_MAX_AHEAD") {
		t.Errorf("two malformed variables: exit %d, %q; want both named", code, errs.String())
	}
	t.Setenv("NUDGE_LATENESS", "")
	t.Setenv("NUDGE_MAX_AHEAD", "")
	for _, cmd := range []string{"cancel", "status"} {
		t.Setenv("NUDGE_STAGE", "bad stage!")
		errs.Reset()
		if code := run([]string{cmd, "x"}, strings.NewReader(""), &out, &errs); code != exitUsage || !strings.Contains(errs.String(), "NUDGE_STAGE") {
			t.Errorf("nudge %s, NUDGE_STAGE malformed: exit %d, %q; want exit 2 naming it", cmd, code, errs.String())
		}
		t.Setenv("NUDGE_STAGE", "")
		errs.Reset()
		if code := run([]string{cmd, "--stage", "dev", "--table", "other", "x"}, strings.NewReader(""), &out, &errs); code != exitUsage || !strings.Contains(errs.String(), "--stage dev names the table nudge-dev-ledger, and --table other another") {
			t.Errorf("nudge %s --stage dev --table other: exit %d, %q; want exit 2, refused as ambiguous", cmd, code, errs.String())
		}
		// A leftover variable pair naming two stages is refused too.
		t.Setenv("NUDGE_STAGE", "prod")
		t.Setenv("NUDGE_TABLE", "nudge-dev-ledger")
		errs.Reset()
		if code := run([]string{cmd, "x"}, strings.NewReader(""), &out, &errs); code != exitUsage || !strings.Contains(errs.String(), "NUDGE_STAGE=prod names the table nudge-prod-ledger, and NUDGE_TABLE=nudge-dev-ledger another") {
			t.Errorf("nudge %s with NUDGE_STAGE=prod NUDGE_TABLE=nudge-dev-ledger: exit %d, %q; want exit 2 naming both variables", cmd, code, errs.String())
		}
		t.Setenv("NUDGE_STAGE", "")
		t.Setenv("NUDGE_TABLE", "")
	}

	// --stage beats NUDGE_TABLE, for the calendar and for the operations.
	t.Setenv("NUDGE_TABLE", "from-the-environment")
	for _, queues := range []bool{false, true} {
		c := newCommand("t", "", "", streams{strings.NewReader(""), &out, &errs})
		r := addResources(c, queues)
		if err := c.cmd.ParseFlags([]string{"--stage", "dev", "x"}); err != nil {
			t.Fatal(err)
		}
		if err := c.checkEnv(); err != nil {
			t.Fatal(err)
		}
		if err := r.resolve(); err != nil || r.table != "nudge-dev-ledger" || r.stage != "dev" {
			t.Errorf("queue flags %v: --stage dev with NUDGE_TABLE set: table %q, stage %q, %v; want nudge-dev-ledger", queues, r.table, r.stage, err)
		}
	}
	// A queue URL flag alone: the variables are not mixed in, and the
	// error says so.
	t.Setenv("NUDGE_STAGE", "prod")
	c := newCommand("t", "", "", streams{strings.NewReader(""), &out, &errs})
	r := addResources(c, true)
	if err := c.cmd.ParseFlags([]string{"--dlq-url", "https://sqs.eu-west-1.amazonaws.com/123456789012/nudge-dev-dlq"}); err != nil {
		t.Fatal(err)
	}
	if err := c.checkEnv(); err != nil {
		t.Fatal(err)
	}
	if err := r.resolve(); err == nil || !strings.Contains(err.Error(), "NUDGE_* variables are not used") {
		t.Errorf("--dlq-url with NUDGE_STAGE set: %v; want the variables left out, and said so", err)
	}
}

func head(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}

