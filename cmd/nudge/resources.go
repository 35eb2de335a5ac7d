package main

// The one resolver of what a command works on (the stage's ledger table and
// queues, from the flags or the NUDGE_* variables) and the one way to open
// the operator's ledger on them.

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/nudgehq/nudge/internal/awsclient"
	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/provider/registry"
)

// resourceFlags are the flags that name the stage's resources: given any of
// them, the NUDGE_* variables that name resources are not used.
const resourceFlags = "stage|table|queue-url|dlq-url"

// resources are the stage's resources a command works on: its ledger table
// and, for the commands with queue flags, its work queue and DLQ. They come
// from the flags or, when none of them is given, from $NUDGE_STAGE,
// $NUDGE_TABLE, $NUDGE_QUEUE_URL and $NUDGE_DLQ_URL: never a mix, which
// could name two stages (--stage dev with a NUDGE_DLQ_URL left from prod).
type resources struct {
	// stage, table, workURL and dlqURL are the flags' values, then, once
	// resolved, what the command works on.
	stage, table, workURL, dlqURL string
	// env are the NUDGE_* variables naming the same resources.
	env struct{ stage, table, workURL, dlqURL, providerQueues string }
	// routes are the work queues, once connected: the work queue, and
	// the providers' own (the stage's nudge-NAME-work-PROVIDER
	// queues, or $NUDGE_PROVIDER_QUEUES with the variables).
	routes envelope.Routes
	// queues is whether the command takes the queue flags (the operator
	// commands; the calendar's take the table alone).
	queues bool
	// attempts, when not zero, is the AWS clients' limit of attempts per
	// request (their default, 3, otherwise).
	attempts int

	// After connect: the AWS configuration, the clients, and the ledger.
	cfg    aws.Config
	db     *dynamodb.Client
	sqs    *sqs.Client
	ledger *ledger.Ledger
}

// addResources gives c the flags that name its resources: --stage and
// --table, and with queues --queue-url and --dlq-url.
func addResources(c *command, queues bool) *resources {
	r := &resources{queues: queues}
	fs := c.flags()
	if queues {
		fs.StringVar(&r.stage, "stage", "", "the deployed stage, naming the resources nudge-`NAME`-ledger, -work and -dlq [$NUDGE_STAGE]")
	} else {
		fs.StringVar(&r.stage, "stage", "", "the deployed stage, whose table is nudge-`NAME`-ledger [$NUDGE_STAGE]")
	}
	fs.StringVar(&r.table, "table", "", "the ledger `TABLE`, instead of the stage's [$NUDGE_TABLE]")
	r.env.stage = c.envString(resourceFlags, "NUDGE_STAGE", validStage)
	r.env.table = os.Getenv("NUDGE_TABLE")
	if queues {
		fs.StringVar(&r.workURL, "queue-url", "", "the work queue's `URL`, instead of the stage's [$NUDGE_QUEUE_URL]")
		fs.StringVar(&r.dlqURL, "dlq-url", "", "the DLQ's `URL`, instead of the stage's [$NUDGE_DLQ_URL]")
		r.env.workURL = c.envString(resourceFlags, "NUDGE_QUEUE_URL", validURL)
		r.env.dlqURL = c.envString(resourceFlags, "NUDGE_DLQ_URL", validURL)
		r.env.providerQueues = os.Getenv(envelope.EnvProviderQueues)
	}
	return r
}

