package esm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Invoker invokes a function synchronously with payload and returns its
// response payload. A function error (a response with errorType) may be
// returned either as an error or as the payload; both fail the batch.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// Recycler is an Invoker whose instance the mapping recycles after an
// invocation that did not answer as a function does (it timed out at
// FunctionTimeout, or the instance failed to answer at all), as Lambda
// replaces the execution environment of an invocation that timed out: an
// instance still busy with the old invocation must not be given a new one.
type Recycler interface {
	Invoker
	// Recycle ends whatever the instance is still running, so that it can
	// take the next invocation.
	Recycle(ctx context.Context) error
}

// InvokerFunc adapts a function to Invoker.
type InvokerFunc func(ctx context.Context, payload []byte) ([]byte, error)

// Invoke calls f.
func (f InvokerFunc) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return f(ctx, payload)
}

// queueAPI is what the mapping needs of SQS.
type queueAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

var _ queueAPI = (*sqs.Client)(nil)

// Limits Lambda applies to an SQS event source mapping.
const (
	MaxBatchSize      = 10000
	MaxBatchingWindow = 5 * time.Minute
	// maxPayload is the synchronous invocation payload limit (6 MB); the
	// mapping stops gathering before a batch could pass it.
	maxPayload = 6 << 20
	// maxMessage is SQS's largest message (1 MiB).
	maxMessage = 1 << 20
	// MaxFunctionTimeout is Lambda's largest function timeout.
	MaxFunctionTimeout = 15 * time.Minute
	// InvokeGrace is how long past FunctionTimeout the mapping waits for
	// an invocation's answer before it ends it itself: the function's own
	// runtime (the emulator) answers a timed-out invocation at the timeout.
	InvokeGrace = 2 * time.Second
	// receiveGrace is how long past its wait a receive may take before the
	// mapping gives it up (its records, if the queue handed it any, come
	// back after their visibility timeout).
	receiveGrace = 10 * time.Second
)

// Config configures a Mapping.
type Config struct {
	// Queue is the SQS client. Required.
	Queue queueAPI
	// QueueURL is the source queue. Required.
	QueueURL string
	// QueueARN is put in each record's eventSourceARN. Required.
	QueueARN string
	// BatchSize is the most records per invocation: 1 to 10,000. Default 10.
	// Above 10 it needs a BatchingWindow of at least 1 s, as in Lambda.
	BatchSize int
	// BatchingWindow is how long to keep gathering records after the first
	// arrives, until BatchSize is reached: 0 to 5 min. Default 0 (invoke
	// with what one receive returns).
	BatchingWindow time.Duration
	// Invokers are the function instances, each invoked one batch at a
	// time; their number is the maximum concurrency. At least one.
	Invokers []Invoker
	// PollWait is the long-poll wait of an empty receive: 1–20 s.
	// Default 20 s, as Lambda's pollers.
	PollWait time.Duration
	// FunctionTimeout is the function's timeout. Lambda ends an invocation
	// at it: an invocation that has not answered FunctionTimeout (and
	// InvokeGrace) after it started fails as a whole, its records come
	// back after their visibility timeout, and an Invoker that is a
	// Recycler is recycled before its next invocation. 1 s to 15 min.
	// Default 15 min, Lambda's largest.
	FunctionTimeout time.Duration
	// Logger receives a line per failed invocation. Default: discard.
	Logger *slog.Logger
}

// Stats counts what a Mapping did.
type Stats struct {
	Invocations   int64 // batches the function was invoked with
	Records       int64 // records in those batches
	Deleted       int64 // records deleted after an invocation
	Returned      int64 // records left to their visibility (reported failures, or a failed batch)
	BatchFailures int64 // invocations that failed as a whole (function error, bad response, timeout)
	Timeouts      int64 // invocations that had not answered by the function's timeout (in BatchFailures too)
	// UnseenReceives counts receives of records that never reached the
	// mapping: a record arrived with an ApproximateReceiveCount above one
	// more than the receives the mapping had had of it. Another consumer
	// of the queue, or a receive whose answer was lost; either way the
	// record waited out a visibility timeout first.
	UnseenReceives  int64
	ReceiveRequests int64 // ReceiveMessage calls
	DeleteRequests  int64 // DeleteMessageBatch calls
}

