package demo

import (
	"fmt"
	"os"
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

// TestAProviderQueuesConsumersCountWithTheOthers: a consumer instance of a
// provider's own queue (consumer-sns-1), which openLogs did not name, gets
// a log of its own, and its invocations and error lines count in the
// run's.
func TestAProviderQueuesConsumersCountWithTheOthers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := openLogs(dir, "demo", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	for _, name := range []string{"consumer-1", "consumer-sns-1"} {
		w := l.output(name)
		if w == nil {
			t.Fatalf("no output for %s", name)
		}
		fmt.Fprintf(w, "REPORT RequestId: 1 Duration: 10 ms Billed Duration: 10 ms\n")
	}
	fmt.Fprintln(l.output("consumer-sns-1"), `{"level":"ERROR","msg":"boom"}`)
	if l.output("consumer-sns-1") != l.output("consumer-sns-1") {
		t.Fatal("a second call made a second log")
	}
	if got := l.consumer.invocations(); got != 2 {
		t.Fatalf("%d consumer invocations counted, want 2 (both instances)", got)
	}
	if got := l.consumer.errorLines(); len(got) != 1 {
		t.Fatalf("error lines %v, want the sns instance's", got)
	}
	if _, err := os.Stat(LogPath(dir, "demo", "consumer-sns-1.log")); err != nil {
		t.Fatalf("no file for the sns instance: %v", err)
	}
	if l.output("ghost") != nil {
		t.Fatal("a name that is no consumer's got a log")
	}
}
