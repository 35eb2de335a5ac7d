// Command intake is the HTTP intake Lambda, behind a function URL with
// AWS_IAM auth: applications schedule, read, reschedule, list and cancel
// reminders with SigV4-signed requests (docs/api.md, docs/openapi.yaml).
// Configuration comes from the environment (see intake.Settings);
// everything else lives in pkg/.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/nudgehq/nudge/internal/awsclient"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/provider"
	"github.com/nudgehq/nudge/pkg/schedule"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", "intake")
	h, err := build(context.Background(), log)
	if err != nil {
		log.Error("cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(intake.FunctionURL(h, log))
}

func build(ctx context.Context, log *slog.Logger) (*intake.Handler, error) {
	s, err := intake.SettingsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := awsclient.Load(ctx)
	if err != nil {
		return nil, err
	}
	// The shard count is the registry's, which the enqueue records: the
	// intake may not write the registry (its role writes REM# partitions
	// only), nor spread deliveries over a count the enqueue does not read.
	led, err := ledger.New(awsclient.DynamoDB(cfg), ledger.Config{Table: s.Table, ShardsFromRegistry: true, Lookahead: s.Lookahead})
	if err != nil {
		return nil, err
	}
	// Open the connection the first request needs during init (two: a
	// request reads and writes in turn, a spare for the SDK's retry): a
	// GetItem of an item that never exists, which its role allows.
	awsclient.Warm(ctx, awsclient.WarmLimit, 2, led.WarmRead)
	// Each provider's checks of a delivery, from the variables the stack
	// gave it (the templates it deployed, say: known without asking SES).
	doors, err := registry.Doors(s.Providers, provider.Env{Getenv: os.Getenv, AWS: cfg})
	if err != nil {
		return nil, err
	}
	sc := schedule.Config{Ledger: led, Providers: s.Providers, Doors: doors, Lateness: s.Lateness, MaxAhead: s.MaxAhead, Windows: s.Windows, Logger: log}
	if s.QueueURL != "" {
		// Short notice: what is due within the lookahead is published at
		// once, not at the enqueue's next tick.
		if sc.HandOff, err = enqueue.NewHandOff(enqueue.HandOffConfig{Queue: awsclient.SQS(cfg), QueueURL: s.QueueURL, Routes: s.Routes, Logger: log}); err != nil {
			return nil, err
		}
	}
	store, err := schedule.New(sc)
	if err != nil {
		return nil, err
	}
	return intake.New(intake.Config{Store: store, Logger: log, Metrics: metrics.New(map[string]string{"Function": "intake"}),
		FullAccess: s.FullAccessPrincipals})
}
