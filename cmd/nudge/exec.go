package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/nudgehq/nudge/pkg/local/standin"
)

// localExec runs a command with the stand-ins up.
func localExec(args []string, out, errs io.Writer) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprint(errs, "nudge local exec: no command given\n\n")
		group(errs, "nudge local exec")
		return 2
	}
	if isHelp(args[0]) {
		group(out, "nudge local exec")
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := standin.DefaultDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nudge:", err)
		return 1
	}
	stack, err := standin.Up(ctx, dir, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nudge:", err)
		return 1
	}
	defer stack.Stop()

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), stack.Env()...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "nudge:", err)
		return 1
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		// Ctrl-C reaches the child through the terminal; a TERM may not.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err = <-waited
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if exit.ExitCode() < 0 {
			return 130
		}
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nudge:", err)
		return 1
	}
	return 0
}
