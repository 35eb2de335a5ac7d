package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/pkg/deployment"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/local"
	"github.com/nudgehq/nudge/pkg/local/esm"
	"github.com/nudgehq/nudge/pkg/local/sink"
	"github.com/nudgehq/nudge/pkg/local/standin"
	"github.com/nudgehq/nudge/pkg/message"
	"github.com/nudgehq/nudge/pkg/status"
)

// system is everything a run started, and the handles to observe it.
type system struct {
	cfg            Config
	stage          deployment.Stage
	sys            *local.System
	ddbURL, sqsURL string // the stand-ins
	res            local.Provisioned
	db             *dynamodb.Client // direct: for observing, not counted
	sqs            *sqs.Client
	plan           *plan
	sink           *sink.Sink
	ch             *channels // SES and SNS, with their fault fronts

	intake       *local.Intake  // the intake function behind its function URL
	api          *intake.Client // the applications' door: every reminder enters through it
	view         *ledger.Ledger // the table, read by the checker on an uncounted client
	intakeLogs   logs
	proxies      map[string]*standin.Proxy // "consumer DynamoDB", …
	consumerLogs logs
	esmErrors    *errorKinds
	enqueueLogs  logs
	mapping      *esm.Mapping
	enqueue      *instance
	consumers    []*instance

	kills     []kill // consumer runtimes killed, in order
	cutRuns   atomic.Int64
	slowRuns  atomic.Int64 // cut runs whose requests the reserve cancelled
	poisonIDs []string     // the poison messages' ids on the work queue

	ticks, tickFailures atomic.Int64
	enqueueKills        atomic.Int64 // enqueue runtimes killed mid-run
	mu                  sync.Mutex
	problems            []string // what went wrong on the way: refused cancels, failed ticks
	due                 map[message.DeliveryKey]time.Time
	started             time.Time
	stall               *stallWatch
}

func (s *system) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) < 50 {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
}

