package enqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nudgehq/nudge/internal/envelope"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/metrics"
	"github.com/nudgehq/nudge/pkg/clock"
)

// Ledger is the part of the delivery ledger the enqueue uses: the due
// index, the shard cursors, and the deliveries it repairs.
type Ledger interface {
	Lookahead() time.Duration
	Cursor(ctx context.Context, shard int) (ledger.Cursor, error)
	MoveCursor(ctx context.Context, shard int, old, pos string, trail []ledger.Mark) (bool, error)
	DueAfter(ctx context.Context, shard int, pos string, upTo time.Time, limit int) ([]ledger.IndexEntry, error)
	DueBy(ctx context.Context, shard int, by time.Time, page func([]ledger.IndexEntry) bool) (complete bool, err error)
	StoredShards(ctx context.Context) (int, error)
	GetMany(ctx context.Context, keys []message.DeliveryKey) (map[message.DeliveryKey]ledger.Delivery, error)
	Requeue(ctx context.Context, d ledger.Delivery, note string) (ledger.Delivery, error)
	Expire(ctx context.Context, d ledger.Delivery) (ledger.Delivery, error)
	Release(ctx context.Context, key message.DeliveryKey, dueAt time.Time, note string) (ledger.Delivery, error)
	RecordStage(ctx context.Context, f ledger.StageFacts) error
}

var _ Ledger = (*ledger.Ledger)(nil)

// QueueDepths reads a queue's attributes (the SQS client): its depth.
type QueueDepths interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Publisher is the part of the SQS client the enqueue uses.
type Publisher interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

var _ Publisher = (*sqs.Client)(nil)

// Metric names.
const (
	MetricEnqueued       = "Enqueued"
	MetricRepaired       = "Repaired"
	MetricExpired        = "Expired"
	MetricPublishFailed  = "PublishFailed"
	MetricRepublished    = "Republished"
	MetricOverduePending = "OverduePending"
	MetricOldestOverdue  = "OldestOverdueSeconds"
	MetricLag            = "EnqueueLagSeconds"
)

// Config configures an Enqueuer. Durations are measured on Clock.
type Config struct {
	// Ledger is the delivery ledger, whose table holds the due index and
	// the shard cursors. Required.
	Ledger Ledger
	// Stage, if set, is what the stack runs: recorded in the table on the
	// instance's first run, for the intake (ledger.StageFacts). Default:
	// nothing recorded.
	Stage *ledger.StageFacts
	// Queue publishes to the work queue. Required.
	Queue Publisher
	// QueueURL is the default work queue. Required.
	QueueURL string
	// Routes name each provider's work queue, where its deliveries are
	// published. Default: every provider's is QueueURL.
	Routes envelope.Routes
	// Depths, if set, reads the depth of each provider's own work queue
	// (Routes.ByProvider) before the overdue scan: while more than Backlog
	// messages wait visible on one, its deliveries are not repaired. A
	// delivery behind a backlog is waiting, not lost; a copy would lengthen
	// the backlog and, on a paced provider's queue, spend a turn of its
	// rate only to be refused as a duplicate. One lost meanwhile is
	// repaired at the first run after the backlog drains. Default: no reads.
	Depths QueueDepths
	// Backlog is the visible depth above which a provider's own queue
	// counts as backlogged. Default 100.
	Backlog int
	// Shards is the due index shard count; the enqueue reads the larger of
	// this and the count the ledger recorded. Default 8.
	Shards int
	// Settle is how far behind now the cursors stay, so that an entry
	// written a moment ago (the index is eventually consistent, and
	// writers' clocks differ a little) is never passed unseen. Default 15s.
	Settle time.Duration
	// OverdueAfter is how long past dueAt a live delivery counts as
	// overdue (OverduePending). Default 5m.
	OverdueAfter time.Duration
	// RepairAfter is how long a handed-off delivery may go without a
	// consumer taking it (past dueAt, its retry time, or its lease) before
	// its hand-off counts as lost and it is published again. Each repair
	// since a consumer last claimed the delivery doubles the wait for the
	// next, up to 16 × RepairAfter. At least OverdueAfter. Default 10m.
	RepairAfter time.Duration
	// RepairLimit is the most overdue deliveries examined for repair per
	// run. Default 1000.
	RepairLimit int
	// Concurrency is how many shards are worked at once. Default 4.
	Concurrency int
	// PageSize is how many index entries one cursor step hands off.
	// Default 100.
	PageSize int
	// PublishAttempts is how often an entry SQS refuses is sent before it
	// is left for the next run. Default 4.
	PublishAttempts int
	// CutoffMargin is how long before the invocation deadline the run
	// stops starting work. Default 3s.
	CutoffMargin time.Duration
	// Reserve is how long before the invocation deadline the requests
	// still in flight are cancelled, so that a run slowed down by DynamoDB
	// or SQS answers as cut instead of timing out. A cursor move or a
	// publish already under way gets three quarters of the reserve more to
	// finish, since its outcome decides what the next run hands off.
	// Default 1s, or a quarter of CutoffMargin if that is less.
	Reserve time.Duration
	// MaxRun bounds a run whose context has no deadline. Default 50s.
	MaxRun time.Duration
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
	// Logger receives the run summary. Default slog.Default().
	Logger *slog.Logger
	// Metrics records the run's metrics. Nil records none.
	Metrics *metrics.Recorder
	// Series, with SeriesLedger, extends the recurring reminders whose
	// time has come, each run, after the hand-off (schedule.Store.Extend):
	// their next occurrences are created ahead. Default: none extended.
	Series SeriesExtender
	// SeriesLedger lists the series due for extension (the ledger).
	SeriesLedger SeriesLedger
}

