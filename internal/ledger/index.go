package ledger

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/message"
)

// The due index is a sparse global secondary index over live deliveries
// (docs/ledger.md). Its partition key spreads deliveries over shards by
// reminder id; its sort key orders them by publish time, the moment the
// calendar may hand a delivery to the queue:
//
//	publishAt = max(dueAt − Lookahead, time of writing)
//
// so a delivery is never written behind a point the enqueue has already
// passed, even one scheduled at short notice. Terminal transitions remove
// both key attributes, so the index holds live work only. The projection
// adds dueAt and expiresAt, which never change, so no transition other than
// entering or leaving the index (or Release) costs an index write.
const (
	// IndexName is the due index's name.
	IndexName = "due"
	// MaxLookahead is the longest lookahead: SQS delays a message at most
	// 15 minutes.
	MaxLookahead = 15 * time.Minute
)

// ShardKey is the due index partition key of shard n.
func ShardKey(n int) string { return "DUE#" + strconv.Itoa(n) }

// ShardOf returns the shard of a reminder among shards: FNV-1a of the id,
// modulo shards. All deliveries of a reminder share its shard.
func ShardOf(reminderID string, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(reminderID))
	return int(h.Sum32() % uint32(shards))
}

// publishTime is when a delivery due at dueAt, written at now, may be handed
// to the queue.
func publishTime(dueAt, now time.Time, lookahead time.Duration) time.Time {
	return later(dueAt.Add(-lookahead), now)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// IndexSort is the due index sort key: the publish time, then the delivery
// key, so that the order is total and a cursor can stand between entries.
func IndexSort(publishAt time.Time, k message.DeliveryKey) string {
	return Format(publishAt) + "#" + k.ReminderID + "#" + k.Channel + "#" + k.Provider
}

// handOffMark ends the sort key of an entry its writer handed to the
// queue itself (Delivery.HandOff): the enqueue's cursor passes it without
// publishing it. Names hold no '#', so the mark cannot be part of one.
const handOffMark = "#i"

// indexSort is the sort key of an entry published at publishAt, marked as
// handed off by its writer if handedOff.
func indexSort(publishAt time.Time, k message.DeliveryKey, handedOff bool) string {
	if handedOff {
		return IndexSort(publishAt, k) + handOffMark
	}
	return IndexSort(publishAt, k)
}

// sortBound is the smallest sort key after every entry published at or
// before t.
func sortBound(t time.Time) string { return Format(t) + "$" } // '$' sorts right after '#'

// IndexEntry is one due index entry as a query returns it.
type IndexEntry struct {
	Key       message.DeliveryKey
	Sort      string
	PublishAt time.Time
	DueAt     time.Time
	ExpiresAt time.Time
	// HandedOff is true for an entry its writer handed to the queue
	// itself, at once (the intake's short-notice hand-off): the cursor
	// passes it without publishing; the repair treats it as any entry the
	// cursor has passed.
	HandedOff bool
}

// parseIndexEntry reads an entry from a due index query.
func parseIndexEntry(av map[string]types.AttributeValue) (IndexEntry, error) {
	str := func(name string) string {
		if s, ok := av[name].(*types.AttributeValueMemberS); ok {
			return s.Value
		}
		return ""
	}
	e := IndexEntry{Sort: str(attrDueSort)}
	var publish string
	var err error
	if publish, e.Key, e.HandedOff, err = splitSort(e.Sort); err != nil {
		return IndexEntry{}, err
	}
	for _, f := range []struct {
		name string
		src  string
		dst  *time.Time
	}{{"publishAt", publish, &e.PublishAt}, {"dueAt", str("dueAt"), &e.DueAt}, {"expiresAt", str("expiresAt"), &e.ExpiresAt}} {
		if f.src == "" {
			return IndexEntry{}, fmt.Errorf("ledger: due index entry %q lacks %s", e.Sort, f.name)
		}
		if *f.dst, err = parseOpt(f.name, f.src); err != nil {
			return IndexEntry{}, err
		}
	}
	return e, nil
}

// splitSort reads a due index sort key: the publish time, as stored, the
// delivery key, and whether its writer handed it off.
func splitSort(sort string) (publishAt string, key message.DeliveryKey, handedOff bool, err error) {
	// Names hold no '#': four parts, or five whose last is the mark (a
	// provider may itself be called "i").
	parts := strings.Split(sort, "#")
	if handedOff = len(parts) == 5 && "#"+parts[4] == handOffMark; handedOff {
		parts = parts[:4]
	}
	if len(parts) != 4 {
		return "", key, false, fmt.Errorf("ledger: due index sort key %q is not publishAt#reminderId#channel#provider[#i]", sort)
	}
	return parts[0], message.DeliveryKey{ReminderID: parts[1], Channel: parts[2], Provider: parts[3]}, handedOff, nil
}

// The shard registry: one item recording the largest shard count any
// writer used, so that the enqueue reads every shard that holds work even
// when its own setting is smaller.
const (
	registryPK = RegistryPartition
	registrySK = "SHARDS"
)

// RegistryPartition is the partition key of the table's registry items:
// the shard count, the stage's facts, the feedback marks. The stack's
// policies name it to allow those items alone.
const RegistryPartition = "NUDGE"

// ErrNoShardCount is the reason a ledger that takes its shard count from
// the registry (Config.ShardsFromRegistry) cannot place a delivery: nothing
// recorded one yet.
var ErrNoShardCount = errors.New("no shard count is recorded in the table yet: the enqueue records the stack's on its first run, a minute after a deploy; try again then")

// shardCount returns the number of shards new deliveries spread over,
// settled once per Ledger before it places its first delivery: its own
// setting, recorded in the registry (raising the count there if it was
// lower), or with ShardsFromRegistry the registry's, read and never
// written.
func (l *Ledger) shardCount(ctx context.Context) (int, error) {
	l.mu.Lock()
	n, done := l.shards, l.recorded
	l.mu.Unlock()
	if done {
		return n, nil
	}
	if l.cfg.ShardsFromRegistry {
		stored, err := l.readShards(ctx)
		if err != nil {
			return 0, err
		}
		if stored == 0 {
			return 0, fmt.Errorf("ledger: %s: %w", l.cfg.Table, ErrNoShardCount)
		}
		n = stored
	} else if err := l.recordShards(ctx, n); err != nil {
		return 0, err
	}
	l.mu.Lock()
	l.shards, l.recorded = n, true
	l.mu.Unlock()
	return n, nil
}

// recordShards raises the registry's count to n, if it was lower.
func (l *Ledger) recordShards(ctx context.Context, n int) error {
	_, err := l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.cfg.Table),
		Key: map[string]types.AttributeValue{
			attrPK: &types.AttributeValueMemberS{Value: registryPK}, attrSK: &types.AttributeValueMemberS{Value: registrySK},
		},
		UpdateExpression:          aws.String("SET shards = :n"),
		ConditionExpression:       aws.String("attribute_not_exists(shards) OR shards < :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: strconv.Itoa(n)}},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("ledger: record the shard count in %q: %w", l.cfg.Table, err)
	}
	return nil
}

