package main

// The commands' flags and help: the standard library's flag package, with
// one usage printer. Every command prints its usage for -h or --help and
// exits 0, shows each flag as --name VALUE with its default once, and
// refuses a malformed NUDGE_* variable that would have given a flag its
// value, unless the flag itself is given. (A CLI framework such as cobra
// would add shell completion; these dozen small commands need the help, the
// exit codes and the variables, which this file gives in two pages, with no
// dependency.)

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// command is one command's flag set and help.
type command struct {
	fs        *flag.FlagSet
	out, errs io.Writer
	name      string
	args      string
	about     string
	// envErrs are malformed NUDGE_* variables, by variable name.
	envErrs map[string]envErr
}

// envErr is a malformed variable and the flags it would have given a value
// ("a|b": a group of flags, any of which, given, makes the variable unused).
type envErr struct {
	flags string
	err   error
}

// newCommand starts a command called name ("nudge dlq list"), taking args
// after its flags ("ID", "FILE", or ""), described by about. Asked for help,
// it prints its usage to out; a mistake, and the usage, go to errs.
func newCommand(name, args, about string, out, errs io.Writer) *command {
	c := &command{fs: flag.NewFlagSet(name, flag.ContinueOnError), out: out, errs: errs, name: name, args: args, about: about, envErrs: map[string]envErr{}}
	c.fs.SetOutput(errs)
	c.fs.Usage = func() { c.usage(errs) }
	return c
}

// envDuration is the value the variable name gives the duration flag
// flagName: def if unset. A malformed one is refused when the command is
// parsed, unless the flag is given.
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

// given returns the flags set on the command line.
func (c *command) given() map[string]bool {
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// parse reads args. It returns ok false, with the exit code, when it
// printed the usage (-h, --help: exit 0) or a mistake (exit 2).
func (c *command) parse(args []string) (code int, ok bool) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			c.usage(c.out)
			return exitOK, false
		}
	}
	err := c.fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK, false
	case err != nil:
		return exitUsage, false // the flag package printed the mistake and the usage
	}
	given := c.given()
	names := make([]string, 0, len(c.envErrs))
	for name := range c.envErrs {
		names = append(names, name)
	}
	sort.Strings(names)
	var msgs []string
	for _, name := range names {
		e, used := c.envErrs[name], true
		for _, f := range strings.Split(e.flags, "|") {
			used = used && !given[f]
		}
		if used {
			msgs = append(msgs, fmt.Sprintf("%v; fix or unset it, or give --%s", e.err, strings.Split(e.flags, "|")[0]))
		}
	}
	if len(msgs) > 0 {
		fmt.Fprintf(c.errs, "%s: %s\n", c.name, strings.Join(msgs, "; and "))
		return exitUsage, false
	}
	return exitOK, true
}

// usage prints "usage:", the synopsis, the description and each flag once,
// as --name VALUE, with its default.
func (c *command) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s [flags]", c.name)
	if c.args != "" {
		fmt.Fprintf(w, " %s", c.args)
	}
	fmt.Fprintf(w, "\n\n%s\n\nflags:\n", c.about)
	type line struct{ head, text string }
	var lines []line
	width := 0
	c.fs.VisitAll(func(f *flag.Flag) {
		value, text := flag.UnquoteUsage(f)
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
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}
