package main

// The command tree's shared parts, on cobra (subcommands, shell completion,
// suggestions for a misspelt command): one help format for every command
// (the synopsis, the description, each flag once as --name VALUE with its
// default), the command groups, the NUDGE_* variables that give flags their
// defaults, and the standard flag package's single-dash long flags (-json),
// still understood.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/user"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// streams are a command's standard input, output and error.
type streams struct {
	in        io.Reader
	out, errs io.Writer
}

// command is one leaf command: its cobra command, its streams, and what it
// runs once its flags are parsed.
type command struct {
	cmd *cobra.Command
	streams
	// envErrs are malformed NUDGE_* variables, by variable name.
	envErrs map[string]envErr
	// run does the command's work with its arguments (the flags removed),
	// until ctx is done (Ctrl-C), and returns its exit code.
	run func(ctx context.Context, args []string) int
}

// envErr is a malformed variable and the flags it would have given a value
// ("a|b": a group of flags, any of which, given, makes the variable unused).
type envErr struct {
	flags string
	err   error
}

// newCommand starts the command use ("list", "show ID": its name, then the
// arguments after its flags), listed in completions as short and described
// in its help by about.
func newCommand(use, short, about string, s streams) *command {
	c := &command{streams: s, envErrs: map[string]envErr{}}
	c.cmd = &cobra.Command{Use: use, Short: short, Long: about, RunE: func(cmd *cobra.Command, args []string) error {
		if err := c.checkEnv(); err != nil {
			fmt.Fprintf(c.errs, "%s: %v\n", cmd.CommandPath(), err)
			return exitCode(exitUsage)
		}
		return exitWith(c.run(cmd.Context(), args))
	}}
	return c
}

// flags are the command's flags.
func (c *command) flags() *pflag.FlagSet { return c.cmd.Flags() }

// newGroup makes the command group use ("dlq") of subs. Given no
// subcommand, it prints its usage as a mistake (exit 2); given -h, --help
// or help, as asked (exit 0); given an unknown one, it says so, with the
// names it is near.
func newGroup(use, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{Use: use, Short: short}
	g.AddCommand(subs...)
	asGroup(g)
	return g
}

// asGroup makes g, a command with subcommands, behave as newGroup's: it
// takes its arguments whole, flags included, to say what was wrong with them.
func asGroup(g *cobra.Command) {
	g.Args, g.DisableFlagParsing, g.SuggestionsMinimumDistance = cobra.ArbitraryArgs, true, 2
	g.RunE = func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) > 0 && isHelp(args[0]):
			help(cmd.OutOrStdout(), cmd)
			return nil
		case len(args) > 0:
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: unknown command %q%s%s\n\n", cmd.CommandPath(), args[0], want(cmd), suggest(cmd, args[0]))
		}
		help(cmd.ErrOrStderr(), cmd)
		return exitCode(exitUsage)
	}
}

// want lists a group's subcommands: "; want show or purge" (nothing for the
// root, whose usage follows).
func want(g *cobra.Command) string {
	if !g.HasParent() {
		return ""
	}
	var names []string
	for _, c := range g.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if len(names) < 2 {
		return ""
	}
	return "; want " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// suggest names the subcommands of g that typed is near, as "Did you mean
// this?" and one per line.
func suggest(g *cobra.Command, typed string) string {
	near := g.SuggestionsFor(typed)
	if len(near) == 0 {
		return ""
	}
	return "\n\nDid you mean this?\n\t" + strings.Join(near, "\n\t")
}

// help prints a command's usage: the root's is the whole usage; a group's,
// or that of a command that passes its arguments on (local exec), the lines
// of the whole usage that concern it; a leaf command's, its synopsis, its
// description and its flags.
func help(w io.Writer, cmd *cobra.Command) {
	switch {
	case !cmd.HasParent():
		fmt.Fprint(w, usage)
	case cmd.HasSubCommands() || cmd.DisableFlagParsing:
		group(w, cmd.CommandPath())
	default:
		leafUsage(w, cmd)
	}
}

// leafUsage prints "usage:", the synopsis, the description and each flag
// once, as --name VALUE, with its default.
func leafUsage(w io.Writer, cmd *cobra.Command) {
	fmt.Fprintf(w, "usage: %s [flags]", cmd.CommandPath())
	if _, args, ok := strings.Cut(cmd.Use, " "); ok {
		fmt.Fprintf(w, " %s", args)
	}
	about := cmd.Long
	if about == "" {
		about = cmd.Short
	}
	fmt.Fprintf(w, "\n\n%s\n\nflags:\n", strings.TrimRight(about, "\n"))
	type line struct{ head, text string }
	var lines []line
	width := 0
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Hidden {
			return
		}
		value, text := pflag.UnquoteUsage(f)
		head := "  --" + f.Name
		if value != "" {
			head += " " + value
		}
		if def := f.DefValue; !zeroDefault(def) && !strings.Contains(text, "(default") {
			text += fmt.Sprintf(" (default %s)", def)
		}
		lines = append(lines, line{head, text})
		width = max(width, len(head))
	})
	for _, l := range lines {
		fmt.Fprintf(w, "%-*s  %s\n", width, l.head, l.text)
	}
}

