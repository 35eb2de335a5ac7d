package streammap_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// fakeStream is a DynamoDB stream in memory whose shards a test closes and
// splits at will, which DynamoDB Local does not do: DescribeStream (in
// pages of two, in the order the test added the shards), GetShardIterator
// and GetRecords.
type fakeStream struct {
	mu     sync.Mutex
	arn    string
	shards []*fakeShard
	seq    int
	reads  int
}

type fakeShard struct {
	id, parent string
	records    []types.Record
	closed     bool
}

func newFakeStream() *fakeStream { return &fakeStream{arn: testARN} }

// add adds a shard (parent "" for none).
func (f *fakeStream) add(id, parent string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shards = append(f.shards, &fakeShard{id: id, parent: parent})
}

// put appends a record with key key to a shard and returns its sequence
// number.
func (f *fakeStream) put(shardID, key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	seq := fmt.Sprintf("%021d", f.seq)
	s := f.shard(shardID)
	s.records = append(s.records, types.Record{
		EventID: aws.String("e" + seq), EventName: types.OperationTypeInsert, AwsRegion: aws.String("eu-west-1"),
		Dynamodb: &types.StreamRecord{
			Keys:           map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}},
			NewImage:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}},
			SequenceNumber: aws.String(seq), SizeBytes: aws.Int64(10), StreamViewType: types.StreamViewTypeNewAndOldImages,
		},
	})
	return seq
}

func (f *fakeStream) close(shardID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shard(shardID).closed = true
}

func (f *fakeStream) shard(id string) *fakeShard {
	for _, s := range f.shards {
		if s.id == id {
			return s
		}
	}
	panic("no shard " + id)
}

func (f *fakeStream) ListStreams(_ context.Context, in *dynamodbstreams.ListStreamsInput,
	_ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.ListStreamsOutput, error) {
	if aws.ToString(in.TableName) != "ledger" {
		return &dynamodbstreams.ListStreamsOutput{}, nil
	}
	return &dynamodbstreams.ListStreamsOutput{Streams: []types.Stream{
		{StreamArn: aws.String(testARN + "-old"), StreamLabel: aws.String("2025-01-01T00:00:00.000")},
		{StreamArn: aws.String(testARN), StreamLabel: aws.String("2026-01-01T00:00:00.000")},
	}}, nil
}

func (f *fakeStream) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput,
	_ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if aws.ToString(in.StreamArn) != f.arn {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found: Stream: " + aws.ToString(in.StreamArn) + " not found")}
	}
	start := 0
	if in.ExclusiveStartShardId != nil {
		for i, s := range f.shards {
			if s.id == *in.ExclusiveStartShardId {
				start = i + 1
			}
		}
	}
	d := &types.StreamDescription{StreamArn: aws.String(f.arn), StreamStatus: types.StreamStatusEnabled}
	for _, s := range f.shards[start:min(start+2, len(f.shards))] {
		sh := types.Shard{ShardId: aws.String(s.id), SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String("1")}}
		if s.parent != "" {
			sh.ParentShardId = aws.String(s.parent)
		}
		if s.closed {
			sh.SequenceNumberRange.EndingSequenceNumber = aws.String("999")
		}
		d.Shards = append(d.Shards, sh)
	}
	if start+2 < len(f.shards) {
		d.LastEvaluatedShardId = d.Shards[len(d.Shards)-1].ShardId
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: d}, nil
}

// An iterator is "shard|position".
func (f *fakeStream) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput,
	_ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.shard(aws.ToString(in.ShardId))
	pos := 0
	switch in.ShardIteratorType {
	case types.ShardIteratorTypeTrimHorizon:
	case types.ShardIteratorTypeLatest:
		pos = len(s.records)
	case types.ShardIteratorTypeAfterSequenceNumber:
		pos = -1
		for i, r := range s.records {
			if *r.Dynamodb.SequenceNumber == aws.ToString(in.SequenceNumber) {
				pos = i + 1
			}
		}
		if pos < 0 {
			return nil, fmt.Errorf("fake: no record %s in %s", aws.ToString(in.SequenceNumber), s.id)
		}
	default:
		return nil, fmt.Errorf("fake: iterator type %s", in.ShardIteratorType)
	}
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(s.id + "|" + strconv.Itoa(pos))}, nil
}

func (f *fakeStream) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput,
	_ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	id, p, _ := strings.Cut(aws.ToString(in.ShardIterator), "|")
	pos, _ := strconv.Atoi(p)
	s := f.shard(id)
	end := min(len(s.records), pos+int(aws.ToInt32(in.Limit)))
	out := &dynamodbstreams.GetRecordsOutput{Records: append([]types.Record(nil), s.records[pos:end]...)}
	if !s.closed || end < len(s.records) {
		out.NextShardIterator = aws.String(id + "|" + strconv.Itoa(end))
	}
	return out, nil
}
