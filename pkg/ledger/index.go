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

	"github.com/nudgehq/nudge/pkg/message"
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

// PublishAt is when a delivery due at dueAt, written at now, may be handed
// to the queue.
func PublishAt(dueAt, now time.Time, lookahead time.Duration) time.Time {
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

// SortBound is the smallest sort key after every entry published at or
// before t.
func SortBound(t time.Time) string { return Format(t) + "$" } // '$' sorts right after '#'

// IndexEntry is one due index entry as a query returns it.
type IndexEntry struct {
	Key       message.DeliveryKey
	Sort      string
	PublishAt time.Time
	DueAt     time.Time
	ExpiresAt time.Time
}

// ParseIndexEntry reads an entry from a due index query.
func ParseIndexEntry(av map[string]types.AttributeValue) (IndexEntry, error) {
	str := func(name string) string {
		if s, ok := av[name].(*types.AttributeValueMemberS); ok {
			return s.Value
		}
		return ""
	}
	e := IndexEntry{Sort: str(attrDueSort)}
	parts := strings.SplitN(e.Sort, "#", 4)
	if len(parts) != 4 {
		return IndexEntry{}, fmt.Errorf("ledger: due index sort key %q is not publishAt#reminderId#channel#provider", e.Sort)
	}
	e.Key = message.DeliveryKey{ReminderID: parts[1], Channel: parts[2], Provider: parts[3]}
	var err error
	for _, f := range []struct {
		name string
		src  string
		dst  *time.Time
	}{{"publishAt", parts[0], &e.PublishAt}, {"dueAt", str("dueAt"), &e.DueAt}, {"expiresAt", str("expiresAt"), &e.ExpiresAt}} {
		if f.src == "" {
			return IndexEntry{}, fmt.Errorf("ledger: due index entry %q lacks %s", e.Sort, f.name)
		}
		if *f.dst, err = parseOpt(f.name, f.src); err != nil {
			return IndexEntry{}, err
		}
	}
	return e, nil
}

// The shard registry: one item recording the largest shard count any
// writer used, so that the enqueue reads every shard that holds work even
// when its own setting is smaller.
const (
	registryPK = "NUDGE"
	registrySK = "SHARDS"
)

// recordShards writes the shard count to the registry once per Ledger,
// before the first delivery is placed by it.
func (l *Ledger) recordShards(ctx context.Context) error {
	l.mu.Lock()
	done := l.recorded
	l.mu.Unlock()
	if done {
		return nil
	}
	_, err := l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.cfg.Table),
		Key: map[string]types.AttributeValue{
			attrPK: &types.AttributeValueMemberS{Value: registryPK}, attrSK: &types.AttributeValueMemberS{Value: registrySK},
		},
		UpdateExpression:          aws.String("SET shards = :n"),
		ConditionExpression:       aws.String("attribute_not_exists(shards) OR shards < :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: strconv.Itoa(l.cfg.Shards)}},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("ledger: record the shard count in %q: %w", l.cfg.Table, err)
	}
	l.mu.Lock()
	l.recorded = true
	l.mu.Unlock()
	return nil
}

// StoredShards returns the number of shards to read: the larger of this
// ledger's setting and the largest count any writer recorded.
func (l *Ledger) StoredShards(ctx context.Context) (int, error) {
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
	n := l.cfg.Shards
	if v, ok := out.Item["shards"].(*types.AttributeValueMemberN); ok {
		if stored, err := strconv.Atoi(v.Value); err == nil && stored > n {
			n = stored
		}
	}
	return n, nil
}
