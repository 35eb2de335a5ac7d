package main

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandPrintsItsUsage: -h and --help print the usage on stdout
// and exit 0 for every command, subcommand and group; each flag appears as
// --name with its default once.
func TestEveryCommandPrintsItsUsage(t *testing.T) {
	t.Parallel()
	commands := [][]string{
		{}, {"schedule"}, {"import"}, {"cancel"}, {"reschedule"}, {"status"}, {"reminder"}, {"reminder", "show"}, {"reminder", "purge"},
		{"dlq"}, {"dlq", "list"}, {"dlq", "redrive"}, {"ledger"}, {"ledger", "retain"}, {"ledger", "revive"}, {"console"},
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

// commandPaths are the commands of the tree, "dlq list", groups included,
// but for cobra's help command and hidden ones.
func commandPaths(t *testing.T) []string {
	t.Helper()
	var paths []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			paths = append(paths, strings.TrimPrefix(sub.CommandPath(), "nudge "))
			walk(sub)
		}
	}
	walk(newRoot(streams{strings.NewReader(""), io.Discard, io.Discard}))
	if len(paths) < 25 {
		t.Fatalf("the tree has %d commands: %v", len(paths), paths)
	}
	return paths
}

// TestEveryCommandHasHelp: every command of the tree, cobra's completion
// commands included, prints its usage for --help and for `nudge help`,
// the same, on stdout, and exits 0.
func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	for _, path := range append(commandPaths(t), "") {
		var out, errs bytes.Buffer
		if code := run(append(strings.Fields(path), "--help"), strings.NewReader(""), &out, &errs); code != exitOK || !strings.HasPrefix(out.String(), "usage:") || errs.Len() != 0 {
			t.Errorf("nudge %s --help: exit %d, stdout %q…, stderr %q", path, code, head(out.String()), errs.String())
			continue
		}
		var viaHelp bytes.Buffer
		if code := run(append([]string{"help"}, strings.Fields(path)...), strings.NewReader(""), &viaHelp, io.Discard); code != exitOK || viaHelp.String() != out.String() {
			t.Errorf("nudge help %s: exit %d, %q…; want what --help prints", path, code, head(viaHelp.String()))
		}
	}
}

// TestCompletionScripts: `nudge completion SHELL` prints the shell's
// script, and the completion it calls names the subcommands and flags.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "# bash completion V2 for nudge", "zsh": "#compdef nudge", "fish": "complete -c nudge",
		"powershell": "Register-ArgumentCompleter"} {
		var out, errs bytes.Buffer
		if code := run([]string{"completion", shell}, strings.NewReader(""), &out, &errs); code != exitOK || !strings.Contains(out.String(), want) {
			t.Errorf("nudge completion %s: exit %d, %q…, stderr %q; want a script with %q", shell, code, head(out.String()), errs.String(), want)
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", ""}, []string{"schedule\t", "dlq\t", "ledger\t", "local\t", "completion\t"}},
		{[]string{"__complete", "dlq", ""}, []string{"list\t", "redrive\t"}},
		{[]string{"__complete", "dlq", "redrive", "--re"}, []string{"--reason-class\t"}},
		{[]string{"__complete", "completion", ""}, []string{"bash\t", "zsh\t", "fish\t", "powershell\t"}},
	} {
		var out bytes.Buffer
		if code := run(c.args, strings.NewReader(""), &out, io.Discard); code != exitOK {
			t.Errorf("nudge %v: exit %d", c.args, code)
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("nudge %v: %q; want %q in it", c.args, out.String(), w)
			}
		}
	}
	var out, errs bytes.Buffer
	if code := run([]string{"completion"}, strings.NewReader(""), &out, &errs); code != exitUsage || !strings.Contains(errs.String(), "nudge completion bash|zsh|fish|powershell") {
		t.Errorf("nudge completion: exit %d, %q; want its usage on stderr, exit 2", code, errs.String())
	}
}

// TestAMisspeltCommandIsSuggested: a command near one that exists is an
// error (exit 2) that names it, at the top and in a group.
func TestAMisspeltCommandIsSuggested(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stauts"}, "nudge: unknown command \"stauts\"\n\nDid you mean this?\n\tstatus\n\nusage:\n"},
		{[]string{"dlq", "lsit", "--limit", "3"}, "nudge dlq: unknown command \"lsit\"; want list or redrive\n\nDid you mean this?\n\tlist\n\nusage:\n"},
		{[]string{"ledger", "reviev"}, "Did you mean this?\n\trevive\n"},
		{[]string{"local", "chaso"}, "Did you mean this?\n\tchaos\n"},
		{[]string{"completion", "bsh"}, "Did you mean this?\n\tbash\n"},
	} {
		var out, errs bytes.Buffer
		if code := run(c.args, strings.NewReader(""), &out, &errs); code != exitUsage || !strings.Contains(errs.String(), c.want) || out.Len() != 0 {
			t.Errorf("nudge %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), code, errs.String(), c.want)
		}
	}
	var errs bytes.Buffer
	if code := run([]string{"xyzzy"}, strings.NewReader(""), io.Discard, &errs); code != exitUsage || strings.Contains(errs.String(), "Did you mean") {
		t.Errorf("nudge xyzzy: exit %d, %q; want exit 2 and no suggestion", code, errs.String())
	}
}