// readShards returns the registry's count, 0 if none is recorded.
func (l *Ledger) readShards(ctx context.Context) (int, error) {
	out, err := l.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(l.cfg.Table),
		Key: map[string]types.AttributeValue{
			attrPK: &types.AttributeValueMemberS{Value: registryPK}, attrSK: &types.AttributeValueMemberS{Value: registrySK},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, fmt.Errorf("ledger: read the shard count from %q: %w", l.cfg.Table, err)
	}
	if v, ok := out.Item["shards"].(*types.AttributeValueMemberN); ok {
		if stored, err := strconv.Atoi(v.Value); err == nil {
			return stored, nil
		}
	}
	return 0, nil
}

// StoredShards returns the number of shards to read: the larger of this
// ledger's setting and the largest count any writer recorded. A writer's
// ledger (the enqueue's) records its own count the first time it finds
// the registry's lower, so that a ledger that reads its count from the
// registry (the operator CLI's) finds one a minute after a deploy.
func (l *Ledger) StoredShards(ctx context.Context) (int, error) {
	stored, err := l.readShards(ctx)
	if err != nil {
		return 0, err
	}
	if l.cfg.ShardsFromRegistry {
		return stored, nil // its own setting is not the stack's
	}
	l.mu.Lock()
	own, done := l.shards, l.recorded
	l.mu.Unlock()
	if stored < own && !done {
		if _, err := l.shardCount(ctx); err != nil {
			return 0, err
		}
	}
	return max(own, stored), nil
}

