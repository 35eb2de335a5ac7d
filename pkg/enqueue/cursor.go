package enqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/pkg/ledger"
)

// A shard's cursor is one item in the ledger table (ledger.CursorKey),
// whose "pos" is the due index sort key of the last entry handed off.
// Everything in the shard at or before pos has been handed off; everything
// after it has not. Only a conditional write moves it.

func cursorKey(shard int) map[string]types.AttributeValue { return ledger.CursorKey(shard) }

// readCursor returns shard's cursor position, "" before the first hand-off.
func (e *Enqueuer) readCursor(ctx context.Context, shard int) (string, error) {
	out, err := e.cfg.API.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(e.cfg.Ledger.Table()), Key: cursorKey(shard),
		ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pos"),
	})
	if err != nil {
		return "", fmt.Errorf("enqueue: read the cursor of shard %d: %w", shard, err)
	}
	if v, ok := out.Item["pos"].(*types.AttributeValueMemberS); ok {
		return v.Value, nil
	}
	return "", nil
}

// CursorWriteUnits returns the write units the cursor moves consumed so far.
func (e *Enqueuer) CursorWriteUnits() float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cursorUnits
}

// Cursor returns shard's cursor position; for tests and the operator CLI.
func (e *Enqueuer) Cursor(ctx context.Context, shard int) (string, error) {
	return e.readCursor(ctx, shard)
}

// advanceCursor moves shard's cursor from old to pos if no other run moved
// it first; it reports whether it did.
func (e *Enqueuer) advanceCursor(ctx context.Context, shard int, old, pos string, now time.Time) (bool, error) {
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(e.cfg.Ledger.Table()), Key: cursorKey(shard),
		UpdateExpression: aws.String("SET pos = :pos, movedAt = :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pos": &types.AttributeValueMemberS{Value: pos}, ":now": &types.AttributeValueMemberS{Value: ledger.Format(now)},
		},
		ConditionExpression:    aws.String("attribute_not_exists(pos)"),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	if old != "" {
		in.ConditionExpression = aws.String("pos = :old")
		in.ExpressionAttributeValues[":old"] = &types.AttributeValueMemberS{Value: old}
	}
	out, err := e.cfg.API.UpdateItem(ctx, in)
	if err == nil && out.ConsumedCapacity != nil && out.ConsumedCapacity.CapacityUnits != nil {
		e.mu.Lock()
		e.cursorUnits += *out.ConsumedCapacity.CapacityUnits
		e.mu.Unlock()
	}
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("enqueue: move the cursor of shard %d: %w", shard, err)
	}
	return true, nil
}

// queryAfter reads up to limit due index entries of shard after pos and at
// or before bound, in order.
func (e *Enqueuer) queryAfter(ctx context.Context, shard int, pos, bound string, limit int) ([]ledger.IndexEntry, error) {
	partition, sortKey := ledger.IndexKeyAttributes()
	values := map[string]types.AttributeValue{
		":shard": &types.AttributeValueMemberS{Value: ledger.ShardKey(shard)},
		":hi":    &types.AttributeValueMemberS{Value: bound},
	}
	cond := partition + " = :shard AND " + sortKey + " <= :hi"
	if pos != "" {
		// The smallest string after pos: BETWEEN is inclusive.
		cond = partition + " = :shard AND " + sortKey + " BETWEEN :lo AND :hi"
		values[":lo"] = &types.AttributeValueMemberS{Value: pos + "\x00"}
		if pos >= bound {
			return nil, nil
		}
	}
	return e.query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(e.cfg.Ledger.Table()), IndexName: aws.String(ledger.IndexName),
		KeyConditionExpression: aws.String(cond), ExpressionAttributeValues: values,
		Limit: aws.Int32(int32(limit)),
	}, limit)
}

// query runs a due index query and parses up to limit entries.
func (e *Enqueuer) query(ctx context.Context, in *dynamodb.QueryInput, limit int) ([]ledger.IndexEntry, error) {
	var entries []ledger.IndexEntry
	for {
		out, err := e.cfg.API.Query(ctx, in)
		if err != nil {
			return entries, fmt.Errorf("enqueue: read the due index: %w", err)
		}
		for _, it := range out.Items {
			en, err := ledger.ParseIndexEntry(it)
			if err != nil {
				return entries, err
			}
			entries = append(entries, en)
		}
		if len(out.LastEvaluatedKey) == 0 || len(entries) >= limit {
			return entries, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
