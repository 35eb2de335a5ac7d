package main

// nudge console: the support console in the browser, on loopback, with the
// operator's credentials and stage; and the one way a console is built on
// a stage's resources, which the local runners share (make serve, make
// demo DEMO_FLAGS=--keep).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nudgehq/nudge/internal/console"
	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/internal/status"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// defaultConsoleAddr is where nudge console listens unless told.
const defaultConsoleAddr = "127.0.0.1:8089"

func consoleCommand(s streams) *cobra.Command {
	c := newCommand("console", "the support console in the browser, on 127.0.0.1",
		`Serve the support console (overview, find, a reminder's deliveries and history, the DLQ) for
the stage, with your AWS credentials, on a loopback address, until Ctrl-C. Prints the address to
open, with the session's token. Read-only unless --allow-actions.`, s)
	fs := c.flags()
	res := addResources(c, true)
	addr := fs.String("addr", defaultConsoleAddr, "listen on `HOST:PORT` (a port of 0 picks a free one); loopback unless --public")
	public := fs.Bool("public", false, "allow a --addr that is not loopback (the console shows the stage's reminders to whoever reaches it)")
	allow := fs.Bool("allow-actions", false, "allow the pages that change deliveries: cancel, reschedule, revive, redrive")
	who := fs.String("operator", defaultOperator(), "`WHO` uses the console, recorded in the history of what it reveals and changes [$USER]")
	c.run = func(ctx context.Context, args []string) int {
		usage := func(msg string) int {
			fmt.Fprintf(c.errs, "nudge console: %s\n", msg)
			return exitUsage
		}
		host, _, err := net.SplitHostPort(*addr)
		switch {
		case len(args) > 0:
			return usage(fmt.Sprintf("it takes no arguments (%q): give the stage with --stage", args[0]))
		case err != nil:
			return usage(fmt.Sprintf("--addr %q is not HOST:PORT (such as %s; a port of 0 picks a free one)", *addr, defaultConsoleAddr))
		case !isLoopback(host) && !*public:
			return usage(fmt.Sprintf("--addr %s is not a loopback address: the console would serve the stage's reminders, their addresses "+
				"and the DLQ, with your AWS credentials, to anyone who can reach it; listen on 127.0.0.1 (and use an SSH tunnel), "+
				"or add --public if that is what you mean", *addr))
		case strings.TrimSpace(*who) == "":
			return usage("no operator: give --operator WHO (the history of what the console reveals and changes names who)")
		}
		if err := res.connect(ctx, true); err != nil {
			return c.fail(res, err)
		}
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			fmt.Fprintf(c.errs, "nudge console: listen on %s: %v (another console, or another program, may hold the port: pick another with --addr, or port 0)\n", *addr, err)
			return exitFailed
		}
		cfg, err := res.consoleConfig(ctx, *who)
		if err != nil {
			ln.Close()
			return c.fail(res, err)
		}
		cfg.AllowActions = *allow
		cfg.Logger = slog.New(slog.NewTextHandler(c.errs, nil))
		if err := serveConsole(ctx, ln, host, cfg, c.out); err != nil {
			fmt.Fprintln(c.errs, "nudge console:", err)
			return exitFailed
		}
		return exitOK
	}
	return c.cmd
}

// defaultOperator is who uses the console unless told: $USER, else the
// operating system's user.
func defaultOperator() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// isLoopback reports whether host (of --addr) names the loopback
// interface: localhost, or a loopback IP address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// consoleConfig is the console's configuration on the connected resources
// r, for the operator who: what `nudge status`, `nudge reminder show`,
// `nudge dlq` and `nudge ledger revive` read and change, through the same
// packages. The caller adds the hosts (serveConsole), whether actions are
// allowed, and a logger.
func (r *resources) consoleConfig(ctx context.Context, who string) (console.Config, error) {
	// A reschedule into the lookahead is handed off at once, as the CLI's.
	sc := schedule.Config{Ledger: r.ledger, HandOff: r.handOff(ctx)}
	// The providers the stage runs, as its enqueue recorded them; a table
	// without the record takes the built-in ones.
	facts, ok, err := r.ledger.ReadStage(ctx)
	if err != nil {
		return console.Config{}, err
	}
	if ok {
		sc.Providers = facts.Providers
	}
	store, err := schedule.New(sc)
	if err != nil {
		return console.Config{}, err
	}
	stage := r.stage
	if stage == "" {
		stage = r.table
	}
	return console.Config{
		Stage:     stage,
		Operator:  who,
		Reminders: store,
		Ledger:    r.ledger,
		Status: func(ctx context.Context) (status.Report, error) {
			return status.Read(ctx, status.Config{Ledger: r.ledger, Table: r.table, Queue: r.sqs, WorkURL: r.workURL, ProviderURLs: r.routes.URLs()[1:], DLQURL: r.dlqURL})
		},
		Redriver: func(by string) (*redrive.Redriver, error) { return r.redriver(by, 0) },
		Reviver:  r.reviver,
	}, nil
}

// consoleHosts are the Host header values a console listening on ln,
// asked to listen on host, answers: the address it listens on and, for a
// loopback or unspecified one, the loopback names of its port (and this
// machine's name, for an unspecified one).
func consoleHosts(host string, ln net.Listener) []string {
	bound := ln.Addr().(*net.TCPAddr)
	port := strconv.Itoa(bound.Port)
	hosts := []string{net.JoinHostPort(bound.IP.String(), port)}
	if host != "" && net.ParseIP(host) == nil {
		hosts = append(hosts, net.JoinHostPort(host, port)) // the name asked for
	}
	if bound.IP.IsLoopback() || bound.IP.IsUnspecified() {
		hosts = append(hosts, "localhost:"+port, "127.0.0.1:"+port)
	}
	if bound.IP.IsUnspecified() {
		if name, err := os.Hostname(); err == nil {
			hosts = append(hosts, net.JoinHostPort(name, port))
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// consoleBase is the address to print for a console listening on ln:
// http://127.0.0.1:PORT for a loopback or unspecified one.
func consoleBase(ln net.Listener) string {
	bound := ln.Addr().(*net.TCPAddr)
	ip := bound.IP.String()
	if bound.IP.IsUnspecified() || bound.IP.To4() != nil && bound.IP.IsLoopback() {
		ip = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(bound.Port))
}

// serveConsole serves the console cfg configures on ln (asked for host)
// until ctx ends, then shuts it down, letting the requests in progress
// finish. It prints the address to open, with the session's token, on out.
func serveConsole(ctx context.Context, ln net.Listener, host string, cfg console.Config, out io.Writer) error {
	cfg.Hosts = consoleHosts(host, ln)
	srv, err := console.New(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	mode := "read-only"
	if cfg.AllowActions {
		mode = "actions allowed"
	}
	fmt.Fprintf(out, "console: %s  (%s) — Ctrl-C stops it\n", srv.URL(consoleBase(ln)), mode)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// wall clock: the requests in progress get this long to finish, as the
	// operator waits for them
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// A redrive in progress stops after its message; held selections go
	// back to the DLQ.
	srv.Close(stop)
	if err := hs.Shutdown(stop); err != nil {
		return fmt.Errorf("stop the console: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