// Enqueuer hands due deliveries from the calendar to the queue.
type Enqueuer struct {
	cfg Config
	pub *publisher
	// staged is set once the stage's facts are recorded.
	staged atomic.Bool
}

// New validates cfg, applies defaults and returns an Enqueuer.
func New(cfg Config) (*Enqueuer, error) {
	switch {
	case cfg.Ledger == nil:
		return nil, errors.New("enqueue: Ledger is nil")
	case cfg.Queue == nil:
		return nil, errors.New("enqueue: Queue (SQS client) is nil")
	case cfg.QueueURL == "":
		return nil, errors.New("enqueue: work queue URL is empty; set NUDGE_QUEUE_URL")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n == 0 {
			*n = v
		}
	}
	defInt(&cfg.Shards, 8)
	def(&cfg.Settle, 15*time.Second)
	def(&cfg.OverdueAfter, 5*time.Minute)
	def(&cfg.RepairAfter, 10*time.Minute)
	defInt(&cfg.RepairLimit, 1000)
	defInt(&cfg.Concurrency, 4)
	defInt(&cfg.PageSize, 100)
	defInt(&cfg.PublishAttempts, 4)
	defInt(&cfg.Backlog, 100)
	def(&cfg.CutoffMargin, 3*time.Second)
	def(&cfg.MaxRun, 50*time.Second)
	def(&cfg.Reserve, min(time.Second, cfg.CutoffMargin/4))
	switch {
	case cfg.Shards < 1 || cfg.Shards > 1000:
		return nil, fmt.Errorf("enqueue: %d shards; use 1 to 1000 (NUDGE_SHARDS)", cfg.Shards)
	case cfg.Settle < 0 || cfg.OverdueAfter < 0 || cfg.RepairAfter < 0 || cfg.CutoffMargin < 0 || cfg.MaxRun < 0:
		return nil, errors.New("enqueue: durations must not be negative")
	case cfg.RepairAfter < cfg.OverdueAfter:
		return nil, fmt.Errorf("enqueue: RepairAfter %v is shorter than OverdueAfter %v; a delivery is repaired only once it is overdue", cfg.RepairAfter, cfg.OverdueAfter)
	case cfg.Settle >= cfg.Ledger.Lookahead():
		return nil, fmt.Errorf("enqueue: Settle %v must be shorter than the lookahead %v, or deliveries would be handed off late", cfg.Settle, cfg.Ledger.Lookahead())
	case cfg.Reserve <= 0 || cfg.Reserve >= cfg.CutoffMargin:
		return nil, fmt.Errorf("enqueue: reserve %v must be positive and below the cut-off margin %v (NUDGE_CUTOFF_MARGIN)", cfg.Reserve, cfg.CutoffMargin)
	case cfg.Concurrency < 1 || cfg.PageSize < 1 || cfg.PageSize > 1000 || cfg.RepairLimit < 1 || cfg.PublishAttempts < 1:
		return nil, errors.New("enqueue: Concurrency, RepairLimit and PublishAttempts must be positive and PageSize 1 to 1000")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Routes.Default == "" {
		cfg.Routes = envelope.Routes{Default: cfg.QueueURL}
	}
	pub := &publisher{queue: cfg.Queue, routes: cfg.Routes, attempts: cfg.PublishAttempts, clock: cfg.Clock, logger: cfg.Logger}
	return &Enqueuer{cfg: cfg, pub: pub}, nil
}

// Report is what one run did.
type Report struct {
	Shards int `json:"shards"`
	// Enqueued is deliveries handed off for the first time.
	Enqueued int `json:"enqueued"`
	// Passed is entries the cursors passed without publishing, because
	// their writer had handed them off already (the intake's short-notice
	// hand-off, ledger.IndexEntry.HandedOff).
	Passed int `json:"passed"`
	// Repaired is deliveries published again because their hand-off was
	// lost (each may reach the consumer twice; it deduplicates).
	Repaired int `json:"repaired"`
	// Expired is live deliveries found past expiresAt and ended unsent.
	Expired int `json:"expired"`
	// PublishFailed is deliveries SQS kept refusing; they are handed
	// back to the calendar for the next run.
	PublishFailed int `json:"publishFailed"`
	// PublishCut is deliveries whose publish the run's own deadline (the
	// reserve) ended, not SQS: handed back like a refused one, or, if that
	// too was cut, repaired by the overdue scan. A slow SQS or DynamoDB, as
	// Interrupted; not counted in PublishFailed, whose alarm calls for an
	// operator.
	PublishCut int `json:"publishCut"`
	// Republished is entries sent again after SQS failed a whole batch
	// call, which it may have accepted: possible duplicate messages.
	Republished int `json:"republished"`
	// RepairsDeferred is overdue deliveries not examined for repair
	// because their provider's own queue was backlogged (Config.Depths).
	RepairsDeferred int `json:"repairsDeferred"`
	// Contended is cursor steps lost to a concurrent run.
	Contended int `json:"contended"`
	// OverduePending is live deliveries more than OverdueAfter past dueAt.
	OverduePending int `json:"overduePending"`
	// OldestOverdue is how far past dueAt the oldest of them is.
	OldestOverdue time.Duration `json:"-"`
	// Lag is how long after its publish time the most delayed delivery of
	// this run was handed off.
	Lag time.Duration `json:"-"`
	// Caught is true if every shard's cursor reached the present.
	Caught bool `json:"caughtUp"`
	// Cut is true if the time budget ended the run with work left.
	Cut bool `json:"cut"`
	// SeriesExtended is series whose time for extension had come, and
	// OccurrencesCreated the occurrences their extension created (or found
	// created); OccurrencesMissed those that had expired before they could
	// be created.
	SeriesExtended     int `json:"seriesExtended"`
	OccurrencesCreated int `json:"occurrencesCreated"`
	OccurrencesMissed  int `json:"occurrencesMissed"`
	// Interrupted is shards whose work the reserve ended at the end of
	// the budget, a request cancelled or a page read and not handed off: a
	// sign that DynamoDB or SQS answered slowly. That work is left for the
	// next run.
	Interrupted int `json:"interrupted"`
}

// MarshalJSON writes the report as the function's response, with the
// durations in seconds.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		plain
		OldestOverdueSeconds float64 `json:"oldestOverdueSeconds"`
		LagSeconds           float64 `json:"lagSeconds"`
	}{plain(r), r.OldestOverdue.Seconds(), r.Lag.Seconds()})
}