// Live is what the due index says of the live deliveries.
type Live struct {
	// Deliveries is every live delivery: pending, queued, sending or
	// retrying.
	Deliveries int
	// Overdue counts those more than overdueAfter past due; OldestOverdue
	// is how far past due the oldest of them is, and OldestKey which.
	Overdue       int
	OldestOverdue time.Duration
	OldestKey     message.DeliveryKey
}

// ReadLive reads every entry of the due index, over every shard any writer
// used, and counts the live deliveries and those more than overdueAfter
// past due at now. It reads the index only (live work, never the ended
// deliveries): exact, and priced by the live deliveries' number.
func (l *Ledger) ReadLive(ctx context.Context, now time.Time, overdueAfter time.Duration) (Live, error) {
	shards, err := l.StoredShards(ctx)
	if err != nil {
		return Live{}, err
	}
	var live Live
	for shard := range shards {
		in := &dynamodb.QueryInput{
			TableName: aws.String(l.cfg.Table), IndexName: aws.String(IndexName),
			KeyConditionExpression:    aws.String("#shard = :shard"),
			ExpressionAttributeNames:  map[string]string{"#shard": attrDueShard},
			ExpressionAttributeValues: map[string]types.AttributeValue{":shard": &types.AttributeValueMemberS{Value: ShardKey(shard)}},
		}
		for {
			out, err := l.api.Query(ctx, in)
			if err != nil {
				return live, fmt.Errorf("ledger: read the due index of %q, shard %d: %w", l.cfg.Table, shard, err)
			}
			for _, it := range out.Items {
				e, err := parseIndexEntry(it)
				if err != nil {
					return live, err
				}
				live.Deliveries++
				if late := now.Sub(e.DueAt); late > overdueAfter {
					live.Overdue++
					if late > live.OldestOverdue {
						live.OldestOverdue, live.OldestKey = late, e.Key
					}
				}
			}
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	return live, nil
}

// A shard's cursor is one item, PK CURSOR#<n>, SK CURSOR, whose "pos" is
// the due index sort key of the last entry the enqueue handed off:
// everything in the shard at or before pos has been handed off, everything
// after it has not.
const (
	cursorPKPrefix = "CURSOR#"
	cursorSK       = "CURSOR"
)

// cursorKey is the key of shard's cursor item.
func cursorKey(shard int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: cursorPKPrefix + strconv.Itoa(shard)},
		attrSK: &types.AttributeValueMemberS{Value: cursorSK},
	}
}

// HandOff says whether a live delivery has been handed to the queue.
type HandOff struct {
	// Done is true once it has been handed off: by the enqueue's cursor
	// (a pending delivery the cursor has passed: its message waits on the
	// queue, delayed until due), by its writer (a short-notice hand-off),
	// or by a repair or a redrive (queued).
	Done bool
	// PublishAt is when the enqueue may hand it off (for one not yet
	// handed off).
	PublishAt time.Time
}

// HandedOff tells whether live delivery d, as read, has been handed to the
// queue; for one that has ended, nothing.
func (l *Ledger) HandedOff(ctx context.Context, d Delivery) (HandOff, error) {
	if d.Index == nil {
		return HandOff{}, nil
	}
	if d.Status != StatusPending || d.Index.HandedOff {
		return HandOff{Done: true, PublishAt: d.Index.PublishAt}, nil
	}
	out, err := l.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.cfg.Table), Key: cursorKey(d.Index.Shard),
		ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pos")})
	if err != nil {
		return HandOff{}, fmt.Errorf("ledger: read the cursor of shard %d: %w", d.Index.Shard, err)
	}
	pos, _ := out.Item["pos"].(*types.AttributeValueMemberS)
	return HandOff{Done: pos != nil && d.Index.Sort <= pos.Value, PublishAt: d.Index.PublishAt}, nil
}