// Run runs the demo and returns its summary. It stops everything it started
// before it returns, also when ctx ends (Ctrl-C). The error is a failure to
// set the system up or a cancelled run; broken invariants are reported in
// Summary.Violations.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	stage, err := cfg.stage()
	if err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, fn := range []string{"consumer", "enqueue", "intake"} {
		bins[fn] = filepath.Join(cfg.Bootstraps, fn, "bootstrap")
		if _, err := os.Stat(bins[fn]); err != nil {
			return nil, fmt.Errorf("demo: %s not found; build the functions for this machine first (make build-local; make demo does it)", bins[fn])
		}
	}
	out := cfg.Out
	s := &system{cfg: cfg, stage: stage, plan: newPlan(cfg), proxies: map[string]*standin.Proxy{}, due: map[message.DeliveryKey]time.Time{}}
	sys, err := local.Start(ctx, local.Config{Stage: stage, Dir: cfg.Dir, DynamoDBEndpoint: cfg.DynamoDBEndpoint, SQSEndpoint: cfg.SQSEndpoint, SESEndpoint: cfg.SESEndpoint,
		Plan: s.plan.sinkPlan(), Log: out})
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	s.sys, s.db, s.sqs, s.res, s.sink = sys, sys.DB, sys.SQS, sys.Resources, sys.Sink
	s.ddbURL, s.sqsURL = sys.DynamoDBEndpoint, sys.SQSEndpoint
	if s.ch, err = newChannels(s.plan, sys.SESEndpoint, sys.SQSEndpoint, sys.Resources.Topic.QueueURL); err != nil {
		return nil, err
	}
	defer s.ch.close()
	dir := sys.Dir
	// The checker's view of the table, on an uncounted client.
	if s.view, err = ledger.New(s.db, ledger.Config{Table: s.res.Table}); err != nil {
		return nil, err
	}
	if err := s.empty(ctx); err != nil {
		return nil, err
	}
	for _, name := range []string{"consumer DynamoDB", "consumer SQS", "enqueue DynamoDB", "enqueue SQS", "intake DynamoDB"} {
		target := s.ddbURL
		if strings.HasSuffix(name, "SQS") {
			target = s.sqsURL
		}
		p, err := standin.NewProxy(target)
		if err != nil {
			return nil, err
		}
		defer p.Close()
		s.proxies[name] = p
	}
	// The functions, with the stack's environment and local addresses.
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	var invokers []esm.Invoker
	for i := range cfg.MaxConcurrency {
		name := fmt.Sprintf("consumer-%d", i+1)
		log, closeLog, err := s.logFile(dir, name+".log")
		if err != nil {
			return nil, err
		}
		defer closeLog()
		s.consumerLogs = append(s.consumerLogs, log)
		// Each instance posts to its own path, so the provider's record
		// tells which instance an answer went to.
		env, err := sys.Env("consumer", s.endpoints("consumer"), 0, "NUDGE_WEBHOOK_URL="+sys.WebhookURL+"/"+name,
			"NUDGE_BACKOFF_BASE="+backoffBase.String(), "NUDGE_BACKOFF_CAP="+backoffCap.String())
		if err != nil {
			return nil, err
		}
		fn, err := sys.StartFunction(ctx, bins["consumer"], env, log)
		if err != nil {
			return nil, err
		}
		defer fn.Stop()
		in := &instance{Lambda: fn, name: name}
		s.consumers = append(s.consumers, in)
		invokers = append(invokers, in)
	}
	enqueueTimeout, enqueueMargin := cfg.enqueueTimeout(stage)
	overrides := []string{"NUDGE_SETTLE=" + settle.String(), "NUDGE_CUTOFF_MARGIN=" + enqueueMargin.String()}
	if cfg.EnqueueKills > 0 {
		// A run killed between moving a cursor and publishing leaves its
		// page to the overdue scan's repair (10 minutes in AWS): time is
		// compressed here as the tick is, so that the repair comes within
		// the run. Longer than a killed batch's return (the visibility
		// timeout), so a delivery merely waiting for it is rarely handed
		// off twice (and the second copy is a duplicate the claim refuses).
		overrides = append(overrides, "NUDGE_OVERDUE_AFTER="+repairAfter.String(), "NUDGE_REPAIR_AFTER="+repairAfter.String())
	}
	enqueueEnv, err := sys.Env("enqueue", s.endpoints("enqueue"), enqueueTimeout, overrides...)
	if err != nil {
		return nil, err
	}
	log, closeLog, err := s.logFile(dir, "enqueue.log")
	if err != nil {
		return nil, err
	}
	defer closeLog()
	s.enqueueLogs = logs{log}
	enqueueFn, err := sys.StartFunction(ctx, bins["enqueue"], enqueueEnv, log)
	if err != nil {
		return nil, err
	}
	s.enqueue = &instance{Lambda: enqueueFn, name: "enqueue"}
	defer s.enqueue.Stop()
	// The intake: the function behind its function URL, as applications
	// reach it; its DynamoDB calls counted by a proxy.
	log, closeLog, err = s.logFile(dir, "intake.log")
	if err != nil {
		return nil, err
	}
	defer closeLog()
	s.intakeLogs = logs{log}
	if s.intake, err = sys.StartIntake(ctx, bins["intake"], intakeInstances, local.Endpoints{DynamoDB: s.proxies["intake DynamoDB"].Endpoint}, log); err != nil {
		return nil, err
	}
	defer s.intake.Close()
	s.api = s.intake.Client()
	// The mapping's own line per failed invocation: a kill's, or one the
	// run reports (its kinds, counted, go into the violation).
	esmLog, err := os.Create(LogPath(dir, stage.Name, "esm.log"))
	if err != nil {
		return nil, err
	}
	defer esmLog.Close()
	s.esmErrors = newErrorKinds(10)
	if s.mapping, err = esm.New(esm.Config{Queue: s.sqs, QueueURL: s.res.WorkURL, QueueARN: s.res.WorkARN,
		BatchSize: cfg.BatchSize, BatchingWindow: cfg.BatchingWindow, Invokers: invokers, PollWait: 2 * time.Second, FunctionTimeout: stage.ConsumerTimeout,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(s.esmErrors, esmLog), nil))}); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "demo: %d reminders (%s), %d poison messages, %.0f%% duplicates; faults %s; batch %d, window %v, concurrency %d; function logs in %s\n",
		cfg.Reminders, s.mixLine(), len(s.plan.poison), 100*cfg.Duplicates, cfg.Faults, cfg.BatchSize, cfg.BatchingWindow, cfg.MaxConcurrency, filepath.Join(dir, "logs"))
	keep := "; --keep leaves it up after the summary"
	if cfg.Keep != nil {
		keep = ""
	}
	fmt.Fprintf(out, "providers: webhook (the sink), SES (e-mails rendered in the local inbox at %s/%s), SNS (topic %s, read by its subscriber queue)\n",
		sys.SESEndpoint, keep, s.res.Topic.ARN)
	if cfg.Kills > 0 || cfg.EnqueueBudget > 0 {
		fmt.Fprintf(out, "chaos: %d consumer runtimes killed mid-batch; consumer timeout %v (visibility %v); enqueue budget %v per run\n",
			cfg.Kills, stage.ConsumerTimeout, stage.Visibility(), enqueueTimeout-enqueueMargin)
	}

	if cfg.Serve {
		return nil, s.serve(ctx)
	}
	return s.run(ctx)
}

