package demo

import (
	"fmt"
	"slices"
	"testing"
)

// TestErrorKindsCountLinesThatDifferOnlyInDigits: the mapping's lines are
// counted by kind (request ids, times, ports and counts masked), and only
// the first kinds are kept, the rest counted together.
func TestErrorKindsCountLinesThatDifferOnlyInDigits(t *testing.T) {
	t.Parallel()
	e := newErrorKinds(2)
	for i, port := range []int{40, 4100, 42} {
		fmt.Fprintf(e, "time=04:08:0%d msg=failed records=%d error=\"Post http://127.0.0.1:%d/: connection refused\"\n", i, 10-i, port)
	}
	fmt.Fprintln(e, "time=04:09:00 msg=failed error=\"RequestId: fecf1b4e-fa1c-4a2b-9ba0-f1b2dd3c4e5f Error: Runtime.ExitError\"")
	fmt.Fprintln(e, "time=04:09:02 msg=failed error=\"RequestId: 0ecf1b4e-fa1c-4a2b-9ba0-f1b2dd3c4e5a Error: Runtime.ExitError\"")
	fmt.Fprintln(e, "time=04:09:01 msg=failed error=timeout")
	fmt.Fprintln(e, "time=04:09:03 msg=failed error=refused")
	want := []string{
		`3× time=04:08:00 msg=failed records=10 error="Post http://127.0.0.1:40/: connection refused"`,
		`2× time=04:09:00 msg=failed error="RequestId: fecf1b4e-fa1c-4a2b-9ba0-f1b2dd3c4e5f Error: Runtime.ExitError"`,
		"2× of 2 other kinds",
	}
	if got := e.Lines(); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if (*errorKinds)(nil).Lines() != nil {
		t.Error("a run without a mapping has lines")
	}
}
