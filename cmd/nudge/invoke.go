package main

import (
	"fmt"
	"os"
)

func localInvoke(args []string) int {
	fmt.Fprintln(os.Stderr, "nudge local invoke: not built yet", args)
	return 1
}
