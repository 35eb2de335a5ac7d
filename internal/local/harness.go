package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/esm"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/local/streammap"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/status"
)

// HarnessConfig configures a Harness.
type HarnessConfig struct {
	// Bootstraps is the folder holding consumer/bootstrap,
	// enqueue/bootstrap, outcomes/bootstrap, intake/bootstrap (with
	// IntakeInstances) and feedback/bootstrap (when the stage runs ses)
	// built for this machine. Default "build/local".
	Bootstraps string
	// Consumers is how many consumer instances run, each one invocation at
	// a time: the event source mapping's invokers. Default the stage's
	// maximum concurrency.
	Consumers int
	// ConsumerFronts are where the consumers' SES and SNS calls go (fault
	// fronts before the stand-ins); only SES and SNS are read. Empty: the
	// stand-ins.
	ConsumerFronts Endpoints
	// ConsumerOverrides replace variables of each consumer's environment
	// (KEY=VALUE, as Env's overrides).
	ConsumerOverrides []string
	// EnqueueTimeout is the enqueue's function timeout. Default the
	// stage's.
	EnqueueTimeout time.Duration
	// EnqueueOverrides replace variables of the enqueue's environment.
	EnqueueOverrides []string
	// IntakeInstances is how many intake instances serve its function URL.
	// Default none: no intake.
	IntakeInstances int
	// IntakeOverrides replace variables of the intake's environment.
	IntakeOverrides []string
	// PollWait is the event source mapping's long-poll wait. Default the
	// mapping's (20 s).
	PollWait time.Duration
	// Output returns where a function instance's output goes, by its name
	// ("consumer-1", …, "enqueue", "intake", "outcomes", "feedback"). Nil,
	// or a nil writer: discarded.
	Output func(name string) io.Writer
	// MappingLog receives the event source mapping's lines (a failed
	// invocation, a failed receive, …). Nil: discarded.
	MappingLog io.Writer
}

// Harness is the local system as every runner drives it: the System, its
// table and queues emptied of an earlier run's, the functions running
// under the emulator with the stack's environment and their AWS requests
// counted, and an event source mapping ready to feed the work queue to the
// consumers. The runner invokes the enqueue on its schedule, runs the
// mapping, and reads what it needs.
type Harness struct {
	*System
	// Ledger reads the table on an uncounted client: the runners' own
	// reads, which the figures leave out.
	Ledger *ledger.Ledger
	// Proxies count each function's AWS requests (and DynamoDB's capacity
	// units), by caller: "consumer DynamoDB", "consumer SQS", "enqueue
	// DynamoDB", "enqueue SQS", and with an intake "intake DynamoDB" and
	// "intake SQS" (its short-notice hand-offs).
	Proxies map[string]*standin.Proxy
	// Consumers are the consumer instances, the mapping's invokers in
	// order, named consumer-1, …, then each paced queue's mapping's,
	// named consumer-PROVIDER-1, …. Each posts to its own path of the
	// webhook (WebhookURL/consumer-1, …), so that the provider's record
	// tells which instance an answer went to.
	Consumers []*Function
	// Enqueue is the enqueue function, invoked by the runner's schedule.
	Enqueue *Function
	// Intake is the intake behind its function URL; nil without
	// IntakeInstances.
	Intake *Intake
	// Mapping feeds the work queue to the consumers while it runs.
	Mapping *esm.Mapping
	// ProviderMappings feed each provider's own work queue to its
	// consumers, by provider: the queue's batch size and maximum
	// concurrency (deployment.ProviderQueue). RunMappings runs them with
	// Mapping.
	ProviderMappings map[string]*esm.Mapping
	// Outcomes is the outcomes function, and OutcomeStream the stream
	// mapping that feeds it the ledger's changes from StartHarness to
	// Close: the outcome events reach the outcomes queue through the local
	// bus (System.Bus) as they happen. DrainOutcomes waits for them.
	Outcomes      *Function
	OutcomeStream *streammap.Mapping
	// Feedback is the feedback function, and FeedbackMapping the event
	// source mapping that feeds it the feedback queue from StartHarness to
	// Close, when the stage runs ses (nil otherwise): SES's events reach
	// the ledger through the local bus's rule as they happen.
	// DrainFeedback waits for them.
	Feedback        *Function
	FeedbackMapping *esm.Mapping

	streamDone chan struct{}
	streamErr  error
	stop       []func()
}

