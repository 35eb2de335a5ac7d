// Command consumer is the consumer Lambda: it delivers the reminders named by
// SQS records, once each, and reports partial batch failures. Configuration
// comes from the environment (see consumer.Settings); everything else lives in
// pkg/.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/awsclient"
	"github.com/nudgehq/nudge/internal/circuit"
	"github.com/nudgehq/nudge/internal/consumer"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/internal/retry"
	"github.com/nudgehq/nudge/pkg/batch"
	"github.com/nudgehq/nudge/pkg/heartbeat"
	"github.com/nudgehq/nudge/pkg/provider"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", "consumer")
	fn, err := build(context.Background(), log)
	if err != nil {
		log.Error("cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(fn.Invoke)
}

func build(ctx context.Context, log *slog.Logger) (*consumer.Function, error) {
	s, err := consumer.SettingsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := awsclient.Load(ctx)
	if err != nil {
		return nil, err
	}
	db, q := awsclient.DynamoDB(cfg), awsclient.SQS(cfg)
	led, err := ledger.New(db, ledger.Config{Table: s.Table, Shards: s.Shards, Lookahead: s.Lookahead})
	if err != nil {
		return nil, err
	}
	// Open the connections the first batch needs during init: one to
	// DynamoDB per record in flight (the claims), one to SQS (deferrals,
	// dead letters, the heartbeat). Its role allows UpdateItem on the table
	// (a refused condition, nothing written) and GetQueueAttributes on the
	// work queue (the event source mapping's grant).
	awsclient.Warm(ctx, awsclient.WarmLimit, s.Concurrency, led.WarmWrite)
	awsclient.Warm(ctx, awsclient.WarmLimit, 1, func(ctx context.Context) error {
		_, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &s.QueueURL, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		return err
	})
	// Each provider the stage runs, built by its driver from the variables
	// the stack gave it (its secret read once, here).
	providers, limits, err := consumer.BuildProviders(ctx, s, provider.Env{Getenv: os.Getenv, AWS: cfg,
		ReadSecret: func(ctx context.Context, s provider.Secret) (string, error) {
			return awsclient.ReadSecret(ctx, awsclient.SecretsManager(cfg), s.ID, s.Setting, s.KeySetting)
		}})
	if err != nil {
		return nil, err
	}
	backoff, err := retry.New(retry.Config{Base: s.BackoffBase, Cap: s.BackoffCap})
	if err != nil {
		return nil, err
	}
	hb, err := heartbeat.New(heartbeat.Config{Visibility: q, Extension: s.Visibility, Logger: log})
	if err != nil {
		return nil, err
	}
	rec := metrics.New(map[string]string{"Function": "consumer"})
	c, err := consumer.New(consumer.Config{
		Ledger: led, Providers: providers, Ambiguous: s.Ambiguous, RecordWaits: s.RecordWaits, Limits: limits,
		SendTime: s.ProviderTimeout + consumer.LedgerAllowance,
		Queue:    q, QueueURL: s.QueueURL, Routes: s.Routes, DLQURL: s.DLQURL,
		MaxAttempts: s.MaxAttempts, MaxReceiveCount: s.MaxReceiveCount,
		Backoff: backoff, Logger: log, Metrics: rec,
		Circuit: circuit.Config{Failures: s.CircuitFailures, CoolDown: s.CircuitCoolDown, MaxCoolDown: s.CircuitMaxCoolDown},
	})
	if err != nil {
		return nil, err
	}
	// A record's visibility changes go to the work queue it came from:
	// the default, or a provider's own.
	queueOf := func(arn string) string {
		if url, ok := s.Routes.FromARN(arn); ok {
			return url
		}
		return s.QueueURL
	}
	proc, err := batch.New(c, batch.Config{
		Concurrency: s.Concurrency, CutoffMargin: s.CutoffMargin, Visibility: q, Logger: log,
		QueueURL:   queueOf,
		Middleware: []batch.Middleware{hb.Middleware(func(rec events.SQSMessage) string { return queueOf(rec.EventSourceARN) })},
	})
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return consumer.NewFunction(consumer.FunctionConfig{Processor: proc, Metrics: rec, Logger: log})
}
