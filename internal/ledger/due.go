package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The enqueue's side of the table: the due index, read in order, and one
// cursor per shard, moved only by a conditional write. A cursor's position
// is the sort key of the last entry handed off (IndexEntry.Sort): every
// entry of the shard at or before it has been handed off, every entry
// after it has not.

// Cursor is a shard's cursor as stored: where it is, since when, and where
// it was before.
type Cursor struct {
	// Pos is the sort key of the last entry handed off; "" before the
	// first hand-off.
	Pos string
	// MovedAt is when it moved to Pos; zero before the first move (or for
	// a cursor written before movedAt was kept).
	MovedAt time.Time
	// Trail is earlier positions, oldest first, as the enqueue chose to
	// keep them (MoveCursor): it tells how long ago an entry was handed
	// off, which the cursor itself does not.
	Trail []Mark
}

// Mark is an earlier position of a cursor: every entry at or before Pos
// had been handed off by At. A stored mark keeps at most the first
// MaxMarkPos bytes of its position: a prefix sorts before the position, so
// it is a bound a little lower (it leaves out only the entries that share
// the prefix), and the cursor item stays under 1 KB, one write unit a move,
// with the longest keys.
type Mark struct {
	Pos string
	At  time.Time
}

// markItem is the stored form of a Mark.
type markItem struct {
	Pos string `dynamodbav:"p"`
	At  string `dynamodbav:"a"`
}

// MaxTrail is the most marks a cursor keeps, and MaxMarkPos the most of
// its position a mark keeps: the whole of it for reminder ids up to about
// 80 bytes (a UUID is 36); with the longest ids and names the item is
// under 950 bytes.
const (
	MaxTrail   = 4
	MaxMarkPos = 128
)

// markPos is what a mark keeps of a cursor position.
func markPos(pos string) string { return pos[:min(len(pos), MaxMarkPos)] }

// cursorItem is the stored form of a cursor.
type cursorItem struct {
	Pos     string     `dynamodbav:"pos"`
	MovedAt string     `dynamodbav:"movedAt"`
	Trail   []markItem `dynamodbav:"trail"`
}

// Cursor returns shard's cursor; a shard never handed off has the zero
// Cursor.
func (l *Ledger) Cursor(ctx context.Context, shard int) (Cursor, error) {
	out, err := l.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(l.cfg.Table), Key: cursorKey(shard),
		ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pos, movedAt, trail"),
	})
	if err != nil {
		return Cursor{}, fmt.Errorf("ledger: read the cursor of shard %d: %w", shard, err)
	}
	var it cursorItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return Cursor{}, fmt.Errorf("ledger: the cursor of shard %d is not a cursor: %w", shard, err)
	}
	c := Cursor{Pos: it.Pos}
	if c.MovedAt, err = parseOpt("movedAt", it.MovedAt); err != nil {
		return Cursor{}, err
	}
	for _, m := range it.Trail {
		at, err := parseOpt("trail", m.At)
		if err != nil {
			return Cursor{}, err
		}
		c.Trail = append(c.Trail, Mark{Pos: m.Pos, At: at})
	}
	return c, nil
}

// MoveCursor moves shard's cursor from old ("" for a cursor never moved)
// to pos, with trail as its earlier positions (at most MaxTrail, the
// newest kept), unless another writer moved it first; it reports whether
// it did.
func (l *Ledger) MoveCursor(ctx context.Context, shard int, old, pos string, trail []Mark) (bool, error) {
	stored := make([]markItem, 0, MaxTrail)
	for _, m := range trail[max(0, len(trail)-MaxTrail):] {
		stored = append(stored, markItem{Pos: markPos(m.Pos), At: Format(m.At)})
	}
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(l.cfg.Table), Key: cursorKey(shard),
		UpdateExpression: aws.String("SET pos = :pos, movedAt = :now, trail = :trail"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pos": sv(pos), ":now": sv(Format(l.cfg.Clock.Now())), ":trail": av(stored),
		},
		ConditionExpression:    aws.String("attribute_not_exists(pos)"),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	if old != "" {
		in.ConditionExpression = aws.String("pos = :old")
		in.ExpressionAttributeValues[":old"] = sv(old)
	}
	out, err := l.api.UpdateItem(ctx, in)
	if err == nil {
		l.countTo(&l.units.Cursors, out.ConsumedCapacity)
	}
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("ledger: move the cursor of shard %d: %w", shard, err)
	}
	return true, nil
}

// DueAfter returns up to limit entries of shard's due index after pos (""
// for the start) and published at or before upTo, in order.
func (l *Ledger) DueAfter(ctx context.Context, shard int, pos string, upTo time.Time, limit int) ([]IndexEntry, error) {
	bound := sortBound(upTo)
	values := map[string]types.AttributeValue{":shard": sv(ShardKey(shard)), ":hi": sv(bound)}
	cond := attrDueShard + " = :shard AND " + attrDueSort + " <= :hi"
	if pos != "" {
		if pos >= bound {
			return nil, nil
		}
		// The smallest string after pos: BETWEEN is inclusive.
		cond = attrDueShard + " = :shard AND " + attrDueSort + " BETWEEN :lo AND :hi"
		values[":lo"] = sv(pos + "\x00")
	}
	var entries []IndexEntry
	_, err := l.queryIndex(ctx, &dynamodb.QueryInput{
		TableName: aws.String(l.cfg.Table), IndexName: aws.String(IndexName),
		KeyConditionExpression: aws.String(cond), ExpressionAttributeValues: values, Limit: aws.Int32(int32(limit)),
	}, func(page []IndexEntry) bool {
		entries = append(entries, page...)
		return len(entries) < limit
	})
	if len(entries) > limit {
		entries = entries[:limit]
	}
	return entries, err
}

// DueBy calls page with shard's due index entries published at or before
// by, in order, a page at a time, until page returns false. It reports
// whether it read them all.
func (l *Ledger) DueBy(ctx context.Context, shard int, by time.Time, page func([]IndexEntry) bool) (complete bool, err error) {
	return l.queryIndex(ctx, &dynamodb.QueryInput{
		TableName: aws.String(l.cfg.Table), IndexName: aws.String(IndexName),
		KeyConditionExpression:    aws.String(attrDueShard + " = :shard AND " + attrDueSort + " <= :hi"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":shard": sv(ShardKey(shard)), ":hi": sv(sortBound(by))},
	}, page)
}

// queryIndex runs a due index query, page by page, until page returns
// false or the entries end; it reports whether they ended.
func (l *Ledger) queryIndex(ctx context.Context, in *dynamodb.QueryInput, page func([]IndexEntry) bool) (bool, error) {
	for {
		out, err := l.api.Query(ctx, in)
		if err != nil {
			return false, fmt.Errorf("ledger: read the due index of %q: %w", l.cfg.Table, err)
		}
		entries := make([]IndexEntry, 0, len(out.Items))
		for _, it := range out.Items {
			en, err := parseIndexEntry(it)
			if err != nil {
				return false, err
			}
			entries = append(entries, en)
		}
		goOn := page(entries)
		if len(out.LastEvaluatedKey) == 0 {
			return true, nil
		}
		if !goOn {
			return false, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