// TestFlagsTheStandardLibraryTook: the single-dash long flags nudge took
// before cobra still work, anywhere before "--"; a flag's value is never
// rewritten; flags may follow the arguments; and local exec passes on
// everything after "--" untouched.
func TestFlagsTheStandardLibraryTook(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"dlq", "list", "-limit", "0"}, {"dlq", "list", "-limit=0"}, {"dlq", "list", "-json", "--limit", "0"}, {"dlq", "list", "x", "--limit", "0"}} {
		var errs bytes.Buffer
		if code := run(args, strings.NewReader(""), io.Discard, &errs); code != exitUsage || errs.String() != "nudge dlq list: --limit must be 1 or more\n" {
			t.Errorf("nudge %s: exit %d, %q; want --limit read as 0", strings.Join(args, " "), code, errs.String())
		}
	}
	for _, h := range []string{"-help", "-h", "--help"} {
		var out bytes.Buffer
		if code := run([]string{"status", "--bogus", h}, strings.NewReader(""), &out, io.Discard); code != exitOK || !strings.HasPrefix(out.String(), "usage: nudge status") {
			t.Errorf("nudge status --bogus %s: exit %d, %q…; want the usage, exit 0", h, code, head(out.String()))
		}
	}
	root := newRoot(streams{strings.NewReader(""), io.Discard, io.Discard})
	for _, c := range []struct{ args, want []string }{
		{[]string{"reschedule", "-note", "-json", "-expires=x", "rem-1", "--due", "-x", "-", "-json", "--", "-id"},
			[]string{"reschedule", "--note", "-json", "--expires=x", "rem-1", "--due", "-x", "-", "--json", "--", "-id"}},
		{[]string{"schedule", "-json", "-", "-meta=a=b"}, []string{"schedule", "--json", "-", "--meta=a=b"}},
		{[]string{"cancel", "-note", "-json", "rem-1", "-stage", "dev"}, []string{"cancel", "--note", "-json", "rem-1", "--stage", "dev"}},
		{[]string{"local", "demo", "-poison", "-1", "-h"}, []string{"local", "demo", "--poison", "-1", "-h"}},
		{[]string{"local", "exec", "--", "go", "test", "-count=1", "-run", "X"}, []string{"local", "exec", "--", "go", "test", "-count=1", "-run", "X"}},
		{[]string{"local", "exec", "go", "vet", "-json"}, []string{"local", "exec", "go", "vet", "-json"}},
	} {
		cmd, _, err := root.Find(c.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := doubleDash(cmd, c.args); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%v: %v; want %v", c.args, got, c.want)
		}
	}
}

// TestTheDocsNameEveryCommand: the package doc comment's and the usage's
// lines name every command and no other, and the README's layout lists
// them all.
func TestTheDocsNameEveryCommand(t *testing.T) {
	t.Parallel()
	paths := commandPaths(t)
	exists := map[string]bool{}
	for _, p := range paths {
		exists[p] = true
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(src), "package main")
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, _ := strings.Cut(string(readme), "\ncmd/nudge/ ")
	layout, _, _ = strings.Cut(layout, "\ninfra/")
	for _, text := range []struct {
		name, text, prefix string
		only               bool
	}{{"main.go's doc comment", doc, `(?m)^//\s+nudge `, true}, {"the usage", usage, `(?m)^\s+nudge `, true}, {"README.md's layout", layout, `(?:^|[\s,:])`, false}} {
		named := commandsNamed(text.text, text.prefix)
		for _, p := range paths {
			if !named[p] {
				t.Errorf("%s does not name nudge %s", text.name, p)
			}
		}
		for p := range named {
			if text.only && !exists[p] {
				t.Errorf("%s names nudge %s, which does not exist", text.name, p)
			}
		}
	}
}

// commandsNamed are the commands text names after prefix (a regular
// expression): after "nudge ", "nudge dlq list|redrive" names dlq, dlq list
// and dlq redrive.
func commandsNamed(text, prefix string) map[string]bool {
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(prefix+`([a-z]+)(?: ([a-z]+(?:\|[a-z]+)*)\b)?`).FindAllStringSubmatch(text, -1) {
		named[m[1]] = true
		for _, sub := range strings.Split(m[2], "|") {
			if sub != "" {
				named[m[1]+" "+sub] = true
			}
		}
	}
	return named
}
