package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nudgehq/nudge/internal/deployment"
	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local"
	"github.com/nudgehq/nudge/internal/local/bus"
	"github.com/nudgehq/nudge/internal/local/check"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/intake"
)

// run is one run on the harness: the demo's, the chaos run's (the demo
// with kills, chaos.go) or serve's; the plan it follows, and what it notes
// on the way.
type run struct {
	cfg      Config
	h        *local.Harness
	plan     *plan
	ch       *channels      // each provider's faults and record
	logs     *runLogs       // the functions' logs, read as CloudWatch would
	api      *intake.Client // the applications' door: every reminder enters through it
	ticks    ticks          // the enqueue's runs on the schedule
	kills    kills          // what the chaos run killed
	problems problems       // what went wrong on the way
	stall    *stallWatch
	started  time.Time

	mu        sync.Mutex
	due       map[message.DeliveryKey]time.Time // as the intake answered
	created   map[string]time.Time              // each reminder's due time (a series' first), as the intake answered
	lastOpens time.Time                         // the last opening of a window that opens within the run
	poisonIDs []string                          // the poison messages' ids on the work queue
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
	for _, fn := range []string{"consumer", "enqueue", "intake", "outcomes", "feedback"} {
		if bin := filepath.Join(cfg.Bootstraps, fn, "bootstrap"); !exists(bin) {
			return nil, fmt.Errorf("demo: %s not found; build the functions for this machine first (make build-local; make demo does it)", bin)
		}
	}
	out := cfg.Out
	r := &run{cfg: cfg, plan: newPlan(cfg), due: map[message.DeliveryKey]time.Time{}, created: map[string]time.Time{}}
	sys, err := local.Start(ctx, local.Config{Stage: stage, Dir: cfg.Dir,
		DynamoDBEndpoint: cfg.DynamoDBEndpoint, SQSEndpoint: cfg.SQSEndpoint, SESEndpoint: cfg.SESEndpoint, Plan: r.plan.sinkPlan(), Log: out})
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	if r.ch, err = newChannels(r.plan, sys); err != nil {
		return nil, err
	}
	defer r.ch.close()
	if r.logs, err = openLogs(sys.Dir, stage.Name, cfg.MaxConcurrency); err != nil {
		return nil, err
	}
	defer r.logs.close()
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
	// The functions, with the stack's environment and local addresses: the
	// consumers call the providers' fault fronts; the intake serves the
	// applications' calls behind its function URL.
	r.h, err = sys.StartHarness(ctx, local.HarnessConfig{Bootstraps: cfg.Bootstraps, Consumers: cfg.MaxConcurrency, ConsumerFronts: r.ch.fronts(),
		ConsumerOverrides: []string{"NUDGE_BACKOFF_BASE=" + backoffBase.String(), "NUDGE_BACKOFF_CAP=" + backoffCap.String()},
		EnqueueTimeout:    enqueueTimeout, EnqueueOverrides: overrides, IntakeInstances: intakeInstances,
		PollWait: 2 * time.Second, Output: r.logs.output, MappingLog: r.logs.mapping()})
	if err != nil {
		return nil, err
	}
	defer r.h.Close()
	r.api = r.h.Intake.Client()
	fmt.Fprintf(out, "demo: %d reminders (%s), %d poison messages, %.0f%% duplicates; faults %s; batch %d, window %v, concurrency %d; function logs in %s\n",
		cfg.Reminders, r.plan.mixLine(), len(r.plan.poison), 100*cfg.Duplicates, cfg.Faults, cfg.BatchSize, cfg.BatchingWindow, cfg.MaxConcurrency,
		filepath.Join(sys.Dir, "logs"))
	keep := "; --keep leaves it up after the summary"
	if cfg.Keep != nil {
		keep = ""
	}
	fmt.Fprintf(out, "providers: webhook (the sink), SES (e-mails rendered in the local inbox at %s/%s), SNS (topic %s, read by its subscriber queue)\n",
		sys.SESEndpoint, keep, sys.Resources.Topic.ARN)
	if cfg.Kills > 0 || cfg.EnqueueBudget > 0 {
		fmt.Fprintf(out, "chaos: %d consumer runtimes killed mid-batch; consumer timeout %v (visibility %v); enqueue budget %v per run\n",
			cfg.Kills, stage.ConsumerTimeout, stage.Visibility(), enqueueTimeout-enqueueMargin)
	}

	if cfg.Serve {
		return nil, r.serve(ctx)
	}
	return r.demo(ctx)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// repairAfter is the enqueue's overdue and repair threshold in a run that
// kills it (Config.EnqueueKills).
const repairAfter = time.Minute

// intakeInstances is how many intake instances serve the demo's API calls
// at once (the emulator runs one invoke at a time per instance).
const intakeInstances = 4

// demo drives the system through the plan until every due delivery has
// ended and the work queue is empty, or the deadline passes, then checks
// it; with Keep, it keeps the system running for the operator.
func (r *run) demo(ctx context.Context) (*Summary, error) {
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	r.started = time.Now()
	runCtx, stopRun := context.WithTimeout(ctx, r.cfg.Deadline)
	defer stopRun()
	workers, stopWorkers := context.WithCancel(runCtx)
	var wg sync.WaitGroup
	defer func() { stopWorkers(); wg.Wait() }()

	// Expired reminders first; the schedule starts once they have expired.
	intakeDone := make(chan struct{})
	var lateCancels sync.WaitGroup
	nExpired := 0
	for _, rem := range r.plan.reminders {
		if rem.kind == expired {
			nExpired++
		}
	}
	if err := r.create(runCtx, r.plan.reminders[:nExpired], &lateCancels); err != nil {
		return nil, err
	}
	select {
	case <-time.After(expiredWindow + 100*time.Millisecond):
	case <-runCtx.Done():
		return nil, runCtx.Err()
	}
	if r.cfg.EventFaults > 0 {
		r.h.Bus.SetFaults(bus.Faults{EntryRate: r.cfg.EventFaults, RequestRate: r.cfg.EventFaults / 2})
		defer r.h.Bus.SetFaults(bus.Faults{}) // for what runs on it after (--keep)
	}
	wg.Add(6)
	go func() { defer wg.Done(); r.tick(workers) }()
	go func() { defer wg.Done(); r.h.RunMappings(workers) }()
	go func() { defer wg.Done(); r.killer(workers) }()
	go func() { defer wg.Done(); r.enqueueKiller(workers) }()
	go func() { defer wg.Done(); r.outcomesKiller(workers) }()
	go func() { defer wg.Done(); r.ch.drain(workers) }()
	go func() {
		defer close(intakeDone)
		if err := r.create(runCtx, r.plan.reminders[nExpired:], &lateCancels); err != nil && runCtx.Err() == nil {
			r.problems.add("intake stopped: %v", err)
		}
		r.misbehave(runCtx)
	}()

	prog := newProgress(r.cfg.Out, r.cfg.Live)
	r.stall = &stallWatch{mapping: r.h.Mapping, visibility: r.h.Stage.Visibility(), timeout: r.h.Stage.ConsumerTimeout, warnings: r.logs.mappingErrors.Lines}
	for _, c := range r.h.Consumers {
		r.stall.names = append(r.stall.names, c.Name)
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
	if r.cfg.Live {
		scanEvery = 2 * time.Second
	}
	// A large ledger is not read while the system runs: a scan reads every
	// item, and DynamoDB Local serves little else meanwhile
	// (docs/reliability.md, "Found by the chaos run"). It is read once the
	// queue is empty and the provider has accepted every delivery the plan
	// sends, or nothing has moved for a minute. The progress line's "sent"
	// is the provider's count.
	large := r.cfg.Reminders > 20_000
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	lastAccepted, lastMove := -1, time.Now()
	toSend := r.plan.count(func(d check.Planned) bool { return d.Expect == ledger.StatusSent })
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
		ms := r.stall.capture()
		err := r.queues(runCtx, &snap)
		fresh := false
		// A large run is settled once the provider has accepted every send
		// the plan calls for, or nothing has moved for a minute (a delivery
		// that ended otherwise than planned is then reported).
		if snap.accepted != lastAccepted || snap.queue != 0 {
			// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
			lastAccepted, lastMove = snap.accepted, time.Now()
		}
		settled := intakeOver && snap.queue == 0 && (!large || snap.accepted >= toSend || time.Since(lastMove) > time.Minute)
		if err == nil && (!large && time.Since(scanned) >= scanEvery || settled) {
			err = r.scan(runCtx, &snap)
			// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
			scanned, fresh = time.Now(), true
		}
		if err != nil {
			if runCtx.Err() != nil {
				continue
			}
			return nil, err
		}
		prog.show(time.Since(r.started), snap)
		// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
		if report := r.stall.observe(time.Now(), snap, ms); report != "" {
			prog.note(fmt.Sprintf("%5.0fs  %s", time.Since(r.started).Seconds(), report))
		}
		// A window that opens within the run is waited for: until then
		// its deliveries are not due, and the run would end without them.
		r.mu.Lock()
		opening := time.Now().Before(r.lastOpens) // wall clock: as above
		r.mu.Unlock()
		if intakeOver && fresh && snap.dueLive == 0 && snap.queue == 0 && !opening {
			quiet++
		} else if !fresh || snap.queue > 0 || snap.dueLive > 0 || opening {
			quiet = 0
		}
		finished = quiet >= 2 || large && quiet >= 1
		if finished && runCtx.Err() == nil {
			// SES's reports and the ledger's stream may still carry a
			// failure whose fallback is not yet taken: once both have
			// caught up, a taken fallback is live work, and the run goes on.
			if more, err := r.catchUp(runCtx, &snap); err != nil {
				if runCtx.Err() == nil {
					return nil, err
				}
			} else if more {
				finished, quiet = false, 0
			}
		}
	}
	if ctx.Err() != nil {
		prog.done()
		return nil, fmt.Errorf("demo: stopped: %w", ctx.Err())
	}
	stopWorkers()
	wg.Wait()
	<-intakeDone
	lateCancels.Wait()
	if r.queues(context.WithoutCancel(ctx), &snap) == nil && (large || r.scan(context.WithoutCancel(ctx), &snap) == nil) {
		prog.show(time.Since(r.started), snap)
	}
	prog.done()
	sum, err := r.summarize(context.WithoutCancel(ctx))
	if err != nil || r.cfg.Keep == nil {
		return sum, err
	}
	// Keep the system running for the operator: the schedule ticks, the
	// consumers consume, until ctx ends.
	keep, stopKeep := context.WithCancel(ctx)
	defer stopKeep()
	wg.Add(2)
	go func() { defer wg.Done(); r.tick(keep) }()
	go func() { defer wg.Done(); r.h.RunMappings(keep) }()
	// The operator has fixed what the provider rejected (the receiver,
	// the template): a redrive of the rejected deliveries is accepted now.
	r.plan.fix("400")
	r.cfg.Keep(keep, sum, r.local())
	return sum, nil
}

// catchUp waits until the feedback function has recorded SES's reports and
// the outcomes function has read the ledger's stream (taking the
// fallbacks of the deliveries that failed), then reads the ledger again,
// and reports whether live work is due.
//
// A drain the run's own deadline (ctx) cuts short is no finding: the
// evidence drains again after the run, each with its whole wait. (A make
// test run failed so: a receive of the feedback queue the local mapping
// lost hid three SES events for the queue's 3-minute visibility, and the
// run's deadline came first.)
func (r *run) catchUp(ctx context.Context, snap *snapshot) (bool, error) {
	drain, cancel := context.WithTimeout(ctx, deployment.VisibilityFactor*r.h.Stage.FeedbackTimeout+time.Minute)
	err := r.h.DrainFeedback(drain)
	cancel()
	if err != nil && !(errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil) {
		r.problems.add("the feedback function did not record SES's events: %v", err)
	}
	drain, cancel = context.WithTimeout(ctx, 2*time.Minute)
	err = r.h.DrainOutcomes(drain)
	cancel()
	if err != nil && !(errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil) {
		r.problems.add("the outcomes function did not catch up with the ledger's stream: %v", err)
	}
	if err := r.scan(ctx, snap); err != nil {
		return false, err
	}
	return snap.dueLive > 0, nil
}

// Local tells where a kept system runs, for the operator commands.
type Local struct {
	Stage, Table, WorkURL, DLQURL string
	// Routes are the work queues: WorkURL, and the providers' own.
	Routes envelope.Routes
	// DynamoDBEndpoint and SQSEndpoint are the stand-ins' (nudge local's
	// console reads the stage there).
	DynamoDBEndpoint, SQSEndpoint string
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

// local tells the operator where the system runs.
func (r *run) local() Local {
	h := r.h
	env := append(standin.EndpointEnv(standin.Endpoints{DynamoDB: h.DynamoDBEndpoint, SQS: h.SQSEndpoint, SES: h.SESEndpoint}),
		"NUDGE_STAGE="+h.Stage.Name, "NUDGE_SHARDS="+strconv.Itoa(h.Stage.Shards))
	return Local{Stage: h.Stage.Name, Table: h.Resources.Table, WorkURL: h.Resources.WorkURL, DLQURL: h.Resources.DLQURL, Routes: h.Resources.Routes(),
		DynamoDBEndpoint: h.DynamoDBEndpoint, SQSEndpoint: h.SQSEndpoint, Inbox: h.SESEndpoint + "/", IntakeURL: h.Intake.URL(), Env: env}
}

// create schedules reminders through the intake at the configured rate,
// cancelling the ones the mix cancels.
func (r *run) create(ctx context.Context, rs []*plannedReminder, lateCancels *sync.WaitGroup) error {
	const workers = 8
	jobs := make(chan *plannedReminder)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rem := range jobs {
				if err := r.createOne(ctx, rem, lateCancels); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	interval := time.Duration(float64(time.Second) / r.cfg.Rate)
	// wall clock: the local runs time real processes (the emulator, the stand-ins), which run on it
	next := time.Now()
	var err error
feed:
	for _, rem := range rs {
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
		case jobs <- rem:
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

func (r *run) createOne(ctx context.Context, rem *plannedReminder, lateCancels *sync.WaitGroup) error {
	var created intake.Created
	var err error
	for attempt := 1; ; attempt++ {
		// Its times from now at each attempt: an expired reminder's short
		// life starts again with a retry.
		in, ierr := r.plan.input(rem, time.Now(), rem.soon) // wall clock: the local runs time real processes, which run on it
		if ierr != nil {
			return ierr
		}
		// Every call is idempotent: one that timed out, or met a busy
		// intake (429) or DynamoDB Local (503), is sent again.
		if created, err = r.api.Put(ctx, in); err == nil || !retryable(err) || attempt == 5 || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond) // real time: a pause for the intake
	}
	if err != nil {
		return fmt.Errorf("demo: schedule %s through the API: %w", rem.id, err)
	}
	r.mu.Lock()
	for _, d := range rem.deliveries {
		r.due[d.Key] = created.Reminder.DueAt
	}
	r.created[rem.id] = created.Reminder.DueAt
	if rem.kind == windowWaits && rem.opens.After(r.lastOpens) {
		r.lastOpens = rem.opens
	}
	r.mu.Unlock()
	switch rem.kind {
	case cancelled:
		r.cancel(ctx, rem)
	case lateCancel:
		// After its hand-off, before it falls due.
		lateCancels.Add(1)
		go func() {
			defer lateCancels.Done()
			select {
			case <-time.After(r.plan.lateCancelDue() / 2):
				r.cancel(ctx, rem)
			case <-ctx.Done():
			}
		}()
	}
	return nil
}

func (r *run) cancel(ctx context.Context, rem *plannedReminder) {
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		if _, err = r.api.Cancel(ctx, rem.id); err == nil || !retryable(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond) // real time: a pause for the intake
	}
	var e *intake.Error
	switch {
	case errors.As(err, &e) && e.Status == http.StatusConflict:
		for _, d := range e.Problem.Deliveries {
			if d.Outcome != "cancelled" {
				r.problems.add("cancel %s refused: %s (status %s)", d.Key, d.Outcome, d.Status)
			}
		}
	case err != nil:
		r.problems.add("cancel %s: %v", rem.id, err)
	}
}

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
func (r *run) misbehave(ctx context.Context) {
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i, body := range r.plan.poison {
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String("p" + strconv.Itoa(i)), MessageBody: aws.String(body)})
	}
	n := 0
	for _, rem := range r.plan.reminders {
		if rem.kind != dueNow || n >= r.plan.duplicates() {
			continue
		}
		for _, d := range rem.deliveries {
			r.mu.Lock()
			due := r.due[d.Key]
			r.mu.Unlock()
			body, err := message.Encode(message.Message{ReminderID: d.Key.ReminderID, Channel: d.Key.Channel, Provider: d.Key.Provider, DueAt: due})
			if err != nil {
				r.problems.add("duplicate of %s: %v", d.Key, err)
				continue
			}
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String("d" + strconv.Itoa(n)), MessageBody: aws.String(string(body))})
			n++
		}
	}
	for len(entries) > 0 {
		k := min(10, len(entries))
		out, err := r.h.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(r.h.Resources.WorkURL), Entries: entries[:k]})
		if err != nil || len(out.Failed) > 0 {
			r.problems.add("could not put poison and duplicate messages on the queue: %v", err)
		}
		if out != nil {
			for _, ok := range out.Successful {
				if strings.HasPrefix(aws.ToString(ok.Id), "p") {
					r.poisonIDs = append(r.poisonIDs, aws.ToString(ok.MessageId))
				}
			}
		}
		entries = entries[k:]
	}
}

// problems are what went wrong on the way (a refused cancel, a failed
// schedule tick, a short DLQ read): each one is a violation. The first 50
// are kept.
type problems struct {
	mu   sync.Mutex
	list []string
}

func (p *problems) add(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.list) < 50 {
		p.list = append(p.list, fmt.Sprintf(format, args...))
	}
}

func (p *problems) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.list...)
}