// serve keeps the system running for the operator until Keep returns: the
// schedule ticks, the consumers consume, the intake answers.
func (s *system) serve(ctx context.Context) error {
	s.started = time.Now()
	keep, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.tick(keep) }()
	go func() { defer wg.Done(); s.mapping.Run(keep) }()
	go func() { defer wg.Done(); s.ch.drain(keep, s.sqs) }()
	s.cfg.Keep(keep, nil, s.local())
	stop()
	wg.Wait()
	return nil
}

// local tells the operator where the system runs.
func (s *system) local() Local {
	return Local{Stage: s.stage.Name, Table: s.res.Table, WorkURL: s.res.WorkURL, DLQURL: s.res.DLQURL, Inbox: s.sys.SESEndpoint + "/", IntakeURL: s.intake.URL(),
		Env: append(standin.EndpointEnv(standin.Endpoints{DynamoDB: s.ddbURL, SQS: s.sqsURL, SES: s.sys.SESEndpoint}), "NUDGE_STAGE="+s.stage.Name, "NUDGE_SHARDS="+strconv.Itoa(s.stage.Shards))}
}

// endpoints are a function's counting proxies, and for the consumer the
// SES and SNS fault fronts.
func (s *system) endpoints(fn string) local.Endpoints {
	ep := local.Endpoints{DynamoDB: s.proxies[fn+" DynamoDB"].Endpoint, SQS: s.proxies[fn+" SQS"].Endpoint}
	if fn == "consumer" {
		ep.SES, ep.SNS = s.ch.ses.Endpoint, s.ch.sns.Endpoint
	}
	return ep
}

// acceptedSoFar is how many sends the providers accepted: the sink's, and
// SES's and SNS's answers of 200.
func (s *system) acceptedSoFar() int {
	n, _ := s.sink.Totals()
	return n + s.ch.acceptedCount()
}

// LogPath is where a run of the stage keeps its log name: the stand-in
// folder's logs, named by the stage (.local/logs/demo-consumer-1.log for
// make demo, chaos-… for make chaos), so that runs of other stages, such
// as the tests', leave each other's evidence alone.
func LogPath(dir, stage, name string) string {
	return filepath.Join(dir, "logs", stage+"-"+name)
}

func (s *system) logFile(dir, name string) (*functionLog, func(), error) {
	f, err := os.Create(LogPath(dir, s.stage.Name, name))
	if err != nil {
		return nil, nil, err
	}
	return newFunctionLog(f), func() { f.Close() }, nil
}

// empty removes what an earlier run left in the queues and the table, so
// the run's figures are its own.
func (s *system) empty(ctx context.Context) error {
	for _, url := range []string{s.res.WorkURL, s.res.DLQURL, s.res.Topic.QueueURL} {
		if _, err := s.sqs.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); err != nil {
			return fmt.Errorf("demo: purge %s: %w", url, err)
		}
	}
	var keys []message.DeliveryKey
	if err := s.view.ScanDeliveries(ctx, func(d ledger.Delivery) error {
		keys = append(keys, d.Key())
		return nil
	}); err != nil {
		return err
	}
	if len(keys) > 0 {
		// An earlier run's table: start from a new one.
		if _, err := s.db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(s.res.Table)}); err != nil {
			return fmt.Errorf("demo: remove the earlier run's table: %w", err)
		}
		if err := ledger.CreateTable(ctx, s.db, s.res.Table); err != nil {
			return err
		}
	}
	return nil
}

