// Command outcomes is the outcomes Lambda: it reads the ledger table's
// stream and puts an outcome event on EventBridge for every end of a
// delivery (sent, dead-lettered, expired, cancelled, needing review) and
// every report of its provider; it takes a failed delivery's fallback, and
// tells the operators' topic of an escalation.
// Configuration comes from the environment (see outcome.Settings);
// everything else lives in internal/outcome.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/nudgehq/nudge/internal/awsclient"
	"github.com/nudgehq/nudge/internal/ledger"
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
	led, err := ledger.New(awsclient.DynamoDB(cfg), s.LedgerConfig())
	if err != nil {
		return nil, err
	}
	oc := outcome.Config{Events: awsclient.EventBridge(cfg), Fallbacks: led, Bus: s.Bus, Stage: s.Stage, Logger: log}
	if s.OperatorsTopic != "" {
		oc.OperatorsTopic, oc.Notify = s.OperatorsTopic, sns.NewFromConfig(cfg)
	}
	return outcome.NewFunction(oc)
}
