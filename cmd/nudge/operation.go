package main

// What the operator commands (status, reminder, dlq, ledger) share: their
// resources with the queue flags, --json, and their output's pieces.

import (
	"encoding/json"
	"fmt"
	"strings"
)

// operation is an operator command: the command, the resources it works on
// and whether it prints JSON.
type operation struct {
	*command
	*resources
	json bool
}

// addOperation gives c the resources' flags, the queues' included, and
// --json.
func addOperation(c *command) *operation {
	o := &operation{command: c, resources: addResources(c, true)}
	c.flags().BoolVar(&o.json, "json", false, "print JSON instead of tables")
	return o
}

// fail prints err, explained, and returns the exit code for it.
func (o *operation) fail(err error) int {
	return o.command.fail(o.resources, err)
}

// printJSON writes v as indented JSON.
func (o *operation) printJSON(v any) {
	enc := json.NewEncoder(o.out)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// batchDone ends a batch (a redrive, a revive) that went as far as it
// could: it prints doc as JSON, or the summary line, and returns the exit
// code: err's, explained, if the batch stopped; 1 if an item failed.
func (o *operation) batchDone(doc any, summary string, err error, failed int) int {
	if o.json {
		o.printJSON(doc)
	} else {
		fmt.Fprintln(o.out, summary)
	}
	if err != nil {
		return o.fail(err)
	}
	if failed > 0 {
		return exitFailed
	}
	return exitOK
}

// dash is s, or "-" for nothing, in a table's cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// plural says "1 message" or "3 messages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// queueName is the name at the end of a queue's URL.
func queueName(url string) string {
	return url[strings.LastIndexByte(url, '/')+1:]
}