func (s *system) mixLine() string {
	counts := map[kind]int{}
	for _, r := range s.plan.reminders {
		counts[r.kind]++
	}
	line := ""
	for _, k := range kinds {
		if line != "" {
			line += ", "
		}
		line += fmt.Sprintf("%d %s", counts[k], k)
	}
	return line
}

// run drives the system until every due delivery has ended and the work
// queue is empty, or the deadline passes.
func (s *system) run(ctx context.Context) (*Summary, error) {
	s.started = time.Now()
	runCtx, stopRun := context.WithTimeout(ctx, s.cfg.Deadline)
	defer stopRun()
	workers, stopWorkers := context.WithCancel(runCtx)
	var wg sync.WaitGroup
	defer func() { stopWorkers(); wg.Wait() }()

	// Expired reminders first; the schedule starts once they have expired.
	intakeDone := make(chan struct{})
	var lateCancels sync.WaitGroup
	nExpired := 0
	for _, r := range s.plan.reminders {
		if r.kind == expired {
			nExpired++
		}
	}
	if err := s.create(runCtx, s.plan.reminders[:nExpired], &lateCancels); err != nil {
		return nil, err
	}
	select {
	case <-time.After(expiredWindow + 100*time.Millisecond):
	case <-runCtx.Done():
		return nil, runCtx.Err()
	}
	wg.Add(4)
	go func() { defer wg.Done(); s.tick(workers) }()
	go func() { defer wg.Done(); s.mapping.Run(workers) }()
	go func() { defer wg.Done(); s.killer(workers) }()
	wg.Add(1)
	go func() { defer wg.Done(); s.enqueueKiller(workers) }()
	go func() { defer wg.Done(); s.ch.drain(workers, s.sqs) }()
	go func() {
		defer close(intakeDone)
		if err := s.create(runCtx, s.plan.reminders[nExpired:], &lateCancels); err != nil && runCtx.Err() == nil {
			s.problem("intake stopped: %v", err)
		}
		s.misbehave(runCtx)
	}()

	prog := newProgress(s.cfg.Out, s.cfg.Live)
	s.stall = &stallWatch{mapping: s.mapping, visibility: s.stage.Visibility(), timeout: s.stage.ConsumerTimeout, warnings: s.esmErrors.Lines}
	for _, c := range s.consumers {
		s.stall.names = append(s.stall.names, c.name)
	}
	var (
		finished bool
		quiet    int
		snap     snapshot
		scanned  time.Time
	)
	// Reading the whole ledger loads DynamoDB Local, which shares the
	// machine with the system: the queues are read every second, the
	// ledger every few seconds, and whenever the run may be over.
	scanEvery := 5 * time.Second
	if s.cfg.Live {
		scanEvery = 2 * time.Second
	}
	// A large ledger is not read while the system runs: a scan reads every
	// item, and DynamoDB Local serves little else meanwhile
	// (docs/reliability.md, "Found by the chaos run"). It is read once the
	// queue is empty and the provider has accepted every delivery the plan
	// sends, or nothing has moved for a minute. The progress line's "sent"
	// is the provider's count.
	large := s.cfg.Reminders > 20_000
	lastAccepted, lastMove := -1, time.Now()
	toSend := s.plan.count(func(d *planned) bool { return d.expect == ledger.StatusSent })
	for !finished {
		select {
		case <-runCtx.Done():
			finished = true
			continue
		case <-time.After(time.Second):
		}
		intakeOver := false
		select {
		case <-intakeDone:
			intakeOver = true
		default:
		}
		ms := s.stall.capture()
		err := s.queues(runCtx, &snap)
		fresh := false
		// A large run is settled once the provider has accepted every send
		// the plan calls for, or nothing has moved for a minute (a delivery
		// that ended otherwise than planned is then reported).
		if snap.accepted != lastAccepted || snap.queue != 0 {
			lastAccepted, lastMove = snap.accepted, time.Now()
		}
		settled := intakeOver && snap.queue == 0 && (!large || snap.accepted >= toSend || time.Since(lastMove) > time.Minute)
		if err == nil && (!large && time.Since(scanned) >= scanEvery || settled) {
			err = s.scan(runCtx, &snap)
			scanned, fresh = time.Now(), true
		}
		if err != nil {
			if runCtx.Err() != nil {
				continue
			}
			return nil, err
		}
		prog.show(time.Since(s.started), snap)
		if report := s.stall.observe(time.Now(), snap, ms); report != "" {
			prog.note(fmt.Sprintf("%5.0fs  %s", time.Since(s.started).Seconds(), report))
		}
		if intakeOver && fresh && snap.dueLive == 0 && snap.queue == 0 {
			quiet++
		} else if !fresh || snap.queue > 0 || snap.dueLive > 0 {
			quiet = 0
		}
		finished = quiet >= 2 || large && quiet >= 1
	}
	if ctx.Err() != nil {
		prog.done()
		return nil, fmt.Errorf("demo: stopped: %w", ctx.Err())
	}
	stopWorkers()
	wg.Wait()
	<-intakeDone
	lateCancels.Wait()
	if s.queues(context.WithoutCancel(ctx), &snap) == nil && (large || s.scan(context.WithoutCancel(ctx), &snap) == nil) {
		prog.show(time.Since(s.started), snap)
	}
	prog.done()
	sum, err := s.summarize(context.WithoutCancel(ctx))
	if err != nil || s.cfg.Keep == nil {
		return sum, err
	}
	// Keep the system running for the operator: the schedule ticks, the
	// consumers consume, until ctx ends.
	keep, stopKeep := context.WithCancel(ctx)
	defer stopKeep()
	wg.Add(2)
	go func() { defer wg.Done(); s.tick(keep) }()
	go func() { defer wg.Done(); s.mapping.Run(keep) }()
	// The operator has fixed what the provider rejected (the receiver,
	// the template): a redrive of the rejected deliveries is accepted now.
	s.plan.fix("400")
	s.cfg.Keep(keep, sum, s.local())
	return sum, nil
}

