// Command nudge is Nudge's operator and local tooling CLI.
//
//	nudge local exec -- CMD [ARG...]   run CMD with DynamoDB Local and fauxqs started
//	nudge local invoke --event FILE    run the consumer's bootstrap under the Lambda emulator
package main

import (
	"fmt"
	"os"
)

const usage = `usage:
  nudge local exec -- CMD [ARG...]
      Install the local stand-ins if missing, start DynamoDB Local and fauxqs on
      free ports, run CMD with AWS_ENDPOINT_URL_DYNAMODB/_SQS pointing at them,
      then stop them (also on failure or Ctrl-C). Exits with CMD's status.
  nudge local invoke [--event FILE] [--bootstrap PATH] [--fault SPEC]
      Run the consumer's bootstrap under the Lambda runtime interface emulator
      against the stand-ins and a local provider sink, with the deliveries the
      event refers to seeded; print the response, the REPORT line and the ledger.
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) < 2 || args[0] != "local" {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	switch args[1] {
	case "exec":
		return localExec(args[2:])
	case "invoke":
		return localInvoke(args[2:])
	}
	fmt.Fprintf(os.Stderr, "nudge: unknown command %q\n\n%s", "local "+args[1], usage)
	return 2
}
