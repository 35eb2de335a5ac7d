// Command nudge is Nudge's operator and local tooling CLI.
//
//	nudge schedule [flags]                     create one reminder (idempotent by id)
//	nudge import FILE                          create reminders from JSON Lines or CSV
//	nudge cancel ID                            cancel a reminder's unsent deliveries
//	nudge reschedule ID --due TIME             move a reminder's unsent deliveries to a new time
//	nudge status                               deliveries by state, overdue, queue depths
//	nudge reminder show|purge ID               one reminder's deliveries and history; delete it
//	nudge dlq list|redrive                     review the DLQ; redrive a bounded batch
//	nudge ledger retain                        give items written before 2026-11-30 their reminder's TTL
//	nudge ledger revive                        dead deliveries back to the calendar (reviewed, bounded)
//	nudge console [flags]                      the support console in the browser, on 127.0.0.1
//	nudge local exec -- CMD [ARG...]           run CMD with DynamoDB Local and fauxqs started
//	nudge local invoke --event FILE            run a function's bootstrap under the Lambda emulator
//	nudge local demo [flags]                   run the whole system locally and check its invariants
//	nudge local chaos [flags]                  the demo under load and faults
//	nudge local serve                          run the whole system locally, with the intake API, until Ctrl-C
//	nudge completion bash|zsh|fish|powershell  print the shell's completion script
//
// Every command takes --help. The commands are built with cobra; their flags
// are GNU-style (--name VALUE or --name=VALUE, before or after the
// arguments), and the single-dash form of the standard flag package
// (-json, -max 5) still works.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const usage = `usage:
  nudge schedule --id ID --account REF --due TIME --recipient REF --template REF [--channel C] [--provider P] [--expires TIME] [--meta K=V]
  nudge schedule --json FILE|-
      Create one reminder. The same id with the same content is harmless; with
      different content it is refused as a conflict.
  nudge import [--format jsonl|csv] [--concurrency N] FILE
      Create reminders in bulk. Invalid rows are reported by line and never stop
      valid ones; exits 1 if any row was not created or unchanged.
  nudge cancel [--note TEXT] ID
      Cancel the reminder's deliveries that have not been sent; says which were.
  nudge reschedule --due TIME [--expires TIME] [--note TEXT] ID
      Move the reminder's deliveries that have not started sending to a new due
      time (keeping its window unless --expires); says which were not moved.
  (schedule, import, cancel and reschedule take --stage NAME for the table nudge-NAME-ledger,
   or --table; when neither is given, $NUDGE_STAGE or $NUDGE_TABLE; and
   the standard AWS settings: AWS_REGION, AWS_PROFILE,
   AWS_ENDPOINT_URL_DYNAMODB.)

  nudge status [--overdue-after D] [--scan] [--expired D] [--json]
      Live deliveries from the due index, the overdue ones and the oldest, the
      queues' depths, a sample of the DLQ's sources; says which figures are
      exact and which sampled. --scan counts every state; --expired lists the
      deliveries that expired unsent (both read the whole table).
  nudge reminder show [--json] ID
      The reminder, each delivery's state, attempts, last error and receipt,
      whether a pending one was handed off, and the history in time order.
  nudge reminder purge [--yes] [--json] ID
      Delete the reminder, its deliveries and their history (a deletion
      request). Refused, removing nothing, while a delivery is being sent.
  nudge dlq list [--limit N] [--json]
      Review the DLQ, per delivery: error class and reason, attempts, age,
      ledger state, copies, where a redrive would send it. Messages stay.
  nudge dlq redrive --max N [--reason-class C] [--older-than D] [--include-settled]
                    [--dry-run] [--yes] [--rate R] [--by WHO] [--json]
      Show what would move, ask, then for each delivery: mark the ledger
      (dead → queued), send the same body to the work queue, delete it (and
      any copy) from the DLQ, at most R per second. An interruption may
      duplicate, never lose.
  nudge dlq redrive --all --via-move-task [--rate R] [--yes]
      The console's mechanism: an SQS message move task over the whole DLQ.
  nudge ledger retain [--dry-run] [--json]
      Once, for a table written before 2026-11-30: give every reminder and
      delivery item the TTL of its reminder (expiresAt + 90 days) where it has
      none or an earlier one. Never shortens a TTL; safe to run again.
  nudge ledger revive --max N --reason TEXT [--reason-class C] [--older-than D] [--read N]
                      [--after TOKEN] [--dry-run] [--yes] [--by WHO] [--json]
      Find dead deliveries in the ledger (at most --read items read), show which would go back
      to the calendar and why the others stay dead (expired, filtered), ask, then revive each:
      dead → pending, its attempt budget restarted, who and why in its history. For deliveries
      whose DLQ copy aged out; with a copy still there it is sent once all the same.
  nudge console [--addr HOST:PORT] [--public] [--allow-actions] [--operator WHO]
      Serve the support console for the stage on 127.0.0.1:8089 (port 0: a free
      one) with your AWS credentials, until Ctrl-C; print the address to open,
      with the session's token. Read-only unless --allow-actions; another
      address than loopback only with --public.
  (status, reminder, dlq, ledger and console take --stage NAME for the resources nudge-NAME-…,
   or --table, --queue-url, --dlq-url; when none of these is given,
   $NUDGE_STAGE, $NUDGE_TABLE, $NUDGE_QUEUE_URL, $NUDGE_DLQ_URL (never a
   mix of flags and variables). Exit codes: 0 done, 1 failed, 2 usage,
   3 not found, 4 refused or declined (nothing changed), 5 AWS access.)
  nudge local exec -- CMD [ARG...]
      Install the local stand-ins (and Chromium, for the browser tests) if
      missing, start DynamoDB Local, fauxqs (SQS and SNS) and aws-ses-v2-local
      on free ports, run CMD with
      AWS_ENDPOINT_URL_DYNAMODB/_SQS/_SNS/_SESV2 pointing at them, then stop
      them (also on failure or Ctrl-C). Exits with CMD's status.
  nudge local invoke [--event FILE] [--function consumer|enqueue] [--bootstrap PATH] [--fault SPEC]
      Run the function the event is for (SQS events: the consumer; schedule
      events: the enqueue) under the Lambda runtime interface emulator against
      fresh stand-ins and a local provider sink, with the data the event needs
      seeded; print the function's output, its response, the REPORT line and
      the ledger.
  nudge local demo [--reminders N] [--rate R] [--faults SPEC] [--batch-size N]
                   [--batching-window D] [--max-concurrency N] [--help for more]
      Run the whole system on this machine: stand-ins, both functions under the
      emulator, an event source mapping, a provider with faults; schedule a mix
      of reminders, show progress, print a summary. Exits 1 if anything was
      sent twice, lost or left overdue.
  nudge local serve
      Run the whole system on this machine, with nothing scheduled, until
      Ctrl-C: the stand-ins, the intake API behind a local function URL (the
      real bootstrap under the Lambda emulator; a SigV4 signature is required,
      not verified), the schedule and the consumers. Prints the API's URL, a
      curl call and the environment for the nudge commands.
  nudge local chaos [--reminders N] [--kills K] [--enqueue-budget D] [--help for more]
      The demo under load and faults: 10,000 reminders by default, provider
      faults, consumer runtimes killed mid-batch, duplicate messages, enqueue
      runs cut by their time budget. Prints a table of the figures; exits 1 on
      any broken invariant.
  nudge completion bash|zsh|fish|powershell
      Print the completion script for the shell; 'nudge completion SHELL --help'
      says how to load it.