// Local tells where a kept system runs, for the operator commands.
type Local struct {
	Stage, Table, WorkURL, DLQURL string
	// Inbox is the SES stand-in's web inbox, where the e-mails sent show
	// rendered.
	Inbox string
	// IntakeURL is the intake's local function URL (it needs a SigV4
	// Authorization header, which it does not verify).
	IntakeURL string
	// Env is the environment that points the nudge CLI (or any AWS SDK) at
	// the stand-ins and the stage: KEY=VALUE lines.
	Env []string
}

// create schedules reminders through the intake at the configured rate,
// cancelling the ones the mix cancels.
func (s *system) create(ctx context.Context, rs []*plannedReminder, lateCancels *sync.WaitGroup) error {
	const workers = 8
	jobs := make(chan *plannedReminder)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				if err := s.createOne(ctx, r, lateCancels); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	interval := time.Duration(float64(time.Second) / s.cfg.Rate)
	next := time.Now()
	var err error
feed:
	for _, r := range rs {
		if d := time.Until(next); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				err = ctx.Err()
				break feed
			}
		}
		next = next.Add(interval)
		select {
		case jobs <- r:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

func (s *system) createOne(ctx context.Context, r *plannedReminder, lateCancels *sync.WaitGroup) error {
	now := time.Now()
	in := s.plan.input(r, now, r.soon)
	var created intake.Created
	var err error
	for attempt := 1; ; attempt++ {
		// Every call is idempotent: one that timed out, or met a busy
		// intake (429) or DynamoDB Local (503), is sent again.
		if created, err = s.api.Put(ctx, in); err == nil || !retryable(err) || attempt == 5 || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond) // real time: a pause for the intake
	}
	if err != nil {
		return fmt.Errorf("demo: schedule %s through the API: %w", r.id, err)
	}
	s.mu.Lock()
	for _, d := range r.deliveries {
		s.due[d.key] = created.Reminder.DueAt
	}
	s.mu.Unlock()
	switch r.kind {
	case cancelled:
		s.cancel(ctx, r)
	case lateCancel:
		// After its hand-off, before it falls due.
		lateCancels.Add(1)
		go func() {
			defer lateCancels.Done()
			select {
			case <-time.After(s.plan.lateCancelDue() / 2):
				s.cancel(ctx, r)
			case <-ctx.Done():
			}
		}()
	}
	return nil
}

