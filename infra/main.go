package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	stage, err := StageFromContext(func(key string) any { return app.Node().TryGetContext(jsii.String(key)) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "nudge infra:", err)
		os.Exit(1)
	}
	// cdk.json runs the app from the repository root, beside build/.
	NewNudgeStack(app, "Nudge-"+stage.Name, &NudgeStackProps{Stage: stage, BuildDir: "build", Nag: true})
	app.Synth(nil)
}
