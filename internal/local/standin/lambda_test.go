package standin_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/local/standin"
)

// startSleeper runs testdata/sleeper under the emulator.
func startSleeper(t *testing.T) *standin.Lambda {
	t.Helper()
	dir, err := standin.DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(standin.RIEBinary(dir)); err != nil {
		if os.Getenv("NUDGE_REQUIRE_STANDINS") != "" {
			t.Fatalf("the emulator is not installed in %s", dir)
		}
		t.Skip("the Lambda emulator is not installed (make test installs it)")
	}
	bin := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, "./testdata/sleeper")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the sleeper: %v\n%s", err, out)
	}
	fn, err := standin.StartLambda(context.Background(), dir, bin, standin.Options{Log: &strings.Builder{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fn.Stop)
	return fn
}

func invokePid(t *testing.T, fn *standin.Lambda, sleep string) (int, error) {
	t.Helper()
	out, err := fn.Invoke(context.Background(), []byte(`{"Sleep":"`+sleep+`"}`))
	if err != nil {
		return 0, err
	}
	var resp struct{ Pid int }
	if err := json.Unmarshal(out, &resp); err != nil || resp.Pid == 0 {
		t.Fatalf("answer %s: %v", out, err)
	}
	return resp.Pid, nil
}

// TestKillRuntimeFailsTheInvocationAndTheNextStartsANewRuntime: a runtime
// killed mid-invocation fails that invocation, and the next one runs in a
// new runtime, as in Lambda after a crash.
func TestKillRuntimeFailsTheInvocationAndTheNextStartsANewRuntime(t *testing.T) {
	fn := startSleeper(t)
	first, err := invokePid(t, fn, "0s")
	if err != nil {
		t.Fatal(err)
	}
	if pid, ok := fn.Runtime(); !ok || pid != first {
		t.Fatalf("Runtime() = %d, %v; the function answered from %d", pid, ok, first)
	}
	rss, err := fn.PeakRSS()
	if err != nil || rss < 1<<20 || rss > 1<<30 {
		t.Fatalf("PeakRSS() = %d, %v; want the runtime's few MB", rss, err)
	}
	done := make(chan error, 1)
	go func() { _, err := invokePid(t, fn, "5s"); done <- err }()
	time.Sleep(300 * time.Millisecond)
	if err := fn.KillRuntime(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "Runtime exited") {
			t.Fatalf("the killed invocation answered %v; want a runtime exit error", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("the killed invocation did not end")
	}
	second, err := invokePid(t, fn, "0s")
	if err != nil {
		t.Fatalf("the invocation after the kill: %v", err)
	}
	if second == first {
		t.Fatalf("the invocation after the kill ran in the killed runtime %d", first)
	}
}

// TestProcessAgeCountsFromTheStart: what KillRuntime's guard reads, a
// process's age, is near zero as it starts and grows as it runs.
func TestProcessAgeCountsFromTheStart(t *testing.T) {
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	young, err := standin.ProcessAge(cmd.Process.Pid)
	if err != nil || young < -20*time.Millisecond || young > 2*time.Second {
		t.Fatalf("age just after the start: %v, %v", young, err)
	}
	time.Sleep(300 * time.Millisecond)
	older, err := standin.ProcessAge(cmd.Process.Pid)
	if err != nil || older < young+250*time.Millisecond || older > young+5*time.Second {
		t.Fatalf("age 300 ms later: %v (first %v), %v", older, young, err)
	}
	if _, err := standin.ProcessAge(1 << 30); err == nil {
		t.Fatal("the age of a process that does not exist: no error")
	}
}