// Mapping is a running event source mapping.
type Mapping struct {
	cfg   Config
	stats struct {
		invocations, records, deleted, returned, batchFailures, timeouts, receives, deletes, unseen atomic.Int64
	}
	seenMu   sync.Mutex
	seen     map[string]int            // receives had, by message id
	returned map[string]ReturnedRecord // left to their visibility, until received again
	mu       sync.Mutex
	pollers  []PollerState // by Invoker
	recycle  []bool        // by Invoker: recycle before the next invocation
}

// Phase is what a poller is doing.
type Phase string

// A poller's phases.
const (
	Idle      Phase = "idle"      // not polling (before Run, or after it)
	Receiving Phase = "receiving" // gathering a batch from the queue
	Invoking  Phase = "invoking"  // waiting for the function's answer
	Deleting  Phase = "deleting"  // deleting the records that succeeded
	Pausing   Phase = "pausing"   // after an SQS error, before trying again
	Recycling Phase = "recycling" // recycling its instance after an invocation that did not answer
)

// PollerState is what one poller, the one of an Invoker, is doing.
type PollerState struct {
	// Invoker is the poller's Invoker, by its index in Config.Invokers.
	Invoker int
	Phase   Phase
	// Since is when the phase began.
	Since time.Time
	// Records are the message ids of the batch in hand (Invoking,
	// Deleting), or of the batch received so far (Receiving).
	Records []string
	// Received is how many records the current receive phase holds.
	Received int
}

// Pollers returns what each poller is doing now, by Invoker, so that a
// run that stops moving can say where: an invocation that never answers,
// or records the queue holds in flight that no poller has (a receive whose
// answer was lost).
func (m *Mapping) Pollers() []PollerState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PollerState, len(m.pollers))
	for i, p := range m.pollers {
		out[i] = p
		out[i].Records = append([]string(nil), p.Records...)
	}
	return out
}

// Held is how many records the pollers hold now (received, being invoked
// or deleted): what the queue counts in flight because of this mapping.
func (m *Mapping) Held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, p := range m.pollers {
		n += max(len(p.Records), p.Received)
	}
	return n
}

func (m *Mapping) enter(i int, phase Phase, records []string) {
	if i < 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pollers[i] = PollerState{Invoker: i, Phase: phase, Since: time.Now(), Records: records, Received: len(records)}
}

// New checks cfg, applies its defaults and returns a Mapping.
func New(cfg Config) (*Mapping, error) {
	if cfg.Queue == nil || cfg.QueueURL == "" || cfg.QueueARN == "" {
		return nil, errors.New("esm: Queue, QueueURL and QueueARN are required")
	}
	if len(cfg.Invokers) == 0 {
		return nil, errors.New("esm: at least one Invoker is required (one per concurrent invocation)")
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 10
	}
	if cfg.BatchSize < 1 || cfg.BatchSize > MaxBatchSize {
		return nil, fmt.Errorf("esm: batch size %d is outside 1–%d", cfg.BatchSize, MaxBatchSize)
	}
	if cfg.BatchingWindow < 0 || cfg.BatchingWindow > MaxBatchingWindow {
		return nil, fmt.Errorf("esm: batching window %v is outside 0–%v", cfg.BatchingWindow, MaxBatchingWindow)
	}
	if cfg.BatchSize > 10 && cfg.BatchingWindow < time.Second {
		return nil, fmt.Errorf("esm: batch size %d needs a batching window of at least 1s (Lambda's rule for SQS batches above 10)", cfg.BatchSize)
	}
	if cfg.PollWait == 0 {
		cfg.PollWait = 20 * time.Second
	}
	if cfg.PollWait < time.Second || cfg.PollWait > 20*time.Second {
		return nil, fmt.Errorf("esm: poll wait %v is outside 1s–20s", cfg.PollWait)
	}
	if cfg.FunctionTimeout == 0 {
		cfg.FunctionTimeout = MaxFunctionTimeout
	}
	if cfg.FunctionTimeout < time.Second || cfg.FunctionTimeout > MaxFunctionTimeout {
		return nil, fmt.Errorf("esm: function timeout %v is outside 1s–%v", cfg.FunctionTimeout, MaxFunctionTimeout)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Mapping{cfg: cfg, pollers: make([]PollerState, len(cfg.Invokers)), recycle: make([]bool, len(cfg.Invokers)), seen: map[string]int{},
		returned: map[string]ReturnedRecord{}}
	for i := range m.pollers {
		m.pollers[i] = PollerState{Invoker: i, Phase: Idle, Since: time.Now()}
	}
	return m, nil
}

// Invoker returns the i-th Invoker.
func (m *Mapping) Invoker(i int) Invoker { return m.cfg.Invokers[i] }

// Stats returns the counts so far.
func (m *Mapping) Stats() Stats {
	s := &m.stats
	return Stats{Invocations: s.invocations.Load(), Records: s.records.Load(), Deleted: s.deleted.Load(), Returned: s.returned.Load(),
		BatchFailures: s.batchFailures.Load(), Timeouts: s.timeouts.Load(), UnseenReceives: s.unseen.Load(), ReceiveRequests: s.receives.Load(), DeleteRequests: s.deletes.Load()}
}

// Run polls with every Invoker until ctx ends. A batch already received
// when ctx ends is still invoked and acknowledged, as Lambda drains a
// disabled mapping's batches in flight. An SQS error is logged, and that
// poller tries again a second later.
func (m *Mapping) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i, inv := range m.cfg.Invokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer m.enter(i, Idle, nil)
			for ctx.Err() == nil {
				if _, err := m.poll(ctx, i, inv); err != nil && ctx.Err() == nil {
					m.cfg.Logger.Warn("esm: poll failed", "invoker", i, "error", err.Error())
					m.enter(i, Pausing, nil)
					select { // a poller backs off after an SQS error, then goes on
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			}
		}()
	}
	wg.Wait()
}