// errReserve is the cause of a run's work context ending: the budget
// left before the reserve is spent.
var errReserve = errors.New("enqueue: the run's time budget ended")

// run is the state of one Run.
type run struct {
	e         *Enqueuer
	now       time.Time
	handOffBy time.Time // stop starting hand-off pages
	stopBy    time.Time // stop starting anything
	// work ends Reserve before the deadline; reads and new work run under
	// it. finish ends a quarter of Reserve before the deadline; a cursor
	// move or a publish that has started runs under it. Both are derived
	// from Run's context and cancelled when Run returns.
	work, finish context.Context

	// backlogged are the providers whose own queue is backlogged: their
	// deliveries are not repaired this run.
	backlogged map[string]bool

	mu     sync.Mutex
	report Report
	cursor map[int]ledger.Cursor // per shard, as last read or written
}

func (r *run) add(f func(rep *Report)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.report)
}

// Run hands off what is due and repairs what was lost, within the time
// budget the context's deadline (or MaxRun) leaves.
//
// The run stops starting work CutoffMargin before the deadline, and
// cancels what is still in flight Reserve before it. Work the reserve
// ends is not an error: the run reports Cut and the next resumes it. Any
// other failure is returned, after the rest of the run is done.
func (e *Enqueuer) Run(ctx context.Context) (Report, error) {
	c := e.cfg
	start := c.Clock.Now()
	// The deadline is the invocation's, on Lambda's clock (the wall clock),
	// as are the contexts made from it below. What is left of it becomes a
	// budget on the run's own clock.
	deadline, ok := ctx.Deadline() // wall clock: see above
	if !ok {
		deadline = time.Now().Add(c.MaxRun) // wall clock: a context deadline
	}
	budget := time.Until(deadline) - c.CutoffMargin // wall clock: the deadline's
	if budget <= 0 && ok {
		// The invocation began with less than the margin left (its start
		// was late, or, in the local emulator, the runtime's init counted
		// against it; a timeout shorter than the margin is refused at
		// init, enqueue.Settings). Nothing is started: the run answers cut,
		// and the next tick resumes from the cursors.
		c.Logger.Warn("enqueue run began too close to its deadline; nothing done, the next run resumes",
			"left", (budget + c.CutoffMargin).Round(time.Millisecond).String(), "cutoffMargin", c.CutoffMargin.String())
		rep := Report{Cut: true}
		e.emit(rep)
		return rep, nil
	}
	if budget <= 0 {
		return Report{}, fmt.Errorf("enqueue: no time left to run (budget %v after the %v cut-off margin); make NUDGE_CUTOFF_MARGIN shorter than the function timeout", budget+c.CutoffMargin, c.CutoffMargin)
	}
	work, cancelWork := context.WithDeadlineCause(ctx, deadline.Add(-c.Reserve), errReserve) // wall clock: as the deadline
	defer cancelWork()
	finish, cancelFinish := context.WithDeadlineCause(ctx, deadline.Add(-c.Reserve/4), errReserve) // wall clock: as the deadline
	defer cancelFinish()
	r := &run{e: e, now: start, cursor: map[int]ledger.Cursor{}, work: work, finish: finish}
	r.stopBy = start.Add(budget)
	r.handOffBy = start.Add(budget * 4 / 5) // a fifth of the budget is kept for the overdue scan

	shards, err := c.Ledger.StoredShards(work)
	if err != nil {
		if r.interrupted(err) {
			r.report.Cut = true
			e.emit(r.report)
			return r.report, nil
		}
		return Report{}, err
	}
	shards = max(shards, c.Shards)
	r.report.Shards = shards
	if c.Stage != nil && !e.staged.Load() {
		// Once per instance: what the stack runs, for the intake.
		if err := c.Ledger.RecordStage(work, *c.Stage); err != nil {
			c.Logger.Warn("could not record the stage's providers; the next run tries again", "error", err.Error())
		} else {
			e.staged.Store(true)
		}
	}

	// A shard that fails (throttling, say) does not stop the others; the
	// run reports what it did and then fails, so that the error is seen.
	caught, handOffErr := r.handOff(work, shards)
	seriesErr := r.extendSeries(work, shards)
	r.backlogged = r.backlogs(work)
	scanned, scanErr := r.scanOverdue(work, shards)
	r.report.Caught = caught && handOffErr == nil
	r.report.Cut = r.report.Cut || !caught || !scanned
	e.emit(r.report)
	return r.report, errors.Join(handOffErr, seriesErr, scanErr)
}

