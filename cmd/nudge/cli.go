package main

// The commands' flags and help: the standard library's flag package, with
// one usage printer. Every command prints its usage for -h or --help and
// exits 0, shows each flag as --name with its default once, and refuses a
// malformed NUDGE_* variable that would have given a flag its default. (A
// CLI framework such as cobra would add shell completion; these dozen small
// commands need the help and the exit codes, which this file gives in a
// page, with no dependency.)

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nudgehq/nudge/pkg/envconfig"
)

// command is one command's flag set and help.
type command struct {
	fs *flag.FlagSet
	// env reads the NUDGE_* variables that give flags their defaults.
	env       *envconfig.Reader
	out, errs io.Writer
	name      string
	args      string
	about     string
}

// newCommand starts a command called name ("nudge dlq list"), taking args
// after its flags ("ID", "FILE", or ""), described by about. Asked for help,
// it prints its usage to out; a mistake, and the usage, go to errs.
func newCommand(name, args, about string, out, errs io.Writer) *command {
	c := &command{fs: flag.NewFlagSet(name, flag.ContinueOnError), env: &envconfig.Reader{Getenv: os.Getenv, Who: name}, out: out, errs: errs, name: name, args: args, about: about}
	c.fs.SetOutput(errs)
	c.fs.Usage = func() { c.usage(errs) }
	return c
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
	if err := c.env.Err(); err != nil {
		fmt.Fprintf(c.errs, "%v; fix or unset it\n", err)
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
		switch def := f.DefValue; {
		case def == "" || def == "false" || def == "0" || def == "0s" || def == "map[]" || def == "[]":
		case strings.Contains(text, "default"): // the text says it, once
		default:
			text += fmt.Sprintf(" (default %s)", def)
		}
		lines = append(lines, line{head, text})
		width = max(width, len(head))
	})
	for _, l := range lines {
		fmt.Fprintf(w, "%-*s  %s\n", width, l.head, l.text)
	}
}

// group prints a command group's usage (nudge dlq, nudge reminder, …): the
// lines of the full usage that concern it.
func group(w io.Writer, prefix string) {
	fmt.Fprintf(w, "usage:\n")
	lines := strings.Split(usage, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), prefix+" ") || strings.TrimSpace(lines[i]) == prefix {
			fmt.Fprintln(w, lines[i])
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "      ") {
				i++
				fmt.Fprintln(w, lines[i])
			}
		}
	}
	fmt.Fprintf(w, "\n'%s SUBCOMMAND --help' describes one.\n", prefix)
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "help" }