// Result is what one poll did.
type Result struct {
	// Records is the batch's size; 0 when the queue had nothing.
	Records int
	// Deleted is how many records were deleted.
	Deleted int
	// Failed lists the records left to their visibility, by message id.
	Failed []string
	// BatchError is why the whole batch failed, if it did.
	BatchError error
}

// Poll gathers one batch, invokes inv with it and deletes the records that
// succeeded. It returns an empty Result when nothing arrived within the
// poll wait. The error is an SQS failure; a failing function is reported in
// Result.BatchError. Unlike Run, it keeps no poller state and recycles no
// Invoker after a timeout.
func (m *Mapping) Poll(ctx context.Context, inv Invoker) (Result, error) {
	return m.poll(ctx, -1, inv)
}

// poll is Poll for the i-th Invoker, whose state it keeps (i < 0: none).
func (m *Mapping) poll(ctx context.Context, i int, inv Invoker) (Result, error) {
	if err := m.recycled(ctx, i, inv); err != nil {
		return Result{}, err
	}
	m.enter(i, Receiving, nil)
	msgs, err := m.gather(ctx, i)
	if len(msgs) == 0 {
		return Result{}, err
	}
	if err != nil {
		m.cfg.Logger.Warn("esm: a receive failed while gathering a batch; invoking with the records received", "invoker", i, "records", len(msgs), "error", err.Error())
	}
	// From here the batch is ours: finish it even if ctx ends meanwhile.
	work := context.WithoutCancel(ctx)
	ev := Event(msgs, m.cfg.QueueARN)
	payload, jerr := json.Marshal(ev)
	if jerr != nil {
		return Result{}, jerr
	}
	ids := make([]string, len(ev.Records))
	for j, r := range ev.Records {
		ids[j] = r.MessageId
	}
	m.enter(i, Invoking, ids)
	m.stats.invocations.Add(1)
	m.stats.records.Add(int64(len(msgs)))
	// Lambda ends an invocation at the function's timeout; the emulator
	// answers one that times out itself, and the grace lets its answer
	// come first. An answer that never comes fails the batch here.
	invCtx, cancel := context.WithTimeoutCause(work, m.cfg.FunctionTimeout+InvokeGrace, errTimedOut)
	started := time.Now()
	resp, ierr := inv.Invoke(invCtx, payload)
	timedOut := ierr != nil && errors.Is(context.Cause(invCtx), errTimedOut)
	cancel()
	res := Result{Records: len(msgs)}
	var keep []events.SQSMessage
	switch {
	case timedOut:
		m.stats.timeouts.Add(1)
		res.BatchError = fmt.Errorf("invocation timed out: no answer %v after it started (the function's timeout is %v): %w",
			time.Since(started).Round(time.Millisecond), m.cfg.FunctionTimeout, ierr)
		m.markRecycle(i)
	case ierr != nil:
		// The emulator did not answer as it does (a function error is a
		// payload): it may still be running the invocation.
		res.BatchError = fmt.Errorf("invocation failed: %w", ierr)
		m.markRecycle(i)
	default:
		keep, res.BatchError = Acknowledged(ev, resp)
	}
	if res.BatchError != nil {
		m.stats.batchFailures.Add(1)
		m.cfg.Logger.Warn("esm: the whole batch failed; its records return after their visibility timeout", "invoker", i, "records", len(msgs),
			"first", ids[0], "error", res.BatchError.Error())
	}
	deleted := map[string]bool{}
	for _, r := range keep {
		deleted[r.MessageId] = true
	}
	for _, r := range ev.Records {
		if !deleted[r.MessageId] {
			res.Failed = append(res.Failed, r.MessageId)
		}
	}
	m.stats.returned.Add(int64(len(res.Failed)))
	why := ItemFailure
	if res.BatchError != nil {
		why = BatchFailed
	}
	m.noteReturned(i, res.Failed, why)
	if len(keep) > 0 {
		kept := make([]string, len(keep))
		for j, r := range keep {
			kept[j] = r.MessageId
		}
		m.enter(i, Deleting, kept)
	}
	gone, err := m.delete(work, keep)
	res.Deleted = len(gone)
	m.stats.deleted.Add(int64(len(gone)))
	m.forget(gone)
	if len(gone) < len(keep) {
		// What was not deleted comes back after its visibility timeout.
		left := make([]string, 0, len(keep)-len(gone))
		done := map[string]bool{}
		for _, id := range gone {
			done[id] = true
		}
		for _, r := range keep {
			if !done[r.MessageId] {
				left = append(left, r.MessageId)
			}
		}
		m.noteReturned(i, left, DeleteFailed)
	}
	return res, err
}