`

func init() {
	cobra.EnableCommandSorting = false // the subcommands in the usage's order, for "want show or purge"
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command args name until Ctrl-C or a TERM, and returns its
// exit code.
func run(args []string, in io.Reader, out, errs io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, in, out, errs)
}

// runContext runs the command args name until ctx is done, and returns its
// exit code.
func runContext(ctx context.Context, args []string, in io.Reader, out, errs io.Writer) int {
	root := newRoot(streams{in, out, errs})
	// A flag's mistake is one with the command's usage, unless help was
	// asked for too: help first.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if asksHelp(args) {
			return pflag.ErrHelp
		}
		fmt.Fprintf(errs, "%s: %v\n", cmd.CommandPath(), err)
		help(errs, cmd)
		return exitCode(exitUsage)
	})
	cmd, _, err := root.Find(args)
	if err == nil {
		args = doubleDash(cmd, args)
	}
	root.SetArgs(append([]string{}, args...))
	err = root.ExecuteContext(ctx)
	var code exitCode
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	}
	fmt.Fprintf(errs, "nudge: %v\n", err) // cobra's own: how the command was called
	return exitUsage
}

// newRoot builds the command tree, with the help command and the
// completion command cobra adds.
func newRoot(s streams) *cobra.Command {
	root := newGroup("nudge", "Nudge's operator and local tooling CLI", append(calendarCommands(s),
		statusCommand(s), reminderCommand(s), dlqCommand(s), ledgerCommand(s), consoleCommand(s), localCommand(s))...)
	root.SilenceErrors, root.SilenceUsage = true, true
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.errs)
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) { help(cmd.OutOrStdout(), cmd) })
	root.SetUsageFunc(func(cmd *cobra.Command) error {
		help(cmd.OutOrStderr(), cmd)
		return nil
	})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			asGroup(c)
		}
	}
	return root
}