func (s *system) cancel(ctx context.Context, r *plannedReminder) {
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		if _, err = s.api.Cancel(ctx, r.id); err == nil || !retryable(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond) // real time: a pause for the intake
	}
	var e *intake.Error
	switch {
	case errors.As(err, &e) && e.Status == http.StatusConflict:
		for _, d := range e.Problem.Deliveries {
			if d.Outcome != "cancelled" {
				s.problem("cancel %s refused: %s (status %s)", d.Key, d.Outcome, d.Status)
			}
		}
	case err != nil:
		s.problem("cancel %s: %v", r.id, err)
	}
}

// repairAfter is the enqueue's overdue and repair threshold in a run that
// kills it (Config.EnqueueKills).
const repairAfter = time.Minute

// intakeInstances is how many intake instances serve the demo's API calls
// at once (the emulator runs one invoke at a time per instance).
const intakeInstances = 4

// retryable says whether an API call may be sent again: it timed out, or
// met a busy intake or table. Every call is idempotent.
func retryable(err error) bool {
	var e *intake.Error
	if errors.As(err, &e) {
		return e.Status == http.StatusTooManyRequests || e.Status == http.StatusBadGateway || e.Status == http.StatusServiceUnavailable
	}
	return err != nil
}

// misbehave puts what at-least-once delivery and bad producers put on a
// queue: poison bodies, and second copies of due-now messages.
func (s *system) misbehave(ctx context.Context) {
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i, body := range s.plan.poison {
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String("p" + strconv.Itoa(i)), MessageBody: aws.String(body)})
	}
	n := 0
	for _, r := range s.plan.reminders {
		if r.kind != dueNow || n >= s.plan.duplicates() {
			continue
		}
		for _, d := range r.deliveries {
			s.mu.Lock()
			due := s.due[d.key]
			s.mu.Unlock()
			body, err := message.Encode(message.Message{ReminderID: d.key.ReminderID, Channel: d.key.Channel, Provider: d.key.Provider, DueAt: due})
			if err != nil {
				s.problem("duplicate of %s: %v", d.key, err)
				continue
			}
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String("d" + strconv.Itoa(n)), MessageBody: aws.String(string(body))})
			n++
		}
	}
	for len(entries) > 0 {
		k := min(10, len(entries))
		out, err := s.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(s.res.WorkURL), Entries: entries[:k]})
		if err != nil || len(out.Failed) > 0 {
			s.problem("could not put poison and duplicate messages on the queue: %v", err)
		}
		if out != nil {
			for _, ok := range out.Successful {
				if strings.HasPrefix(aws.ToString(ok.Id), "p") {
					s.poisonIDs = append(s.poisonIDs, aws.ToString(ok.MessageId))
				}
			}
		}
		entries = entries[k:]
	}
}

