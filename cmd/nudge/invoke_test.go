package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/standin/standintest"
)

// TestLocalInvokeRunsTheRealBootstrap builds the consumer, runs it under the
// Lambda runtime interface emulator against fresh stand-ins with the sample
// batch (one delivery failing permanently), and checks what the README's
// run command shows.
func TestLocalInvokeRunsTheRealBootstrap(t *testing.T) {
	standintest.AWSConfig(t) // skips (or fails under CI) without the stand-ins
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bootstrap, "../../functions/consumer")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	var out bytes.Buffer
	res, err := invoke(context.Background(), &out, "../../events/sqs-batch.json", bootstrap, "rem-185=400")
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := map[string]ledger.Status{"rem-184:email:webhook": ledger.StatusSent, "rem-185:sms:webhook": ledger.StatusDead, "rem-186:email:webhook": ledger.StatusSent}
	for k, s := range want {
		if res.Statuses[k] != s {
			t.Errorf("%s is %q, want %q", k, res.Statuses[k], s)
		}
	}
	if len(res.Response.BatchItemFailures) != 0 || res.Accepted != 2 || res.DLQDepth != "1" {
		t.Errorf("response %+v, accepted %d, DLQ %s", res.Response, res.Accepted, res.DLQDepth)
	}
	for _, line := range []string{"REPORT RequestId", `"outcome":"dead"`, `"_aws"`} {
		if !strings.Contains(res.Output, line) {
			t.Errorf("function output lacks %q", line)
		}
	}
	if t.Failed() {
		t.Log(out.String())
	}
}
