package streammap

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// item is a record read from a shard and not yet done with.
type item struct {
	seq  string
	json []byte // the record as Lambda's event has it
	err  error  // why it could not be shaped so
}

// reader reads one shard and hands its records to the function, one batch
// at a time, in order. Its fields are its goroutine's own; what Drain and
// Shards see goes through Mapping.update.
type reader struct {
	m     *Mapping
	s     *shard
	arn   string
	start types.ShardIteratorType

	iter      *string
	ended     bool // the shard is closed and every record of it read
	afterTrim bool // the records after readPos were trimmed: start again at the oldest left
	readPos   string
	buf       []item
	bufBytes  int
	failingAt string // the first record of the batch being retried
	retries   int    // consecutive failures at failingAt
}

// readShard reads s from start until it is finished or ctx ends.
func (m *Mapping) readShard(ctx context.Context, s *shard, start types.ShardIteratorType) {
	r := &reader{m: m, s: s, arn: m.StreamARN(), start: start}
	for ctx.Err() == nil {
		err := r.fill(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			m.streamError("read the shard", s.id, err)
			if len(r.buf) == 0 { // else hand over what was read before the failure
				if !m.sleep(ctx, m.cfg.PollInterval, false) {
					return
				}
				continue
			}
		}
		if len(r.buf) == 0 {
			if r.ended {
				m.finish(s)
				return
			}
			if !m.sleep(ctx, m.cfg.PollInterval, true) {
				return
			}
			continue
		}
		if !r.invoke(ctx) {
			return
		}
	}
}

// fill reads until the batch is full, the payload limit is near, or the
// shard has nothing more for now. A read that finds nothing new, with
// nothing pending, marks the shard caught up to the point at its start.
func (r *reader) fill(ctx context.Context) error {
	m := r.m
	fresh := false // the iterator was just made: an iterator error now is not its age
	for !r.ended && len(r.buf) < m.cfg.BatchSize && r.bufBytes < maxPayload {
		if r.iter == nil {
			if err := r.acquire(ctx); err != nil {
				return fmt.Errorf("get a shard iterator: %w", err)
			}
			fresh = true
		}
		stamp := m.point.Load()
		limit := min(pageLimit, m.cfg.BatchSize-len(r.buf))
		out, err := m.cfg.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: r.iter, Limit: aws.Int32(int32(limit))})
		var expired *types.ExpiredIteratorException
		var trimmed *types.TrimmedDataAccessException
		switch {
		case err != nil && fresh:
			return fmt.Errorf("get records: %w", err)
		case errors.As(err, &expired):
			r.iter = nil // a new one, after the last record read
			continue
		case errors.As(err, &trimmed):
			m.cfg.Logger.Warn("streammap: records after the last one read were trimmed from the stream; reading on from the oldest left",
				"shard", r.s.id, "after", r.readPos)
			r.iter, r.afterTrim = nil, true
			continue
		case err != nil:
			return fmt.Errorf("get records: %w", err)
		}
		fresh = false
		for _, rec := range out.Records {
			it := item{}
			if rec.Dynamodb != nil {
				it.seq = aws.ToString(rec.Dynamodb.SequenceNumber)
			}
			it.json, it.err = Record(r.arn, rec)
			r.buf = append(r.buf, it)
			r.bufBytes += len(it.json) + 1
			if it.seq != "" {
				r.readPos = it.seq
			}
		}
		m.stats.read.Add(int64(len(out.Records)))
		r.iter = out.NextShardIterator
		r.ended = r.iter == nil
		caughtUp := len(out.Records) == 0 && len(r.buf) == 0 && r.failingAt == ""
		m.update(r.s, func(s *shard) {
			s.pending = len(r.buf)
			if caughtUp {
				s.caughtUp = max(s.caughtUp, stamp)
			}
		})
		if len(out.Records) < limit {
			break
		}
	}
	return nil
}

// acquire gets a shard iterator: after the last record read, or at the
// starting position before the first.
func (r *reader) acquire(ctx context.Context) error {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(r.arn), ShardId: aws.String(r.s.id), ShardIteratorType: r.start}
	switch {
	case r.afterTrim:
		in.ShardIteratorType = types.ShardIteratorTypeTrimHorizon
	case r.readPos != "":
		in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(r.readPos)
	}
	out, err := r.m.cfg.Streams.GetShardIterator(ctx, in)
	if err != nil {
		return err
	}
	r.iter, r.afterTrim = out.ShardIterator, false
	r.ended = r.iter == nil
	return nil
}

