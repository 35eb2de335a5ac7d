package streammap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/nudgehq/nudge/pkg/clock"
)

// streamReader is what the mapping needs of DynamoDB Streams.
type streamReader interface {
	ListStreams(ctx context.Context, in *dynamodbstreams.ListStreamsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.ListStreamsOutput, error)
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput,
		opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput,
		opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

var _ streamReader = (*dynamodbstreams.Client)(nil)

// Limits and defaults of Lambda's DynamoDB stream mappings, and the local
// ones.
const (
	// DefaultBatchSize and MaxBatchSize are Lambda's for DynamoDB streams.
	DefaultBatchSize = 100
	MaxBatchSize     = 10000
	// MaxRetryAttempts is the largest MaximumRetryAttempts Lambda takes.
	MaxRetryAttempts = 10000
	// DefaultPollInterval is how often an idle shard is read locally
	// (Lambda's pollers read each shard about four times a second).
	DefaultPollInterval = 250 * time.Millisecond
	// DefaultRetryDelay is the pause before the first retry of a failed
	// batch; it doubles with each retry, up to maxRetryDelay.
	DefaultRetryDelay = 100 * time.Millisecond
	maxRetryDelay     = 5 * time.Second
	// maxPayload is the synchronous invocation payload limit (6 MB): a
	// batch stops short of it.
	maxPayload = 6 << 20
	// pageLimit is the most records one GetRecords returns.
	pageLimit = 1000
)

// ConditionRetryAttemptsExhausted is Discarded.Condition when the batch
// failed MaximumRetryAttempts retries, as in Lambda's on-failure record.
const ConditionRetryAttemptsExhausted = "RetryAttemptsExhausted"

// Config configures a Mapping.
type Config struct {
	// Streams is the DynamoDB Streams client. For DynamoDB Local, its
	// BaseEndpoint is DynamoDB Local's URL. Required.
	Streams streamReader
	// StreamARN is the stream to read: a table's LatestStreamArn. Either
	// it or TableName is required.
	StreamARN string
	// TableName names the table whose stream to read, if StreamARN is
	// empty: Run finds its latest stream (ListStreams, the greatest
	// StreamLabel) when it starts.
	TableName string
	// Invoker is the function. Required.
	Invoker Invoker
	// BatchSize is the most records per invocation: 1 to 10,000. Default
	// 100, as Lambda's. A batch also stops short of the 6 MB payload limit.
	BatchSize int
	// StartingPosition is where reading starts in the shards the stream has
	// when Run starts: types.ShardIteratorTypeTrimHorizon (every record the
	// stream holds) or types.ShardIteratorTypeLatest (only records written
	// after). Shards that appear later are read from their start. Default
	// TRIM_HORIZON.
	StartingPosition types.ShardIteratorType
	// MaximumRetryAttempts is how many times a failed batch is retried
	// before its records go to OnFailure and the shard moves on: 0 to
	// 10,000, or -1 to retry until Run ends (Lambda: until the records
	// expire). nil means -1, Lambda's default; aws.Int(0) discards a batch
	// on its first failure.
	MaximumRetryAttempts *int
	// RetryDelay is the pause before the first retry of a failed batch,
	// doubled for each further retry up to 5 s. Default 100 ms.
	RetryDelay time.Duration
	// OnFailure receives the records of a batch discarded after its
	// retries, as Lambda's on-failure destination does. Default: they are
	// logged and dropped, as Lambda drops them without a destination.
	OnFailure func(ctx context.Context, d Discarded)
	// PollInterval is how long a shard that had no new records waits before
	// it is read again, and how often the stream is described for new
	// shards. Default 250 ms.
	PollInterval time.Duration
	// Clock tells the time and waits. Default clock.Real.
	Clock clock.Clock
	// Logger receives a line per failed batch, discarded batch and failed
	// DynamoDB Streams call. Default: discard.
	Logger *slog.Logger
}

// Discarded is a batch whose retries ran out: what Lambda's on-failure
// destination receives for a stream (its DDBStreamBatchInfo), and the
// batch's event itself, as an Amazon S3 destination keeps it.
type Discarded struct {
	StreamARN string
	ShardID   string
	// StartSequenceNumber and EndSequenceNumber are the first and last
	// records of the batch.
	StartSequenceNumber string
	EndSequenceNumber   string
	BatchSize           int
	// Condition is why: ConditionRetryAttemptsExhausted.
	Condition string
	// ApproximateInvokeCount is how many invocations failed the batch's
	// first record.
	ApproximateInvokeCount int
	// Err is the last invocation's failure.
	Err error
	// Event is the batch as the function last received it.
	Event json.RawMessage
	// At is when the batch was discarded.
	At time.Time
}

// Stats counts what a Mapping did.
type Stats struct {
	RecordsRead     int64 // records GetRecords returned
	Invocations     int64 // invocations of the function
	RecordsSent     int64 // records in those invocations (a record sent again counts again)
	Acknowledged    int64 // records the checkpoints moved past after the function succeeded with them
	BatchesRetried  int64 // invocations that retried records of a failed invocation
	BatchFailures   int64 // invocations that failed as a whole (function error, invocation error, bad response)
	PartialFailures int64 // invocations that reported batch item failures
	Discarded       int64 // records sent to OnFailure (or dropped without it) after the retries
	StreamErrors    int64 // DynamoDB Streams calls that failed
	Shards          int64 // shards the stream has described
	ShardsFinished  int64 // closed shards read to their end (or skipped: closed before a LATEST start)
}

// ShardState is where the mapping is in one shard.
type ShardState struct {
	ShardID       string
	ParentShardID string
	// Started: its parent is finished (or unknown), and it is being read.
	Started bool
	// Finished: closed, and every record handed over (or skipped).
	Finished bool
	// Checkpoint is the sequence number of the last record done with
	// (succeeded or discarded); "" before the first.
	Checkpoint string
	// Pending is how many records are read and not yet done with.
	Pending int
	// RetryingFrom is the sequence number the shard retries from after a
	// failure ("" when it is not retrying); Retries is how many
	// invocations in a row have failed there.
	RetryingFrom string
	Retries      int
	// LastError is why the last invocation failed ("" after a success).
	LastError string
}

// Mapping is a DynamoDB stream event source mapping.
type Mapping struct {
	cfg        Config
	maxRetries int

	invokeMu sync.Mutex // one invocation at a time
	recycle  bool       // under invokeMu: recycle the Invoker before its next invocation

	// point hands out Drain's points; a read stamped with the point at its
	// start saw every record written before that point.
	point atomic.Uint64

	mu            sync.Mutex
	arn           string
	shards        map[string]*shard
	order         []string // shard ids, in the order they were first described
	described     uint64   // the point at the start of the last complete DescribeStream
	describedOnce bool
	state         runState
	changed       chan struct{} // closed and replaced when anything Drain watches changes
	wake          chan struct{} // closed and replaced to wake idle pollers
	runCtx        context.Context
	wg            sync.WaitGroup

	stats struct {
		read, invocations, sent, acked, retried, batchFailures, partial, discarded, streamErrors, shards, finished atomic.Int64
	}
}

type runState int

const (
	notStarted runState = iota
	running
	ended
)

// shard is one shard's state; its fields are under Mapping.mu.
type shard struct {
	id, parent string
	initial    bool // described by Run's first DescribeStream
	closed     bool // has an EndingSequenceNumber
	started    bool
	finished   bool
	checkpoint string
	pending    int
	failingAt  string
	retries    int
	lastErr    string
	caughtUp   uint64 // the point at the start of the last empty read with nothing pending
}

// New checks cfg, applies its defaults and returns a Mapping.
func New(cfg Config) (*Mapping, error) {
	if cfg.Streams == nil || cfg.Invoker == nil {
		return nil, errors.New("streammap: Streams (a dynamodbstreams client) and Invoker (the function) are required")
	}
	if cfg.StreamARN == "" && cfg.TableName == "" {
		return nil, errors.New("streammap: set StreamARN (the table's LatestStreamArn) or TableName")
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > MaxBatchSize {
		return nil, fmt.Errorf("streammap: batch size %d is outside 1–%d", cfg.BatchSize, MaxBatchSize)
	}
	switch cfg.StartingPosition {
	case "":
		cfg.StartingPosition = types.ShardIteratorTypeTrimHorizon
	case types.ShardIteratorTypeTrimHorizon, types.ShardIteratorTypeLatest:
	default:
		return nil, fmt.Errorf("streammap: starting position %q is not TRIM_HORIZON or LATEST", cfg.StartingPosition)
	}
	maxRetries := -1
	if cfg.MaximumRetryAttempts != nil {
		maxRetries = *cfg.MaximumRetryAttempts
	}
	if maxRetries < -1 || maxRetries > MaxRetryAttempts {
		return nil, fmt.Errorf("streammap: maximum retry attempts %d is outside -1 (until Run ends) to %d", maxRetries, MaxRetryAttempts)
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = DefaultRetryDelay
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.RetryDelay < 0 || cfg.PollInterval < 0 {
		return nil, fmt.Errorf("streammap: retry delay %v and poll interval %v must not be negative", cfg.RetryDelay, cfg.PollInterval)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Mapping{cfg: cfg, maxRetries: maxRetries, arn: cfg.StreamARN, shards: map[string]*shard{},
		changed: make(chan struct{}), wake: make(chan struct{})}, nil
}

// StreamARN returns the stream the mapping reads: Config.StreamARN, or the
// one Run found for Config.TableName ("" before).
func (m *Mapping) StreamARN() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.arn
}

// Stats returns the counts so far.
func (m *Mapping) Stats() Stats {
	s := &m.stats
	return Stats{RecordsRead: s.read.Load(), Invocations: s.invocations.Load(), RecordsSent: s.sent.Load(), Acknowledged: s.acked.Load(),
		BatchesRetried: s.retried.Load(), BatchFailures: s.batchFailures.Load(), PartialFailures: s.partial.Load(), Discarded: s.discarded.Load(),
		StreamErrors: s.streamErrors.Load(), Shards: s.shards.Load(), ShardsFinished: s.finished.Load()}
}

// Shards returns where the mapping is in each shard, in the order the
// stream first described them.
func (m *Mapping) Shards() []ShardState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ShardState, 0, len(m.order))
	for _, id := range m.order {
		s := m.shards[id]
		out = append(out, ShardState{ShardID: s.id, ParentShardID: s.parent, Started: s.started, Finished: s.finished, Checkpoint: s.checkpoint,
			Pending: s.pending, RetryingFrom: s.failingAt, Retries: s.retries, LastError: s.lastErr})
	}
	return out
}

// Run reads the stream and invokes the function until ctx ends; it returns
// nil then. It returns an error at once if the stream cannot be found
// (no stream on Config.TableName, or no stream Config.StreamARN). Other
// DynamoDB Streams errors are logged and the call tried again after the
// poll interval. An invocation in progress when ctx ends is finished
// first, since an emulator instance cannot take a new one while it runs
// it. A Mapping runs once.
func (m *Mapping) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.state != notStarted {
		m.mu.Unlock()
		return errors.New("streammap: this Mapping has run already; make a new one")
	}
	m.state, m.runCtx = running, ctx
	m.mu.Unlock()
	defer func() {
		m.wg.Wait()
		m.mu.Lock()
		m.state = ended
		m.notifyLocked()
		m.mu.Unlock()
	}()
	arn, err := m.resolve(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for first := true; ; first = false {
		err := m.discover(ctx, arn)
		var notFound *types.ResourceNotFoundException
		switch {
		case ctx.Err() != nil:
			return nil
		case first && errors.As(err, &notFound):
			return fmt.Errorf("streammap: stream %s: %w", arn, err)
		case err != nil:
			m.streamError("describe the stream", "", err)
		}
		if !m.sleep(ctx, m.cfg.PollInterval, true) {
			return nil
		}
	}
}

// resolve returns the stream's ARN, finding the table's latest stream if
// the Config names a table.
func (m *Mapping) resolve(ctx context.Context) (string, error) {
	if m.cfg.StreamARN != "" {
		return m.cfg.StreamARN, nil
	}
	var latest types.Stream
	in := &dynamodbstreams.ListStreamsInput{TableName: aws.String(m.cfg.TableName)}
	for {
		out, err := m.cfg.Streams.ListStreams(ctx, in)
		if err != nil {
			return "", fmt.Errorf("streammap: find the stream of table %q: %w", m.cfg.TableName, err)
		}
		for _, s := range out.Streams {
			if aws.ToString(s.StreamLabel) >= aws.ToString(latest.StreamLabel) {
				latest = s
			}
		}
		if out.LastEvaluatedStreamArn == nil {
			break
		}
		in.ExclusiveStartStreamArn = out.LastEvaluatedStreamArn
	}
	if latest.StreamArn == nil {
		return "", fmt.Errorf("streammap: table %q has no stream (or there is no such table): create it with a StreamSpecification "+
			"(StreamEnabled, StreamViewType NEW_AND_OLD_IMAGES), or set StreamARN", m.cfg.TableName)
	}
	m.mu.Lock()
	m.arn = aws.ToString(latest.StreamArn)
	m.mu.Unlock()
	return aws.ToString(latest.StreamArn), nil
}

// Drain waits until every record written to the stream before it was
// called has been handed to the function and done with: acknowledged, or
// discarded after its retries. It returns an error when ctx ends first,
// saying what is still pending (a shard retrying a record, say), or when
// Run has ended. It wakes idle shards so that they read at once.
func (m *Mapping) Drain(ctx context.Context) error {
	p := m.point.Add(1)
	m.mu.Lock()
	close(m.wake)
	m.wake = make(chan struct{})
	m.mu.Unlock()
	for {
		m.mu.Lock()
		done, why := m.caughtUpLocked(p)
		state, changed := m.state, m.changed
		m.mu.Unlock()
		switch {
		case done:
			return nil
		case state == ended:
			return fmt.Errorf("streammap: Run has ended before the stream was drained: %s", why)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("streammap: the stream is not drained: %s: %w", why, ctx.Err())
		case <-changed:
		}
	}
}

// caughtUpLocked reports whether everything written before point p is done
// with, and if not, why not.
func (m *Mapping) caughtUpLocked(p uint64) (bool, string) {
	if m.state == notStarted {
		return false, "Run has not started"
	}
	if m.described < p {
		return false, "the stream has not been described since (is it there? see the log)"
	}
	for _, id := range m.order {
		s := m.shards[id]
		switch {
		case s.finished:
		case !s.started:
			return false, fmt.Sprintf("shard %s waits for its parent %s", s.id, s.parent)
		case s.failingAt != "":
			return false, fmt.Sprintf("shard %s retries from record %s (%d failures; last: %s)", s.id, s.failingAt, s.retries, s.lastErr)
		case s.caughtUp < p:
			return false, fmt.Sprintf("shard %s has records to read or hand over (%d read and pending)", s.id, s.pending)
		}
	}
	return true, ""
}

// notifyLocked wakes the Drain calls waiting for a change.
func (m *Mapping) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// update changes a shard's state under the lock and tells Drain.
func (m *Mapping) update(s *shard, f func(*shard)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(s)
	m.notifyLocked()
}

// sleep waits d on the clock; woken by Drain too if wakeable. It reports
// false if ctx ended.
func (m *Mapping) sleep(ctx context.Context, d time.Duration, wakeable bool) bool {
	var wake chan struct{}
	if wakeable {
		m.mu.Lock()
		wake = m.wake
		m.mu.Unlock()
	}
	select {
	case <-ctx.Done():
		return false
	case <-m.cfg.Clock.After(d):
	case <-wake:
	}
	return true
}

// streamError counts and logs a failed DynamoDB Streams call.
func (m *Mapping) streamError(what, shardID string, err error) {
	m.stats.streamErrors.Add(1)
	m.cfg.Logger.Warn("streammap: "+what+" failed; trying again", "shard", shardID, "error", err.Error())
}

// retryDelay is the pause before the retry-th retry of a batch: base,
// doubled for each retry after the first, at most maxRetryDelay (or base,
// if that is longer).
func retryDelay(base time.Duration, retry int) time.Duration {
	d := base
	for i := 1; i < retry && d < maxRetryDelay; i++ {
		d *= 2
	}
	return max(base, min(d, maxRetryDelay))
}
