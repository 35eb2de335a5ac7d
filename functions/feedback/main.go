// Command feedback is the feedback Lambda: it reads the queue the stack's
// rule fills with SES's sending events (the stage's configuration set
// publishes them to the default EventBridge bus) and records each on its
// delivery in the ledger: sent by SES, delivered, bounced, complained of,
// rejected, delayed, not rendered. Configuration comes from the
// environment (see feedback.Settings); everything else lives in
// internal/feedback.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/nudgehq/nudge/internal/awsclient"
	"github.com/nudgehq/nudge/internal/feedback"
	"github.com/nudgehq/nudge/internal/ledger"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", "feedback")
	fn, err := build(context.Background(), log)
	if err != nil {
		log.Error("cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(fn.Handle)
}

func build(ctx context.Context, log *slog.Logger) (*feedback.Function, error) {
	s, err := feedback.SettingsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := awsclient.Load(ctx)
	if err != nil {
		return nil, err
	}
	led, err := ledger.New(awsclient.DynamoDB(cfg), ledger.Config{Table: s.Table})
	if err != nil {
		return nil, err
	}
	return feedback.NewFunction(feedback.Config{Ledger: led, Stage: s.Stage, Logger: log})
}