// interrupted reports whether err is a request the reserve cancelled (and
// not one the caller cancelled, or that failed on its own), and counts it.
func (r *run) interrupted(err error) bool {
	if !errors.Is(err, errReserve) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return false
	}
	if context.Cause(r.work) != errReserve {
		return false
	}
	r.add(func(rep *Report) { rep.Interrupted++ })
	return true
}

func (e *Enqueuer) emit(rep Report) {
	m := e.cfg.Metrics
	m.Add(MetricEnqueued, float64(rep.Enqueued))
	m.Add(MetricRepaired, float64(rep.Repaired))
	m.Add(MetricExpired, float64(rep.Expired))
	m.Add(MetricPublishFailed, float64(rep.PublishFailed))
	m.Add(MetricRepublished, float64(rep.Republished))
	m.Add(MetricOccurrencesCreated, float64(rep.OccurrencesCreated))
	m.Add(MetricOccurrencesMissed, float64(rep.OccurrencesMissed))
	m.Add(MetricOverduePending, float64(rep.OverduePending))
	m.Observe(MetricOldestOverdue, rep.OldestOverdue.Seconds())
	m.Observe(MetricLag, rep.Lag.Seconds())
	e.cfg.Logger.Info("enqueue run", "shards", rep.Shards, "enqueued", rep.Enqueued, "passed", rep.Passed, "repaired", rep.Repaired, "repairsDeferred", rep.RepairsDeferred,
		"expired", rep.Expired, "publishFailed", rep.PublishFailed, "publishCut", rep.PublishCut, "republished", rep.Republished, "contended", rep.Contended,
		"overduePending", rep.OverduePending, "oldestOverdue", rep.OldestOverdue.Round(time.Second).String(),
		"lag", rep.Lag.Round(time.Second).String(), "caughtUp", rep.Caught, "cut", rep.Cut, "interrupted", rep.Interrupted)
}