// StartHarness empties s's table and queues (an earlier run's figures are
// not this one's), starts counting proxies before the stand-ins, the
// consumers, the enqueue and the intake under the emulator with the
// stack's environment (Env) and their AWS calls sent through the proxies,
// and makes the event source mapping with the stage's batch size, batching
// window and the consumer's timeout. It starts the outcomes function with
// the ledger's stream mapping and, when the stage runs ses, the feedback
// function with its queue's mapping, both running until Close. Close stops
// what it started; the System stays.
func (s *System) StartHarness(ctx context.Context, cfg HarnessConfig) (h *Harness, err error) {
	cfg.Bootstraps = cmp.Or(cfg.Bootstraps, "build/local")
	cfg.Consumers = cmp.Or(cfg.Consumers, s.Stage.MaxConcurrency)
	if cfg.Consumers < 1 || cfg.IntakeInstances < 0 {
		return nil, fmt.Errorf("local: %d consumers, %d intake instances; start at least 1 consumer, and 0 or more intake instances",
			cfg.Consumers, cfg.IntakeInstances)
	}
	output := func(name string) io.Writer {
		if cfg.Output == nil {
			return io.Discard
		}
		if w := cfg.Output(name); w != nil {
			return w
		}
		return io.Discard
	}
	h = &Harness{System: s, Proxies: map[string]*standin.Proxy{}}
	defer func() {
		if err != nil {
			h.Close()
			h = nil
		}
	}()
	if h.Ledger, err = ledger.New(s.DB, ledger.Config{Table: s.Resources.Table}); err != nil {
		return h, err
	}
	if err := h.empty(ctx); err != nil {
		return h, err
	}
	callers := []string{"consumer DynamoDB", "consumer SQS", "enqueue DynamoDB", "enqueue SQS"}
	if cfg.IntakeInstances > 0 {
		callers = append(callers, "intake DynamoDB", "intake SQS")
	}
	if s.Resources.FeedbackURL != "" {
		callers = append(callers, "feedback DynamoDB")
	}
	for _, name := range callers {
		target := s.DynamoDBEndpoint
		if strings.HasSuffix(name, "SQS") {
			target = s.SQSEndpoint
		}
		p, err := standin.NewProxy(target)
		if err != nil {
			return h, err
		}
		h.stop = append(h.stop, func() { p.Close() })
		h.Proxies[name] = p
	}

	// The consumers, the mapping's invokers.
	var invokers []esm.Invoker
	ep := h.counted("consumer")
	ep.SES, ep.SNS = cfg.ConsumerFronts.SES, cfg.ConsumerFronts.SNS
	for i := range cfg.Consumers {
		name := fmt.Sprintf("consumer-%d", i+1)
		env, err := s.Env("consumer", ep, 0, append(s.sinkPath(name), cfg.ConsumerOverrides...)...)
		if err != nil {
			return h, err
		}
		fn, err := h.start(ctx, name, filepath.Join(cfg.Bootstraps, "consumer", "bootstrap"), env, output(name))
		if err != nil {
			return h, err
		}
		h.Consumers = append(h.Consumers, fn)
		invokers = append(invokers, fn)
	}
	env, err := s.Env("enqueue", h.counted("enqueue"), cfg.EnqueueTimeout, cfg.EnqueueOverrides...)
	if err != nil {
		return h, err
	}
	if h.Enqueue, err = h.start(ctx, "enqueue", filepath.Join(cfg.Bootstraps, "enqueue", "bootstrap"), env, output("enqueue")); err != nil {
		return h, err
	}
	if err := h.startOutcomes(ctx, filepath.Join(cfg.Bootstraps, "outcomes", "bootstrap"), output("outcomes"), cfg.MappingLog); err != nil {
		return h, err
	}
	if err := h.startFeedback(ctx, filepath.Join(cfg.Bootstraps, "feedback", "bootstrap"), output, cfg); err != nil {
		return h, err
	}
	if cfg.IntakeInstances > 0 {
		// The intake's DynamoDB calls, and the SQS calls of its
		// short-notice hand-off, counted by proxies.
		if h.Intake, err = s.StartIntake(ctx, filepath.Join(cfg.Bootstraps, "intake", "bootstrap"), cfg.IntakeInstances,
			h.counted("intake"), output("intake"), cfg.IntakeOverrides...); err != nil {
			return h, err
		}
		h.stop = append(h.stop, h.Intake.Close)
	}
	mappingLog := cmp.Or[io.Writer](cfg.MappingLog, io.Discard)
	h.Mapping, err = esm.New(esm.Config{Queue: s.SQS, QueueURL: s.Resources.WorkURL, QueueARN: s.Resources.WorkARN,
		BatchSize: s.Stage.BatchSize, BatchingWindow: s.Stage.BatchingWindow, Invokers: invokers, PollWait: cfg.PollWait,
		FunctionTimeout: s.Stage.ConsumerTimeout, Logger: slog.New(slog.NewTextHandler(mappingLog, nil))})
	if err != nil {
		return h, err
	}
	// Each provider's own queue (every provider's but the default one's,
	// paced or not): its own mapping, on as many instances as its maximum
	// concurrency (the emulator takes one invocation at a time), as the
	// stack's mapping on the same function.
	h.ProviderMappings = map[string]*esm.Mapping{}
	for _, q := range s.Resources.ownInOrder() {
		var paced []esm.Invoker
		instances := q.MaxConcurrency
		if q.Rate <= 0 {
			// An unpaced provider's own queue: as many instances as the
			// default queue's (its mapping's concurrency is the stage's).
			instances = min(instances, len(invokers))
		}
		for i := range instances {
			name := fmt.Sprintf("consumer-%s-%d", q.Provider, i+1)
			env, err := s.Env("consumer", ep, 0, append(s.sinkPath(name), cfg.ConsumerOverrides...)...)
			if err != nil {
				return h, err
			}
			fn, err := h.start(ctx, name, filepath.Join(cfg.Bootstraps, "consumer", "bootstrap"), env, output(name))
			if err != nil {
				return h, err
			}
			h.Consumers = append(h.Consumers, fn)
			paced = append(paced, fn)
		}
		if h.ProviderMappings[q.Provider], err = esm.New(esm.Config{Queue: s.SQS, QueueURL: q.URL, QueueARN: q.ARN,
			BatchSize: q.BatchSize, BatchingWindow: s.Stage.BatchingWindow, Invokers: paced, PollWait: cfg.PollWait,
			FunctionTimeout: s.Stage.ConsumerTimeout, Logger: slog.New(slog.NewTextHandler(mappingLog, nil)).With("queue", q.Name)}); err != nil {
			return h, err
		}
	}
	return h, nil
}