// errTimedOut is the cause of an invocation's context ending at the
// function's timeout.
var errTimedOut = errors.New("esm: the function's timeout passed")

// markRecycle notes that the i-th Invoker must be recycled before its next
// invocation.
func (m *Mapping) markRecycle(i int) {
	if i < 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recycle[i] = true
}

// recycled recycles the i-th Invoker if an invocation of it timed out and
// it is a Recycler.
func (m *Mapping) recycled(ctx context.Context, i int, inv Invoker) error {
	if i < 0 {
		return nil
	}
	m.mu.Lock()
	due := m.recycle[i]
	m.mu.Unlock()
	r, ok := inv.(Recycler)
	if !due || !ok {
		return nil
	}
	m.enter(i, Recycling, nil)
	if err := r.Recycle(ctx); err != nil {
		return fmt.Errorf("esm: recycle invoker %d after a timed-out invocation: %w", i, err)
	}
	m.mu.Lock()
	m.recycle[i] = false
	m.mu.Unlock()
	return nil
}

// gather receives until the batch is full or the batching window, counted
// from the first record, has passed. It counts what it holds in the i-th
// poller's state.
func (m *Mapping) gather(ctx context.Context, i int) ([]types.Message, error) {
	var (
		msgs     []types.Message
		size     int
		deadline time.Time
	)
	for len(msgs) < m.cfg.BatchSize {
		wait := m.cfg.PollWait
		if len(msgs) > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			wait = left
		}
		// One attempt per receive: a receive the SDK repeated after a
		// failure would hide the first attempt, whose records may be in
		// flight with no one holding them; the poller tries again itself.
		// A receive is not cancelled when ctx ends: cancelled after the
		// queue handed it records, its answer would be lost and the records
		// hidden for a visibility timeout. It ends within its wait, and a
		// batch received is invoked, as Lambda drains a disabled mapping;
		// one the queue never answers is given up receiveGrace later.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait.Truncate(time.Second)+receiveGrace)
		out, err := m.cfg.Queue.ReceiveMessage(rctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(m.cfg.QueueURL),
			MaxNumberOfMessages:         int32(min(10, m.cfg.BatchSize-len(msgs))),
			WaitTimeSeconds:             int32(wait / time.Second),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		}, func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
		cancel()
		m.stats.receives.Add(1)
		if err != nil {
			return msgs, fmt.Errorf("esm: receive (holding %d records): %w", len(msgs), err)
		}
		if len(msgs) == 0 && len(out.Messages) == 0 {
			return nil, nil // nothing within the poll wait
		}
		if len(msgs) == 0 && len(out.Messages) > 0 {
			deadline = time.Now().Add(m.cfg.BatchingWindow)
		}
		msgs = append(msgs, out.Messages...)
		if len(out.Messages) > 0 {
			m.held(i, len(msgs))
			m.count(out.Messages)
		}
		for _, msg := range out.Messages {
			size += len(aws.ToString(msg.Body)) + 1024
		}
		if m.cfg.BatchingWindow == 0 && len(msgs) > 0 || size+maxMessage > maxPayload {
			break
		}
		if len(msgs) > 0 && len(out.Messages) == 0 && time.Until(deadline) < time.Second {
			// A receive cannot wait less than a second; wait out the rest.
			select {
			case <-ctx.Done():
				return msgs, nil
			case <-time.After(time.Until(deadline)):
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	return msgs, nil
}

// count counts the receives of msgs that the mapping never saw
// (Stats.UnseenReceives).
func (m *Mapping) count(msgs []types.Message) {
	m.seenMu.Lock()
	defer m.seenMu.Unlock()
	for _, msg := range msgs {
		id := aws.ToString(msg.MessageId)
		n, err := strconv.Atoi(msg.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		if err != nil {
			continue
		}
		if missed := n - m.seen[id] - 1; missed > 0 {
			m.stats.unseen.Add(int64(missed))
			m.cfg.Logger.Warn("esm: a record arrives with receives the mapping never had", "messageId", id, "receiveCount", n, "had", m.seen[id])
		}
		m.seen[id] = max(n, m.seen[id])
		delete(m.returned, id)
	}
}

// ReturnedRecord is a record the mapping left to its visibility timeout
// (a reported failure, or a batch that failed as a whole), not received
// again since.
type ReturnedRecord struct {
	MessageID string
	// Invoker is the invocation's Invoker, by its index (-1: a Poll's).
	Invoker int
	// At is when the invocation answered.
	At time.Time
	// Why is why the mapping left it.
	Why ReturnReason
}

// ReturnReason is why the mapping left a record to its visibility timeout.
type ReturnReason string

// Why records are left to their visibility timeout.
const (
	// ItemFailure: the function reported it in batchItemFailures; the
	// visibility is whatever the function set (unchanged: the queue's).
	ItemFailure ReturnReason = "reported as a batch item failure"
	// BatchFailed: the invocation failed as a whole.
	BatchFailed ReturnReason = "of a batch that failed as a whole"
	// DeleteFailed: it succeeded, and its delete failed.
	DeleteFailed ReturnReason = "whose delete failed"
)

// returnedFor is how long a returned record is remembered: longer than
// SQS's largest visibility timeout, after which it is in the DLQ or lost.
const returnedFor = 12*time.Hour + time.Minute

// noteReturned records the records an invocation left to their visibility,
// and forgets the ones left longer ago than returnedFor.
func (m *Mapping) noteReturned(i int, ids []string, why ReturnReason) {
	if len(ids) == 0 {
		return
	}
	m.seenMu.Lock()
	defer m.seenMu.Unlock()
	now := time.Now()
	for id, r := range m.returned {
		if now.Sub(r.At) > returnedFor {
			delete(m.returned, id)
		}
	}
	for _, id := range ids {
		m.returned[id] = ReturnedRecord{MessageID: id, Invoker: i, At: now, Why: why}
	}
}

// forget drops what the mapping keeps of deleted records.
func (m *Mapping) forget(ids []string) {
	m.seenMu.Lock()
	defer m.seenMu.Unlock()
	for _, id := range ids {
		delete(m.seen, id)
		delete(m.returned, id)
	}
}

// Returned lists the records the mapping left to their visibility timeout
// and has not received again, oldest first: what the queue counts in
// flight because the mapping returned it, and no poller holds.
func (m *Mapping) Returned() []ReturnedRecord {
	m.seenMu.Lock()
	defer m.seenMu.Unlock()
	out := make([]ReturnedRecord, 0, len(m.returned))
	for _, r := range m.returned {
		out = append(out, r)
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].At.Equal(out[b].At) {
			return out[a].At.Before(out[b].At)
		}
		return out[a].MessageID < out[b].MessageID
	})
	return out
}

// held counts n records received so far in the i-th poller's state.
func (m *Mapping) held(i, n int) {
	if i < 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pollers[i].Received = n
}

// delete deletes records and returns the message ids it deleted.
func (m *Mapping) delete(ctx context.Context, records []events.SQSMessage) ([]string, error) {
	var deleted []string
	for start := 0; start < len(records); start += 10 {
		chunk := records[start:min(start+10, len(records))]
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i, r := range chunk {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.ReceiptHandle)}
		}
		out, err := m.cfg.Queue.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.cfg.QueueURL), Entries: entries})
		m.stats.deletes.Add(1)
		if err != nil {
			return deleted, fmt.Errorf("esm: delete: %w", err)
		}
		for _, ok := range out.Successful {
			if j, err := strconv.Atoi(aws.ToString(ok.Id)); err == nil && j >= 0 && j < len(chunk) {
				deleted = append(deleted, chunk[j].MessageId)
			}
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return deleted, fmt.Errorf("esm: delete refused for %d records (first: %s %s)", len(out.Failed), aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	return deleted, nil
}

// Event shapes received messages as Lambda's SQS event.
func Event(msgs []types.Message, queueARN string) events.SQSEvent {
	region := "us-east-1"
	if parts := strings.Split(queueARN, ":"); len(parts) > 3 && parts[3] != "" {
		region = parts[3]
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, msg := range msgs {
		attrs := map[string]string{}
		for k, v := range msg.Attributes {
			attrs[k] = v
		}
		mattrs := map[string]events.SQSMessageAttribute{}
		for k, v := range msg.MessageAttributes {
			mattrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
		}
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(msg.MessageId), ReceiptHandle: aws.ToString(msg.ReceiptHandle), Body: aws.ToString(msg.Body),
			Md5OfBody: aws.ToString(msg.MD5OfBody), Md5OfMessageAttributes: aws.ToString(msg.MD5OfMessageAttributes),
			Attributes: attrs, MessageAttributes: mattrs,
			EventSource: "aws:sqs", EventSourceARN: queueARN, AWSRegion: region,
		})
	}
	return ev
}