// tick invokes the enqueue function on the demo's schedule, one run at a
// time, as EventBridge Scheduler would every minute.
func (s *system) tick(ctx context.Context) {
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	for {
		at := time.Now().UTC()
		ev := fmt.Sprintf(`{"source":"aws.scheduler","scheduledTime":%q,"executionId":"demo-%d"}`, at.Format(time.RFC3339), s.ticks.Load()+1)
		killsBefore := s.enqueueKills.Load()
		resp, err := s.enqueue.Invoke(context.WithoutCancel(ctx), []byte(ev))
		s.ticks.Add(1)
		if err == nil {
			if _, ferr := esm.Acknowledged(emptyEvent, resp); ferr != nil {
				err = ferr
			}
			var rep struct {
				Cut         bool
				Interrupted int
			}
			if json.Unmarshal(resp, &rep) == nil && rep.Cut {
				s.cutRuns.Add(1)
				if rep.Interrupted > 0 {
					s.slowRuns.Add(1)
				}
			}
		}
		if err != nil && s.enqueueKills.Load() > killsBefore {
			// Killed mid-run on purpose: the next run resumes from the
			// cursors, and what this one published without moving its
			// cursor is published again (a duplicate the consumer
			// recognises).
			err = nil
		}
		if err != nil {
			s.tickFailures.Add(1)
			s.problem("enqueue run at %s failed: %v", at.Format(time.TimeOnly), err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

var emptyEvent = esm.Event(nil, "arn:aws:sqs:us-east-1:000000000000:none")

// snapshot is the system's state at one moment.
type snapshot struct {
	byStatus map[ledger.Status]int
	dueLive  int // deliveries due by now that have not ended
	queue    int // work queue: visible, in flight and delayed
	work     status.Depth
	dlq      int
	accepted int
}

// scan reads the ledger into snap.
func (s *system) scan(ctx context.Context, snap *snapshot) error {
	byStatus, dueLive := map[ledger.Status]int{}, 0
	now := time.Now()
	err := s.view.ScanDeliveries(ctx, func(d ledger.Delivery) error {
		byStatus[d.Status]++
		if !d.Status.Terminal() && !d.DueAt.After(now) {
			dueLive++
		}
		return nil
	})
	if err != nil {
		return err
	}
	snap.byStatus, snap.dueLive = byStatus, dueLive
	return nil
}

// queues reads the queues' depths into snap.
func (s *system) queues(ctx context.Context, snap *snapshot) error {
	var err error
	if snap.work, err = status.QueueDepth(ctx, s.sqs, s.res.WorkURL); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	snap.queue = snap.work.Total()
	if snap.dlq, err = s.depth(ctx, s.res.DLQURL); err != nil {
		return err
	}
	snap.accepted = s.acceptedSoFar()
	return nil
}

// depth is a queue's messages: visible, in flight and delayed.
func (s *system) depth(ctx context.Context, url string) (int, error) {
	d, err := status.QueueDepth(ctx, s.sqs, url)
	if err != nil {
		return 0, fmt.Errorf("demo: %w", err)
	}
	return d.Total(), nil
}

// progress shows counts by state as the run goes.
type progress struct {
	out  io.Writer
	live bool
	last time.Time
	drew bool
}

func newProgress(out io.Writer, live bool) *progress { return &progress{out: out, live: live} }

func (p *progress) show(elapsed time.Duration, s snapshot) {
	if s.byStatus == nil { // a large run: the ledger is read at the end
		p.print(fmt.Sprintf("%5.0fs  sent %d (the provider's count; the ledger is read at the end) | queue %d  DLQ %d", elapsed.Seconds(), s.accepted, s.queue, s.dlq))
		return
	}
	p.print(fmt.Sprintf("%5.0fs  pending %d  queued %d  sending %d  retrying %d | sent %d  dead %d  expired %d  cancelled %d | queue %d  DLQ %d",
		elapsed.Seconds(), s.byStatus[ledger.StatusPending], s.byStatus[ledger.StatusQueued], s.byStatus[ledger.StatusSending], s.byStatus[ledger.StatusRetrying],
		max(s.byStatus[ledger.StatusSent], s.accepted), s.byStatus[ledger.StatusDead], s.byStatus[ledger.StatusExpired], s.byStatus[ledger.StatusCancelled], s.queue, s.dlq))
}

func (p *progress) print(line string) {
	if p.live {
		fmt.Fprintf(p.out, "\r\033[K%s", line)
		p.drew = true
		return
	}
	if time.Since(p.last) >= 5*time.Second {
		fmt.Fprintln(p.out, line)
		p.last = time.Now()
	}
}

// note prints a line of its own, under the progress line.
func (p *progress) note(line string) {
	p.done()
	fmt.Fprintln(p.out, line)
}

func (p *progress) done() {
	if p.drew {
		fmt.Fprintln(p.out)
		p.drew = false
	}
}
