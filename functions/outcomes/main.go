// Command outcomes is the outcomes Lambda: it reads the ledger table's
// stream and puts an outcome event on EventBridge for every end of a
// delivery (sent, dead-lettered, expired, cancelled, needing review).
// Configuration comes from the environment (see outcome.Settings);
// everything else lives in internal/outcome.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/nudgehq/nudge/internal/awsclient"
	"github.com/nudgehq/nudge/internal/outcome"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", "outcomes")
	fn, err := build(context.Background(), log)
	if err != nil {
		log.Error("cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(fn.Handle)
}

func build(ctx context.Context, log *slog.Logger) (*outcome.Function, error) {
	s, err := outcome.SettingsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := awsclient.Load(ctx)
	if err != nil {
		return nil, err
	}
	return outcome.NewFunction(outcome.Config{Events: awsclient.EventBridge(cfg), Bus: s.Bus, Stage: s.Stage, Logger: log})
}
