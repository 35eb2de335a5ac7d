package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The enqueue's side of the table: the due index, read in order, and one
// cursor per shard, moved only by a conditional write. A cursor's position
// is the sort key of the last entry handed off (IndexEntry.Sort): every
// entry of the shard at or before it has been handed off, every entry
// after it has not.

// Cursor returns shard's cursor position, "" before the first hand-off.
func (l *Ledger) Cursor(ctx context.Context, shard int) (string, error) {
	out, err := l.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(l.cfg.Table), Key: cursorKey(shard),
		ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pos"),
	})
	if err != nil {
		return "", fmt.Errorf("ledger: read the cursor of shard %d: %w", shard, err)
	}
	if v, ok := out.Item["pos"].(*types.AttributeValueMemberS); ok {
		return v.Value, nil
	}
	return "", nil
}

// MoveCursor moves shard's cursor from old ("" for a cursor never moved)
// to pos, unless another writer moved it first; it reports whether it did.
func (l *Ledger) MoveCursor(ctx context.Context, shard int, old, pos string) (bool, error) {
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(l.cfg.Table), Key: cursorKey(shard),
		UpdateExpression: aws.String("SET pos = :pos, movedAt = :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pos": sv(pos), ":now": sv(Format(l.cfg.Clock.Now())),
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