// Acknowledged reads a function's response to ev by Lambda's rules for
// ReportBatchItemFailures and returns the records to delete, or why the
// whole batch failed.
func Acknowledged(ev events.SQSEvent, response []byte) ([]events.SQSMessage, error) {
	trimmed := strings.TrimSpace(string(response))
	if trimmed == "" || trimmed == "null" || trimmed == "{}" {
		return ev.Records, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(response, &raw); err != nil {
		return nil, fmt.Errorf("the response is not a JSON object: %.80s", trimmed)
	}
	if t, ok := raw["errorType"]; ok {
		var msg string
		_ = json.Unmarshal(raw["errorMessage"], &msg)
		return nil, fmt.Errorf("function error %s: %s", t, msg)
	}
	failures, ok := raw["batchItemFailures"]
	if !ok || string(failures) == "null" {
		return ev.Records, nil
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(failures, &items); err != nil {
		return nil, fmt.Errorf("batchItemFailures is not a list of objects: %.80s", failures)
	}
	inBatch := map[string]bool{}
	for _, r := range ev.Records {
		inBatch[r.MessageId] = true
	}
	failed := map[string]bool{}
	for _, item := range items {
		var id *string
		if v, ok := item["itemIdentifier"]; ok {
			_ = json.Unmarshal(v, &id)
		}
		switch {
		case id == nil:
			return nil, errors.New("a batchItemFailures entry has no itemIdentifier (null or misspelt)")
		case *id == "":
			return nil, errors.New("a batchItemFailures entry has an empty itemIdentifier")
		case !inBatch[*id]:
			return nil, fmt.Errorf("itemIdentifier %q is not a message of this batch", *id)
		}
		failed[*id] = true
	}
	var keep []events.SQSMessage
	for _, r := range ev.Records {
		if !failed[r.MessageId] {
			keep = append(keep, r)
		}
	}
	return keep, nil
}