// invoke hands the next batch to the function and moves the checkpoint by
// its answer; after a failure it waits out the retry delay. It reports
// false if ctx ended.
func (r *reader) invoke(ctx context.Context) bool {
	m := r.m
	n, size := 0, eventOverhead
	for n < len(r.buf) && n < m.cfg.BatchSize {
		add := len(r.buf[n].json) + 1
		if n > 0 && size+add > maxPayload {
			break
		}
		size += add
		n++
	}
	seqs, parts := make([]string, n), make([][]byte, n)
	var shapeErr error
	for i, it := range r.buf[:n] {
		seqs[i], parts[i] = it.seq, it.json
		if it.err != nil && shapeErr == nil {
			shapeErr = it.err
		}
	}
	retry := r.failingAt != ""
	acked, err := 0, shapeErr
	if shapeErr == nil {
		resp, invoked, ierr := m.call(ctx, assemble(parts))
		if !invoked && ctx.Err() != nil {
			return false
		}
		if invoked {
			m.stats.invocations.Add(1)
			m.stats.sent.Add(int64(n))
			if retry {
				m.stats.retried.Add(1)
			}
		}
		if ierr != nil {
			err = fmt.Errorf("invocation failed: %w", ierr)
		} else {
			acked, err = Acknowledged(seqs, resp)
		}
	}
	if err == nil && acked == n {
		m.stats.acked.Add(int64(n))
		r.settle(n, seqs[n-1], "", nil)
		return true
	}
	if err != nil {
		acked = 0
		m.stats.batchFailures.Add(1)
	} else {
		m.stats.partial.Add(1)
		m.stats.acked.Add(int64(acked))
		err = fmt.Errorf("the function reported record %s failed (the lowest of its batchItemFailures)", seqs[acked])
	}
	from := seqs[acked]
	if from == r.failingAt {
		r.retries++
	} else {
		r.failingAt, r.retries = from, 1
	}
	if m.maxRetries >= 0 && r.retries > m.maxRetries {
		d := Discarded{StreamARN: r.arn, ShardID: r.s.id, StartSequenceNumber: from, EndSequenceNumber: seqs[n-1], BatchSize: n - acked,
			Condition: ConditionRetryAttemptsExhausted, ApproximateInvokeCount: r.retries, Err: err, Event: assemble(parts[acked:]), At: m.cfg.Clock.Now()}
		m.stats.discarded.Add(int64(n - acked))
		m.cfg.Logger.Warn("streammap: a batch failed its last retry; its records are discarded and the shard moves on", "shard", r.s.id,
			"from", from, "to", seqs[n-1], "records", n-acked, "failures", r.retries, "error", err.Error())
		r.settle(n, seqs[n-1], "", err)
		if m.cfg.OnFailure != nil {
			m.cfg.OnFailure(context.WithoutCancel(ctx), d)
		}
		return true
	}
	checkpoint := ""
	if acked > 0 {
		checkpoint = seqs[acked-1]
	}
	m.cfg.Logger.Warn("streammap: a batch failed; retrying from its first record not done", "shard", r.s.id, "from", from,
		"records", n-acked, "failures", r.retries, "error", err.Error())
	r.settle(acked, checkpoint, from, err)
	return m.sleep(ctx, retryDelay(m.cfg.RetryDelay, r.retries), false)
}

// settle drops the first done records from the buffer, moves the
// checkpoint to checkpoint (if not ""), and notes the failure to retry
// from (failingAt "": none).
func (r *reader) settle(done int, checkpoint, failingAt string, err error) {
	for _, it := range r.buf[:done] {
		r.bufBytes -= len(it.json) + 1
	}
	r.buf = r.buf[done:]
	if len(r.buf) == 0 {
		r.buf = nil
	}
	if failingAt == "" {
		r.failingAt, r.retries = "", 0
	}
	retries := r.retries
	r.m.update(r.s, func(s *shard) {
		if checkpoint != "" {
			s.checkpoint = checkpoint
		}
		s.pending, s.failingAt, s.retries, s.lastErr = len(r.buf), failingAt, retries, ""
		if err != nil {
			s.lastErr = err.Error()
		}
	})
}

// call invokes the function with payload, one invocation at a time, after
// recycling an instance whose last invocation failed without an answer.
// The invocation is not cut short when ctx ends (the emulator could not
// take the next one while it runs it); one not begun by then is not made,
// and invoked is false.
func (m *Mapping) call(ctx context.Context, payload []byte) (resp []byte, invoked bool, err error) {
	m.invokeMu.Lock()
	defer m.invokeMu.Unlock()
	if ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	work := context.WithoutCancel(ctx)
	if m.recycle {
		if rec, ok := m.cfg.Invoker.(Recycler); ok {
			if err := rec.Recycle(work); err != nil {
				return nil, false, fmt.Errorf("recycle the function's instance after a failed invocation: %w", err)
			}
		}
		m.recycle = false
	}
	resp, err = m.cfg.Invoker.Invoke(work, payload)
	m.recycle = err != nil
	return resp, true, err
}