// WorkDepth is every work queue's messages, summed.
func (h *Harness) WorkDepth(ctx context.Context) (status.Depth, error) {
	var sum status.Depth
	for _, url := range h.Resources.WorkURLs() {
		d, err := status.QueueDepth(ctx, h.SQS, url)
		if err != nil {
			return sum, err
		}
		sum.Visible, sum.InFlight, sum.Delayed = sum.Visible+d.Visible, sum.InFlight+d.InFlight, sum.Delayed+d.Delayed
	}
	return sum, nil
}

// Mappings are the work queues' mappings: Mapping, then each paced
// provider's in the order of their names.
func (h *Harness) Mappings() []*esm.Mapping {
	out := []*esm.Mapping{h.Mapping}
	for _, name := range slices.Sorted(maps.Keys(h.ProviderMappings)) {
		out = append(out, h.ProviderMappings[name])
	}
	return out
}

// RunMappings runs every work queue's mapping until ctx ends.
func (h *Harness) RunMappings(ctx context.Context) {
	var wg sync.WaitGroup
	for _, m := range h.Mappings() {
		wg.Go(func() { m.Run(ctx) })
	}
	wg.Wait()
}

// MappingStats are the work queues' mappings' Stats, summed.
func (h *Harness) MappingStats() esm.Stats {
	var sum esm.Stats
	for _, m := range h.Mappings() {
		st := m.Stats()
		sum.Invocations += st.Invocations
		sum.Records += st.Records
		sum.Deleted += st.Deleted
		sum.Returned += st.Returned
		sum.BatchFailures += st.BatchFailures
		sum.Timeouts += st.Timeouts
		sum.UnseenReceives += st.UnseenReceives
		sum.ReceiveRequests += st.ReceiveRequests
		sum.DeleteRequests += st.DeleteRequests
	}
	return sum
}