// handOff works every shard's cursor forward a page at a time, round
// robin, until each has caught up or the hand-off budget ends. Round robin
// means a backlog in one shard never starves another; the starting shard
// rotates each minute so that a budget too small for one page per shard
// still reaches all of them over a few runs.
func (r *run) handOff(ctx context.Context, shards int) (bool, error) {
	var mu sync.Mutex
	queue := make([]int, 0, shards)
	offset := int(r.now.Unix()/60) % shards
	for i := range shards {
		queue = append(queue, (offset+i)%shards)
	}
	caught := true
	var errs []error
	var wg sync.WaitGroup
	for range min(r.e.cfg.Concurrency, shards) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if len(queue) == 0 {
					mu.Unlock()
					return
				}
				if !r.e.cfg.Clock.Now().Before(r.handOffBy) || ctx.Err() != nil {
					caught = false
					mu.Unlock()
					return
				}
				shard := queue[0]
				queue = queue[1:]
				mu.Unlock()
				more, err := r.page(ctx, shard)
				mu.Lock()
				switch {
				case err != nil && r.interrupted(err):
					caught = false // this shard resumes next run
				case err != nil:
					errs = append(errs, err) // this shard waits for the next run
				case more:
					queue = append(queue, shard)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return caught, errors.Join(errs...)
}

// page hands off the next page of one shard: it reads the entries after
// the cursor up to now − Settle, moves the cursor past them with a
// conditional write (which is what keeps two runs from handing off the
// same entries), then publishes them. It reports whether more may remain.
func (r *run) page(ctx context.Context, shard int) (bool, error) {
	c := r.e.cfg
	upTo := r.now.Add(-c.Settle)
	r.mu.Lock()
	cur, known := r.cursor[shard] // where this run left the cursor, if it moved it
	r.mu.Unlock()
	for {
		if !known {
			var err error
			if cur, err = c.Ledger.Cursor(ctx, shard); err != nil {
				return false, err
			}
			r.mu.Lock()
			r.cursor[shard] = cur
			r.mu.Unlock()
		}
		entries, err := c.Ledger.DueAfter(ctx, shard, cur.Pos, upTo, c.PageSize)
		if err != nil {
			return false, err
		}
		if len(entries) == 0 {
			return false, nil
		}
		last := entries[len(entries)-1].Sort
		if err := context.Cause(ctx); err != nil {
			return false, err // the reserve began while reading: move nothing
		}
		// From here the page is finished under r.finish: a cursor moved
		// and then not published waits for the overdue scan's repair.
		trail := r.e.trail(cur, c.Clock.Now())
		moved, err := c.Ledger.MoveCursor(r.finish, shard, cur.Pos, last, trail)
		if err != nil {
			return false, err
		}
		if !moved {
			// Another run took these; look again from where it left the cursor.
			r.add(func(rep *Report) { rep.Contended++ })
			known = false
			continue
		}
		cur = ledger.Cursor{Pos: last, MovedAt: c.Clock.Now(), Trail: trail}
		r.mu.Lock()
		r.cursor[shard] = cur
		r.mu.Unlock()
		r.publishEntries(r.finish, entries)
		return len(entries) == c.PageSize, nil
	}
}

// publishEntries expires what has expired and publishes the rest; what SQS
// keeps refusing goes back to the calendar, ahead of the cursor.
func (r *run) publishEntries(ctx context.Context, entries []ledger.IndexEntry) {
	var out []ledger.IndexEntry
	passed := 0
	for _, e := range entries {
		if e.HandedOff && e.ExpiresAt.After(r.now) {
			passed++ // its message is on the queue already
			continue
		}
		if !e.ExpiresAt.After(r.now) {
			r.expire(ctx, ledger.Delivery{ReminderID: e.Key.ReminderID, Channel: e.Key.Channel, Provider: e.Key.Provider, DueAt: e.DueAt, ExpiresAt: e.ExpiresAt})
			continue
		}
		out = append(out, e)
		if lag := r.now.Sub(e.PublishAt); lag > 0 {
			r.add(func(rep *Report) { rep.Lag = max(rep.Lag, lag) })
		}
	}
	failed, republished := r.e.pub.publish(ctx, out)
	cut := ctx.Err() != nil
	r.add(func(rep *Report) {
		rep.Enqueued += len(out) - len(failed)
		rep.Passed += passed
		rep.countFailed(len(failed), cut)
		rep.Republished += republished
	})
	r.handBack(ctx, failed)
}

// countFailed counts n deliveries not published: cut by the run's own
// deadline, or refused by SQS.
func (rep *Report) countFailed(n int, cut bool) {
	if cut {
		rep.PublishCut += n
	} else {
		rep.PublishFailed += n
	}
}

// handBack returns entries SQS kept refusing to the calendar, ahead of the
// cursor, for the next run to hand off.
func (r *run) handBack(ctx context.Context, failed []ledger.IndexEntry) {
	c := r.e.cfg
	for _, e := range failed {
		_, err := c.Ledger.Release(ctx, e.Key, e.DueAt, "publish failed; retried by the next run")
		switch {
		case errors.As(err, new(*ledger.RefusedError)):
			// Taken or ended meanwhile (an earlier copy reached a consumer).
		case err != nil:
			c.Logger.Warn("publish failed and the delivery could not be handed back; the overdue scan will repair it",
				"deliveryKey", e.Key.String(), "error", err.Error())
		}
	}
}

func (r *run) expire(ctx context.Context, d ledger.Delivery) {
	// d is as read: its claim token, if any, is the holder's, which the
	// ledger never takes for this run's.
	got, err := r.e.cfg.Ledger.Expire(ctx, d)
	switch {
	case err == nil:
		r.add(func(rep *Report) { rep.Expired++ })
		attrs := []any{"deliveryKey", d.Key().String(), "outcome", "expired", "expiresAt", ledger.Format(got.ExpiresAt)}
		if n := got.EndedUnended(); n > 0 {
			attrs = append(attrs, "unendedAttempt", n, "errorClass", "ambiguous")
		}
		r.e.cfg.Logger.Info("transition", attrs...)
	case errors.Is(err, ledger.ErrAlreadySent), errors.Is(err, ledger.ErrFinished), errors.Is(err, ledger.ErrLeased), errors.Is(err, ledger.ErrNotExpired):
		// Ended meanwhile, a consumer holds it (and ends it), or it was
		// rescheduled since the read.
	default:
		r.e.cfg.Logger.Warn("cannot expire delivery", "deliveryKey", d.Key().String(), "error", err.Error())
	}
}
