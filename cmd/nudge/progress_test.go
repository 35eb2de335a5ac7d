package main

import (
	"strings"
	"testing"
	"time"
)

func TestProgressBarOnATerminalAndLinesOtherwise(t *testing.T) {
	t.Parallel()
	var term strings.Builder
	p := progressPrinter(&term, true, time.Now())
	p(1, 4)
	p(4, 4) // the last call always draws
	if !strings.HasPrefix(term.String(), "\r[#######") || !strings.Contains(term.String(), "\r[##############################] 4/4") {
		t.Fatalf("terminal output %q", term.String())
	}
	var log strings.Builder
	p = progressPrinter(&log, false, time.Now())
	for i := 1; i <= 4; i++ {
		p(i, 4)
	}
	if lines := strings.Split(strings.TrimSpace(log.String()), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "import: 4/4 rows done") || strings.Contains(log.String(), "\r") {
		t.Fatalf("log output %q; want the first line and the last, no carriage returns", log.String())
	}
}