// startOutcomes starts the outcomes function and the stream mapping that
// feeds it the table's stream from its start (the table is new or
// emptied), as Lambda's mapping does in the stack (filters aside: every
// change reaches the function, which keeps the ends).
func (h *Harness) startOutcomes(ctx context.Context, bootstrap string, out, mappingLog io.Writer) error {
	env, err := h.Env("outcomes", h.System.Endpoints(), 0)
	if err != nil {
		return err
	}
	if h.Outcomes, err = h.start(ctx, "outcomes", bootstrap, env, out); err != nil {
		return err
	}
	cfg, err := localConfig(ctx, nil)
	if err != nil {
		return err
	}
	streams := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(h.DynamoDBEndpoint) })
	h.OutcomeStream, err = streammap.New(streammap.Config{Streams: streams, TableName: h.Resources.Table, Invoker: h.Outcomes,
		StartingPosition: streamtypes.ShardIteratorTypeTrimHorizon, Logger: slog.New(slog.NewTextHandler(cmp.Or[io.Writer](mappingLog, io.Discard), nil))})
	if err != nil {
		return err
	}
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.streamDone = make(chan struct{})
	go func() {
		defer close(h.streamDone)
		if err := h.OutcomeStream.Run(run); err != nil && run.Err() == nil {
			h.streamErr = fmt.Errorf("local: the ledger's stream mapping stopped: %w", err)
		}
	}()
	h.stop = append(h.stop, func() { cancel(); <-h.streamDone })
	return nil
}

// DrainOutcomes waits until the outcomes function has been handed, and
// has acknowledged, every change of the ledger made before the call, so
// that every outcome event of those changes is on the outcomes queue.
func (h *Harness) DrainOutcomes(ctx context.Context) error {
	select {
	case <-h.streamDone:
		return cmp.Or(h.streamErr, errors.New("local: the ledger's stream mapping has stopped"))
	default:
	}
	return h.OutcomeStream.Drain(ctx)
}

// startFeedback starts, when the stage runs ses (the system has a feedback
// queue), the feedback function and the SQS event source mapping that
// feeds it the feedback queue, as Lambda's does in the stack: one instance,
// batches of up to 10, no batching window, the function's timeout. The
// mapping runs until Close.
func (h *Harness) startFeedback(ctx context.Context, bootstrap string, output func(name string) io.Writer, cfg HarnessConfig) error {
	if h.Resources.FeedbackURL == "" {
		return nil // no output asked for a function that does not run
	}
	out := output("feedback")
	ep := h.System.Endpoints()
	ep.DynamoDB = h.Proxies["feedback DynamoDB"].Endpoint // its reads and writes counted
	env, err := h.Env("feedback", ep, 0)
	if err != nil {
		return err
	}
	if h.Feedback, err = h.start(ctx, "feedback", bootstrap, env, out); err != nil {
		return err
	}
	h.FeedbackMapping, err = esm.New(esm.Config{Queue: h.SQS, QueueURL: h.Resources.FeedbackURL, QueueARN: h.Resources.FeedbackARN,
		BatchSize: 10, Invokers: []esm.Invoker{h.Feedback}, PollWait: cfg.PollWait, FunctionTimeout: h.Stage.FeedbackTimeout,
		Logger: slog.New(slog.NewTextHandler(cmp.Or[io.Writer](cfg.MappingLog, io.Discard), nil))})
	if err != nil {
		return err
	}
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); h.FeedbackMapping.Run(run) }()
	h.stop = append(h.stop, func() { cancel(); <-done })
	return nil
}

