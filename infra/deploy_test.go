package main

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cdkCLI is the pinned CDK CLI make installs (make cdk).
const cdkCLI = "../.local/cdk/node_modules/.bin/cdk"

// freshClone copies the repository's tracked files, as they are in the
// working tree, into a new directory: what a clone holds, without build/,
// cdk.out/ or .local/.
func freshClone(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", "..", "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v (the test copies the repository's tracked files)", err)
	}
	dir := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join("..", f)
		info, err := os.Stat(src)
		if err != nil {
			continue // deleted in the working tree
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// cdk runs the CDK CLI in dir with args, as a user would at the root of a
// clone, and returns its output (stdout and stderr) and exit error.
func cdk(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	abs, err := filepath.Abs(cdkCLI)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(abs, append([]string{"--no-notices"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CDK_DISABLE_VERSION_CHECK=1", "CDK_DISABLE_CLI_TELEMETRY=1", "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	err = cmd.Run()
	return stderr.String(), err
}

// assets maps each function of the synthesized dev stack (by its
// functions/ directory) to its asset's bootstrap.
func assets(t *testing.T, dir string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "cdk.out", "Nudge-dev.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tpl template
	if err := json.Unmarshal(raw, &tpl); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::Lambda::EventSourceMapping", "AWS::Scheduler::Schedule", "AWS::CloudWatch::Alarm", "AWS::IAM::ManagedPolicy"} {
		if len(tpl.resources(typ)) == 0 {
			t.Errorf("the synthesized template has no %s", typ)
		}
	}
	out := map[string]string{}
	for _, fn := range tpl.resources("AWS::Lambda::Function") {
		name := strings.TrimPrefix(props(fn)["FunctionName"].(string), "nudge-dev-")
		path, _ := fn["Metadata"].(map[string]any)["aws:asset:path"].(string)
		if path == "" {
			t.Fatalf("function %s has no asset path in its metadata", name)
		}
		out[name] = filepath.Join(dir, "cdk.out", path, "bootstrap")
	}
	if len(out) != len(functionNames) {
		t.Fatalf("functions in the template: %v, want %v", out, functionNames)
	}
	return out
}

// checkBootstrap fails unless path is a linux/arm64 executable with the
// same bytes as want.
func checkBootstrap(t *testing.T, fn, path, want string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s's asset: %v", fn, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 || f.Class != elf.ELFCLASS64 || f.Type != elf.ET_EXEC {
		t.Errorf("%s's asset bootstrap is %v %v %v, want a 64-bit AArch64 executable", fn, f.Class, f.Machine, f.Type)
	}
	got, err1 := os.ReadFile(path)
	ref, err2 := os.ReadFile(want)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if !bytes.Equal(got, ref) {
		t.Errorf("%s's asset bootstrap (%d bytes) differs from %s (%d bytes), built from the same source", fn, len(got), want, len(ref))
	}
}

// TestCdkSynthInAFreshClone: in a copy of the repository without build/
// or cdk.out/, the pinned CDK CLI's plain `cdk synth` at the root builds
// the functions and the app itself and synthesizes the dev stack; prod,
// which needs an alarm target, is left out with one line saying what to
// set. Each function's asset is a linux/arm64 bootstrap byte for byte the
// same as a reproducible build of the current source (infra/build-
// functions.sh, into another directory). Changing a function's source and
// synthesizing again changes that asset, and only it, whatever GOARCH,
// GOFLAGS or NUDGE_GOARCH say: a stale or foreign binary is never
// deployed. A compile error, a bad setting or a missing Go toolchain ends
// with one line naming the fix, never a panic.
func TestCdkSynthInAFreshClone(t *testing.T) {
	if _, err := os.Stat(cdkCLI); err != nil {
		if os.Getenv("NUDGE_REQUIRE_CDK") != "" {
			t.Fatalf("the CDK CLI is not installed (%v): make cdk", err)
		}
		t.Skip("the CDK CLI is not installed: make cdk (make test-infra runs this)")
	}
	dir := freshClone(t)
	for _, gone := range []string{"build", "cdk.out", ".local"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); err == nil {
			t.Fatalf("the copy holds %s", gone)
		}
	}
	out, err := cdk(t, dir, nil, "synth", "--quiet")
	if err != nil {
		t.Fatalf("cdk synth in a fresh clone: %v\n%s", err, out)
	}
	if !strings.Contains(out, `nudge infra: Nudge-prod is left out (cdk deploy Nudge-prod would find no such stack): deployment: stage "prod": its alarms would notify nobody: set`) {
		t.Errorf("cdk synth without an alarm target does not say why prod is left out:\n%s", out)
	}

	// The assets are the current source, built reproducibly.
	ref := t.TempDir()
	if b, err := exec.Command("sh", "build-functions.sh", ref).CombinedOutput(); err != nil {
		t.Fatalf("build-functions.sh: %v\n%s", err, b)
	}
	first := assets(t, dir)
	for _, fn := range functionNames {
		checkBootstrap(t, fn, first[fn], filepath.Join(ref, fn, "bootstrap"))
	}

	// A change to the consumer's source changes its asset, and only its.
	change := "package main\n\nimport \"os\"\n\nfunc init() {\n\tif os.Getenv(\"NUDGE_STALE_CHECK\") == \"yes\" {\n\t\tprintln(\"a changed source\")\n\t}\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "functions", "consumer", "zz_stale_check.go"), []byte(change), 0o644); err != nil {
		t.Fatal(err)
	}
	// A folder in functions/ that is not a function is no obstacle, and the
	// caller's Go settings do not reach the assets: the platform is the
	// functions', and the bytes are the reproducible build's.
	if err := os.MkdirAll(filepath.Join(dir, "functions", "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "functions", "testdata", "notes.txt"), []byte("not a function\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	leaky := []string{"NUDGE_GOARCH=amd64", "NUDGE_GOOS=darwin", "GOARCH=amd64", "GOFLAGS=-gcflags=all=-N"}
	if out, err := cdk(t, dir, leaky, "synth", "--quiet"); err != nil {
		t.Fatalf("cdk synth after a change, with %v: %v\n%s", leaky, err, out)
	}
	second := assets(t, dir)
	if second["consumer"] == first["consumer"] || second["enqueue"] != first["enqueue"] {
		t.Errorf("after a change to the consumer only, the assets went from %v to %v", first, second)
	}
	if b, err := os.ReadFile(second["consumer"]); err != nil || !bytes.Contains(b, []byte("NUDGE_STALE_CHECK")) {
		t.Errorf("the consumer's new asset does not hold the changed source (%v)", err)
	}
	ref2 := t.TempDir()
	if b, err := exec.Command("sh", filepath.Join(dir, "infra", "build-functions.sh"), ref2).CombinedOutput(); err != nil {
		t.Fatalf("build-functions.sh in the copy: %v\n%s", err, b)
	}
	checkBootstrap(t, "consumer (changed)", second["consumer"], filepath.Join(ref2, "consumer", "bootstrap"))

	// A compile error stops the synthesis: no template from the old binary.
	if err := os.WriteFile(filepath.Join(dir, "functions", "consumer", "zz_stale_check.go"), []byte("package main\n\nfunc init() { undefinedName() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "cdk.out")); err != nil {
		t.Fatal(err)
	}
	out, err = cdk(t, dir, nil, "synth", "--quiet")
	if _, statErr := os.Stat(filepath.Join(dir, "cdk.out", "Nudge-dev.template.json")); err == nil || statErr == nil ||
		!strings.Contains(out, "undefinedName") || !strings.Contains(out, "nudge: building functions/consumer (linux/arm64) failed") {
		t.Errorf("a compile error: exit %v, template written %v; want a failure naming the error and no template:\n%s", err, statErr == nil, out)
	}
	if err := os.Remove(filepath.Join(dir, "functions", "consumer", "zz_stale_check.go")); err != nil {
		t.Fatal(err)
	}

	// Mistakes: one line naming the fix, a non-zero exit, no panic.
	bin := t.TempDir()
	for _, tool := range []string{"node", "sh", "dirname", "basename"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"prod without an alarm target", nil, []string{"-c", "stage=prod"},
			`nudge infra: deployment: stage "prod": its alarms would notify nobody: set an e-mail (-c alarmEmail=oncall@example.com) or an existing SNS topic (-c alarmTopicArn=arn:aws:sns:REGION:ACCOUNT:TOPIC)`},
		{"a malformed setting", nil, []string{"-c", "consumerTimeout=a minute"}, `nudge infra: context consumerTimeout="a minute" is not a whole number of seconds`},
		{"an unknown stage", nil, []string{"-c", "stage=staging"}, `nudge infra: deployment: unknown stage "staging"; use dev or prod`},
		{"no Go on PATH", []string{"PATH=" + bin}, nil, "nudge: cdk needs Go on PATH"},
	} {
		out, err := cdk(t, dir, tc.env, append([]string{"synth", "--quiet"}, tc.args...)...)
		if err == nil || !strings.Contains(out, tc.want) || strings.Contains(out, "panic") || strings.Contains(out, "goroutine") {
			t.Errorf("%s: exit %v; want a failure with the line %q and no panic:\n%s", tc.name, err, tc.want, out)
		}
	}
}
