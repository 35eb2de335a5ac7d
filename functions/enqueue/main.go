// Command enqueue is the enqueue Lambda: on each schedule tick it hands the
// deliveries whose time has come from the calendar (the ledger's due index)
// to the work queue, and repairs hand-offs that were lost. Configuration
// comes from the environment (see enqueue.Settings); everything else lives
// in pkg/.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/awsclient"
	"github.com/nudgehq/nudge/internal/enqueue"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/pkg/schedule"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", "enqueue")
	fn, err := build(context.Background(), log)
	if err != nil {
		log.Error("cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(fn.Handle)
}

func build(ctx context.Context, log *slog.Logger) (*enqueue.Function, error) {
	s, err := enqueue.SettingsFromEnv(os.Getenv)
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
	// Open the connections the first tick needs during init, one per shard
	// worked at once, to DynamoDB (a GetItem of an item that never
	// exists) and to SQS (an empty SendMessageBatch: allowed as
	// SendMessage, refused as empty, nothing sent); its role allows both.
	awsclient.Warm(ctx, awsclient.WarmLimit, s.Concurrency, led.WarmRead, func(ctx context.Context) error {
		_, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &s.QueueURL, Entries: []sqstypes.SendMessageBatchRequestEntry{}})
		return err
	})
	rec := metrics.New(map[string]string{"Function": "enqueue"})
	// The recurring reminders' occurrences are created by the store every
	// door creates reminders with; the intake checked each series at its
	// creation, so no provider's door is asked again here.
	series, err := schedule.New(schedule.Config{Ledger: led, Logger: log})
	if err != nil {
		return nil, err
	}
	e, err := enqueue.New(enqueue.Config{
		Series: series, SeriesLedger: led,
		Ledger: led, Queue: q, QueueURL: s.QueueURL, Routes: s.Routes, Depths: q, Shards: s.Shards,
		Settle: s.Settle, OverdueAfter: s.OverdueAfter, RepairAfter: s.RepairAfter, RepairLimit: s.RepairLimit,
		Concurrency: s.Concurrency, PageSize: s.PageSize, CutoffMargin: s.CutoffMargin,
		Logger: log, Metrics: rec, Stage: stageFacts(s),
	})
	if err != nil {
		return nil, err
	}
	return enqueue.NewFunction(enqueue.FunctionConfig{Enqueuer: e, Metrics: rec, Logger: log})
}

// stageFacts is what the stack runs, for the enqueue to record; nil when
// the stack does not say.
func stageFacts(s enqueue.Settings) *ledger.StageFacts {
	if len(s.Providers) == 0 {
		return nil
	}
	return &ledger.StageFacts{Providers: s.Providers, Env: s.ProviderEnv}
}