// zeroDefault reports whether a flag's default says nothing worth showing.
func zeroDefault(def string) bool {
	switch def {
	case "", "false", "0", "0s", "map[]", "[]":
		return true
	}
	return false
}

// group prints a command group's usage (nudge dlq, nudge reminder, …): the
// lines of the full usage that concern it.
func group(w io.Writer, prefix string) {
	fmt.Fprintf(w, "usage:\n")
	lines := strings.Split(usage, "\n")
	subcommands := map[string]bool{}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if strings.HasPrefix(line, prefix+" ") || line == prefix {
			if rest := strings.Fields(strings.TrimPrefix(line, prefix)); len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
				subcommands[rest[0]] = true
			}
			fmt.Fprintln(w, lines[i])
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "      ") {
				i++
				fmt.Fprintln(w, lines[i])
			}
		}
	}
	if len(subcommands) > 1 {
		fmt.Fprintf(w, "\n'%s SUBCOMMAND --help' describes one.\n", prefix)
	}
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return isHelpFlag(arg) || arg == "help"
}

// isHelpFlag reports whether arg is a help flag.
func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

// asksHelp reports whether a help flag comes before any "--" in args.
func asksHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

// doubleDash rewrites the single-dash long flags of the standard flag
// package, which nudge used before cobra (-json, -max 5, -max=5), to
// pflag's --json, --max 5, --max=5, for the command cmd that args run. No
// command has a one-letter flag but -h, so a single-dash word of more
// letters was never a set of them. A flag's value is left as it is,
// whatever it looks like, as is everything after "--", and every argument
// of a command that passes its arguments on (local exec).
func doubleDash(cmd *cobra.Command, args []string) []string {
	if cmd.DisableFlagParsing {
		return args
	}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
			continue
		}
		name, _, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") && len(name) > 1 {
			a = "-" + a
		}
		out = append(out, a)
		if f := cmd.Flags().Lookup(name); f != nil && !inline && f.NoOptDefVal == "" && i+1 < len(args) {
			i++ // the flag's value
			out = append(out, args[i])
		}
	}
	return out
}

// envDuration is the value the variable name gives the duration flag
// flagName: def if unset. A malformed one is refused when the command runs,
// unless the flag is given.
func (c *command) envDuration(flagName, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		c.envErrs[name] = envErr{flagName, fmt.Errorf("%s=%q is not a positive duration such as 30s or 24h", name, v)}
		return def
	}
	return d
}

// stageName matches a stage's name: it names tables and queues.
var stageName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,39}$`)

// envString is the value the variable name gives the flag flagName, checked
// by valid when set ("" if valid accepts it).
func (c *command) envString(flagName, name string, valid func(string) string) string {
	v := os.Getenv(name)
	if v == "" || valid == nil {
		return v
	}
	if problem := valid(v); problem != "" {
		c.envErrs[name] = envErr{flagName, fmt.Errorf("%s=%q %s", name, v, problem)}
		return ""
	}
	return v
}

// validStage and validURL check NUDGE_STAGE and the queue URL variables.
func validStage(v string) string {
	if !stageName.MatchString(v) {
		return "is not a stage name (letters, digits and '-', as in nudge-NAME-ledger)"
	}
	return ""
}

func validURL(v string) string {
	if u, err := url.Parse(v); err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http" {
		return "is not a queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)"
	}
	return ""
}

// checkEnv refuses, all at once, the malformed variables that would have
// given a flag its value: those whose flags were not given.
func (c *command) checkEnv() error {
	names := make([]string, 0, len(c.envErrs))
	for name := range c.envErrs {
		names = append(names, name)
	}
	sort.Strings(names)
	var msgs []string
	for _, name := range names {
		e, used := c.envErrs[name], true
		for _, f := range strings.Split(e.flags, "|") {
			used = used && !c.flags().Changed(f)
		}
		if used {
			msgs = append(msgs, fmt.Sprintf("%v; fix or unset it, or give --%s", e.err, strings.Split(e.flags, "|")[0]))
		}
	}
	if len(msgs) > 0 {
		return usageError(strings.Join(msgs, "; and "))
	}
	return nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// confirm asks a yes/no question on out and reads the answer from in.
func confirm(in io.Reader, out io.Writer, question string) bool {
	fmt.Fprintf(out, "%s [y/N] ", question)
	line, _ := bufio.NewReader(in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// operator names who runs the command, for the ledger and the message.
func operator() string {
	if v := os.Getenv("NUDGE_OPERATOR"); v != "" {
		return v
	}
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		name += "@" + h
	}
	return name
}
