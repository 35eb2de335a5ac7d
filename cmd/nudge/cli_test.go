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
		{}, {"schedule"}, {"import"}, {"cancel"}, {"status"}, {"reminder"}, {"reminder", "show"}, {"reminder", "purge"},
		{"dlq"}, {"dlq", "list"}, {"dlq", "redrive"}, {"ledger"}, {"ledger", "retain"},
		{"local"}, {"local", "exec"}, {"local", "invoke"}, {"local", "demo"}, {"local", "chaos"},
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

func head(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}