// DrainFeedback waits until SES's events of every e-mail accepted before
// the call are recorded: the stand-in for SES's event publishing has put
// them on the bus (whose rule delivers them to the feedback queue before
// it answers), and then the feedback queue holds nothing, visible, in
// flight or delayed, that the feedback function has not acknowledged.
// Without a feedback queue (a stage without ses) it waits for the first
// alone.
func (h *Harness) DrainFeedback(ctx context.Context) error {
	if err := h.SESEvents.Drain(ctx); err != nil {
		return err
	}
	if h.FeedbackMapping == nil {
		return nil
	}
	for {
		d, err := status.QueueDepth(ctx, h.SQS, h.Resources.FeedbackURL)
		if err != nil {
			return fmt.Errorf("local: drain the feedback queue: %w", err)
		}
		if d.Total() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("local: the feedback queue still holds %d events (visible %d, in flight %d, delayed %d): %w",
				d.Total(), d.Visible, d.InFlight, d.Delayed, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// counted is where a function's AWS calls go: its counting proxies.
func (h *Harness) counted(fn string) Endpoints {
	return Endpoints{DynamoDB: h.Proxies[fn+" DynamoDB"].Endpoint, SQS: h.Proxies[fn+" SQS"].Endpoint}
}

// start runs one function instance under the emulator, timing its start.
func (h *Harness) start(ctx context.Context, name, bootstrap string, env []string, log io.Writer) (*Function, error) {
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	start := time.Now()
	fn, err := h.StartFunction(ctx, bootstrap, env, log)
	if err != nil {
		return nil, err
	}
	h.stop = append(h.stop, fn.Stop)
	return &Function{Lambda: fn, Name: name, Startup: time.Since(start)}, nil
}

// empty removes what an earlier run left in the queues and the table.
func (h *Harness) empty(ctx context.Context) error {
	urls := append(h.Resources.WorkURLs(), h.Resources.DLQURL, h.Resources.Topic.QueueURL, h.Resources.Operators.QueueURL,
		h.Resources.OutcomesURL, h.Resources.FeedbackURL)
	for _, url := range urls {
		if url == "" {
			continue // a stage without sns has no subscriber queue, one without ses no feedback queue
		}
		if _, err := h.SQS.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); err != nil {
			return fmt.Errorf("demo: purge %s: %w", url, err)
		}
	}
	var keys []message.DeliveryKey
	if err := h.Ledger.ScanDeliveries(ctx, func(d ledger.Delivery) error {
		keys = append(keys, d.Key())
		return nil
	}); err != nil {
		return err
	}
	if len(keys) > 0 {
		// An earlier run's table: start from a new one.
		if _, err := h.DB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(h.Resources.Table)}); err != nil {
			return fmt.Errorf("demo: remove the earlier run's table: %w", err)
		}
		if err := ledger.CreateTable(ctx, h.DB, h.Resources.Table); err != nil {
			return err
		}
	}
	return nil
}

// Close stops what StartHarness started, in reverse order: the intake,
// the functions, the proxies. The System runs on until its own Close.
func (h *Harness) Close() {
	for i := len(h.stop) - 1; i >= 0; i-- {
		h.stop[i]()
	}
	h.stop = nil
}

// Function is one function instance under the emulator, as the mapping or
// a schedule invokes it, marked busy while an invocation runs so that a
// kill can land in the middle of one.
type Function struct {
	*standin.Lambda
	// Name is "consumer-1", …, or "enqueue".
	Name string
	// Startup is how long its start took, until the emulator accepted a
	// connection: the first part of a cold start (the runtime starts on
	// the first invocation).
	Startup time.Duration

	busy atomic.Bool
}

// Invoke runs one invocation.
func (f *Function) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	f.busy.Store(true)
	defer f.busy.Store(false)
	out, err := f.Lambda.Invoke(ctx, payload)
	if err != nil && f.Exited() {
		// Not the runtime (the kills' target) but its emulator: every
		// invocation after this fails at once.
		err = fmt.Errorf("%s: the emulator itself has exited (see its log): %w", f.Name, err)
	}
	return out, err
}

// Busy reports whether an invocation is running.
func (f *Function) Busy() bool { return f.busy.Load() }