// resolve settles the stage and the table from the flags or, if no flag
// names a resource, from the variables (and then the queue URLs too): the
// table is --table, else the stage's. It refuses a stage and a table that
// name different tables, saying where each came from.
func (r *resources) resolve() error {
	fromEnv := r.stage == "" && r.table == "" && r.workURL == "" && r.dlqURL == ""
	stage, table := r.stage, r.table
	if fromEnv {
		stage, table = r.env.stage, r.env.table
		r.workURL, r.dlqURL = r.env.workURL, r.env.dlqURL
	}
	named := deployment.Stage{Name: stage}.TableName()
	switch {
	case stage != "" && table != "" && table != named && fromEnv:
		return usageError(fmt.Sprintf("NUDGE_STAGE=%s names the table %s, and NUDGE_TABLE=%s another: unset one, or give --stage or --table",
			stage, named, table))
	case stage != "" && table != "" && table != named:
		return usageError(fmt.Sprintf("--stage %s names the table %s, and --table %s another: give one", stage, named, table))
	case table == "" && stage != "":
		table = named
	case table == "" && !fromEnv:
		return usageError("no ledger table: a queue URL flag was given, so the NUDGE_* variables are not used " +
			"(flags and variables could name two stages): pass --stage NAME or --table NAME too")
	case table == "" && r.queues:
		return usageError("no ledger table: pass --stage NAME (for the resources nudge-NAME-…) or --table NAME, or set NUDGE_STAGE or NUDGE_TABLE")
	case table == "":
		return usageError("no ledger table: pass --stage NAME (for the table nudge-NAME-ledger) or --table NAME, " +
			"or set NUDGE_STAGE or NUDGE_TABLE (the stack's output LedgerTable)")
	}
	r.stage, r.table = stage, table
	return nil
}

// connect resolves the resources, creates the clients with the standard AWS
// configuration (region, credentials, AWS_ENDPOINT_URL_* for the local
// stand-ins), finds the stage's queues when the command needs them, and
// opens the operator's ledger.
func (r *resources) connect(ctx context.Context, needQueues bool) error {
	if err := r.resolve(); err != nil {
		return err
	}
	cfg, err := awsclient.Load(ctx)
	if err != nil {
		return err
	}
	if r.attempts > 0 {
		cfg.RetryMaxAttempts = r.attempts
	}
	r.cfg, r.db, r.sqs = cfg, awsclient.DynamoDB(cfg), awsclient.SQS(cfg)
	if r.stage != "" && needQueues {
		st := deployment.Stage{Name: r.stage}
		for _, q := range []struct {
			url  *string
			name string
		}{{&r.workURL, st.WorkQueueName()}, {&r.dlqURL, st.DLQName()}} {
			if *q.url != "" {
				continue
			}
			out, err := r.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q.name)})
			if err != nil {
				return fmt.Errorf("find the queue %s: %w", q.name, err)
			}
			*q.url = aws.ToString(out.QueueUrl)
		}
	}
	if needQueues && (r.workURL == "" || r.dlqURL == "") {
		return usageError("no queues: pass --stage NAME, or --queue-url and --dlq-url (the stack's outputs WorkQueueUrl and DeadLetterQueueUrl)")
	}
	if needQueues {
		if err := r.findRoutes(ctx); err != nil {
			return err
		}
	}
	// An operator's clock may be a minute off: publish times and leases
	// (cancel, reschedule, purge) are judged with that margin. (A redrive
	// puts a delivery back at its dueAt, behind every cursor, so its publish
	// time needs none.) The shard count is the stack's, as the enqueue
	// recorded it in the table.
	r.ledger, err = ledger.New(r.db, ledger.Config{Table: r.table, ShardsFromRegistry: true, ClockSkew: ledger.OperatorClockSkew})
	return err
}

// findRoutes finds the providers' own work queues: with a stage, the
// queues named nudge-NAME-work-PROVIDER (deployment.Stage.ProviderQueueName)
// that exist, of the registry's providers (the operator policy allows
// GetQueueUrl on each such name); from the variables,
// $NUDGE_PROVIDER_QUEUES.
func (r *resources) findRoutes(ctx context.Context) error {
	if r.stage == "" {
		routes, err := envelope.ParseRoutes(r.workURL, r.env.providerQueues)
		if err != nil {
			return usageError(err.Error())
		}
		r.routes = routes
		return nil
	}
	r.routes = envelope.Routes{Default: r.workURL, ByProvider: map[string]string{}}
	st := deployment.Stage{Name: r.stage}
	for _, p := range registry.Names() {
		out, err := r.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(st.ProviderQueueName(p))})
		var api smithy.APIError
		switch {
		case errors.As(err, &api) && (api.ErrorCode() == "QueueDoesNotExist" || api.ErrorCode() == "AWS.SimpleQueueService.NonExistentQueue"):
			continue // the default provider (or a stage before its own queue): its messages use the work queue
		case err != nil:
			return fmt.Errorf("find the queue %s: %w", st.ProviderQueueName(p), err)
		}
		r.routes.ByProvider[p] = aws.ToString(out.QueueUrl)
	}
	return nil
}
