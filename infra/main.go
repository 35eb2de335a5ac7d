package main

import (
	"errors"
	"fmt"
	"os"
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
	stages, left, err := StagesFromContext(func(key string) any { return app.Node().TryGetContext(jsii.String(key)) })
	if err != nil {
		return err
	}
	for _, note := range left {
		fmt.Fprintln(os.Stderr, "nudge infra:", oneLine(errors.New(note)))
	}
	if err := checkBootstraps("build"); err != nil {
		return err
	}
	for _, s := range stages {
		NewNudgeStack(app, "Nudge-"+s.Name, &NudgeStackProps{Stage: s, BuildDir: "build", Nag: true})
	}
	app.Synth(nil)
	return nil
}

// checkBootstraps says what to do when a function's bootstrap is missing:
// the app was run by another command than cdk.json's.
func checkBootstraps(dir string) error {
	for _, fn := range functionNames {
		if _, err := os.Stat(dir + "/" + fn + "/bootstrap"); err != nil {
			return fmt.Errorf("%s/%s/bootstrap is missing: run cdk at the repository root (cdk.json builds it), or `make build` before `cdk --app build/infra-app`", dir, fn)
		}
	}
	return nil
}

// functionNames are the functions/ directories the stack deploys.
var functionNames = []string{"consumer", "enqueue"}

// oneLine joins a multi-line error (errors.Join) into one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
