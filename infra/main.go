package main

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// main defines the stacks. cdk.json runs it through infra/app.sh, from the
// repository root, after building the functions into build/. Every
// mistake ends it with one line naming the fix and exit status 1; none
// panics.
func main() {
	err := run()
	jsii.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nudge infra:", oneLine(err))
		os.Exit(1)
	}
}

func run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v (a defect in infra/: please report it)", r)
		}
	}()
	app := awscdk.NewApp(nil)
	get := func(key string) any { return app.Node().TryGetContext(jsii.String(key)) }
	stages, left, err := StagesFromContext(get)
	if err != nil {
		return err
	}
	for _, note := range left {
		fmt.Fprintln(os.Stderr, "nudge infra:", oneLine(errors.New(note)))
	}
	var options []Options
	for _, s := range stages {
		o, err := OptionsFromContext(s.Name, get)
		if err != nil {
			return err
		}
		options = append(options, o)
	}
	if err := buildFunctions("build"); err != nil {
		return err
	}
	for i, s := range stages {
		NewNudgeStack(app, "Nudge-"+s.Name, &NudgeStackProps{Stage: s, BuildDir: "build", Nag: true, Options: options[i]})
	}
	app.Synth(nil)
	return nil
}

// buildFunctions builds every function's bootstrap into dir from the
// source checked out here, whatever command ran the app (cdk.json's, or
// cdk --app build/infra-app): the assets are always the current source.
// It then checks that each is a linux/arm64 executable, the platform the
// stack declares.
func buildFunctions(dir string) error {
	if _, err := os.Stat("infra/build-functions.sh"); err != nil {
		return errors.New("run cdk at the repository root, where cdk.json is: the app builds the functions from there")
	}
	build := exec.Command("sh", "infra/build-functions.sh", dir)
	// The Lambda platform is not the caller's to choose: NUDGE_GOOS and
	// NUDGE_GOARCH (make build-local's) must not reach this build.
	build.Env = append(os.Environ(), "NUDGE_GOOS=", "NUDGE_GOARCH=")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("the functions did not build (%v): fix what the lines above say", err)
	}
	for _, fn := range slices.Concat(functionNames, sesFunctionNames) {
		path := dir + "/" + fn + "/bootstrap"
		f, err := elf.Open(path)
		if err != nil {
			return fmt.Errorf("%s: %v; rebuild it: cdk synth at the repository root", path, err)
		}
		machine := f.Machine
		f.Close()
		if machine != elf.EM_AARCH64 {
			return fmt.Errorf("%s is built for %v, not linux/arm64 (AArch64), the functions' platform: check GOFLAGS and the GO* variables in your environment", path, machine)
		}
	}
	return nil
}

// functionNames are the functions/ directories every stage deploys;
// sesFunctionNames those a stage running ses deploys besides.
var (
	functionNames    = []string{"consumer", "enqueue", "intake", "outcomes"}
	sesFunctionNames = []string{"feedback"}
)

// oneLine joins a multi-line error (errors.Join) into one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
