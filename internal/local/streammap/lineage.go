package streammap

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// discover describes the stream (every page), adds the shards it has not
// seen, and starts every shard whose parent is done.
func (m *Mapping) discover(ctx context.Context, arn string) error {
	p := m.point.Load()
	var shards []types.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)}
	for {
		out, err := m.cfg.Streams.DescribeStream(ctx, in)
		if err != nil {
			return err
		}
		if out.StreamDescription == nil {
			break
		}
		shards = append(shards, out.StreamDescription.Shards...)
		if out.StreamDescription.LastEvaluatedShardId == nil {
			break
		}
		in.ExclusiveStartShardId = out.StreamDescription.LastEvaluatedShardId
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	initial := !m.describedOnce
	m.describedOnce = true
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		closed := sh.SequenceNumberRange != nil && sh.SequenceNumberRange.EndingSequenceNumber != nil
		if s, ok := m.shards[id]; ok {
			s.closed = s.closed || closed
			continue
		}
		m.shards[id] = &shard{id: id, parent: aws.ToString(sh.ParentShardId), initial: initial, closed: closed}
		m.order = append(m.order, id)
		m.stats.shards.Add(1)
	}
	m.scheduleLocked()
	m.described = max(m.described, p)
	m.notifyLocked()
	return nil
}

// scheduleLocked starts every shard not started whose parent is finished,
// or unknown (trimmed from the stream, or never seen): parents before
// children, so that a key's records reach the function in order across a
// shard split. A shard of the first description starts at the
// StartingPosition (with LATEST, one closed already is skipped: it will
// have no records written after now); a shard that appeared later starts at
// its first record.
func (m *Mapping) scheduleLocked() {
	for again := true; again; {
		again = false
		for _, id := range m.order {
			s := m.shards[id]
			if s.started {
				continue
			}
			if parent, known := m.shards[s.parent]; s.parent != "" && known && !parent.finished {
				continue
			}
			s.started = true
			start := types.ShardIteratorTypeTrimHorizon
			if s.initial {
				start = m.cfg.StartingPosition
			}
			if start == types.ShardIteratorTypeLatest && s.closed {
				s.finished = true
				m.stats.finished.Add(1)
				again = true // its children may start now
				continue
			}
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				m.readShard(m.runCtx, s, start)
			}()
		}
	}
}

// finish marks a shard read to its end and starts its children.
func (m *Mapping) finish(s *shard) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.finished, s.pending = true, 0
	m.stats.finished.Add(1)
	m.scheduleLocked()
	m.notifyLocked()
}
