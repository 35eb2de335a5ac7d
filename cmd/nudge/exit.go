package main

// The exit codes, and the one mapping from a command's error to its message
// and exit code.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// Exit codes of the commands.
const (
	exitOK       = 0
	exitFailed   = 1 // something went wrong; the message says what
	exitUsage    = 2 // bad flags or arguments
	exitNotFound = 3 // no such reminder, table or queue
	exitRefused  = 4 // refused or declined: nothing was changed
	exitAccess   = 5 // AWS refused the credentials or the permission, or could not be reached
)

// exitCode ends a command that has said what it had to: nudge exits with it.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exitWith is nil for exitOK, else the exit code as an error.
func exitWith(code int) error {
	if code == exitOK {
		return nil
	}
	return exitCode(code)
}

// usageError is a mistake in how the command was called.
type usageError string

func (e usageError) Error() string { return string(e) }

// fail prints err, explained, after the command's name, and returns its exit
// code; r names the resources the message may point at.
func (c *command) fail(r *resources, err error) int {
	msg, code := explain(err, r.table, r.workURL, r.dlqURL)
	fmt.Fprintf(c.errs, "%s: %s\n", c.cmd.CommandPath(), msg)
	return code
}

// errAPI is satisfied by AWS API errors (smithy.APIError).
type errAPI interface {
	ErrorCode() string
	ErrorMessage() string
}

// explain turns an error into a message that says what to do, and an exit
// code.
func explain(err error, table, workURL, dlqURL string) (string, int) {
	var usage usageError
	if errors.As(err, &usage) {
		return string(usage), exitUsage
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "the configured region"
	}
	var api errAPI
	if errors.As(err, &api) {
		switch code := api.ErrorCode(); {
		case code == "ResourceNotFoundException":
			return fmt.Sprintf("the table %q does not exist in %s: check --stage/--table and AWS_REGION (the stack's output LedgerTable names it) [%s]", table, region, api.ErrorMessage()), exitNotFound
		case code == "AWS.SimpleQueueService.NonExistentQueue" || code == "QueueDoesNotExist":
			which := fmt.Sprintf("work %q, DLQ %q", workURL, dlqURL)
			if lead, _, ok := strings.Cut(err.Error(), ": operation error"); ok {
				which = lead // "find the queue nudge-prod-dlq"
			}
			return fmt.Sprintf("a queue does not exist in %s (%s): check --stage/--queue-url/--dlq-url and AWS_REGION (the stack's outputs WorkQueueUrl and DeadLetterQueueUrl)", region, which), exitNotFound
		case strings.Contains(code, "AccessDenied") || code == "UnauthorizedOperation":
			return fmt.Sprintf("AWS refused the permission: %s. Attach the stack's managed policy nudge-<stage>-operator (output OperatorPolicyArn) to your role (docs/operations.md#operator-permissions)", api.ErrorMessage()), exitAccess
		case code == "UnrecognizedClientException" || code == "InvalidClientTokenId" || code == "ExpiredToken" || code == "ExpiredTokenException" || code == "InvalidSignatureException":
			return fmt.Sprintf("AWS did not accept the credentials (%s: %s): refresh them (aws sso login, or AWS_PROFILE) and check AWS_REGION", code, api.ErrorMessage()), exitAccess
		}
	}
	switch {
	case errors.Is(err, schedule.ErrNoReminder), errors.Is(err, ledger.ErrNotFound):
		return err.Error(), exitNotFound
	case errors.Is(err, ledger.ErrInFlight):
		return err.Error(), exitRefused
	case errors.Is(err, context.Canceled):
		return "interrupted: " + err.Error(), exitFailed
	}
	msg := err.Error()
	if strings.Contains(msg, "no such host") || strings.Contains(msg, "connection refused") || strings.Contains(msg, "i/o timeout") {
		return fmt.Sprintf("cannot reach AWS: %s. Check the network, AWS_REGION and any AWS_ENDPOINT_URL_* settings", msg), exitAccess
	}
	if strings.Contains(msg, "no AWS region") || strings.Contains(msg, "failed to retrieve credentials") || strings.Contains(msg, "no EC2 IMDS role") {
		return msg + ". Set AWS_REGION and credentials (AWS_PROFILE, or aws sso login)", exitAccess
	}
	return msg, exitFailed
}
