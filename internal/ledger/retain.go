package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Retained is what Retain found and did.
type Retained struct {
	// Items is the reminder and delivery items read.
	Items int `json:"items"`
	// Extended is the items whose TTL was missing or earlier than their
	// reminder's Expiry, and was set (or, in a dry run, would be).
	Extended int `json:"extended"`
}

// Retain gives every reminder and delivery item the TTL the retention rule
// gives it, Expiry(expiresAt), where it has none or an earlier one: items
// written before TTLs were set at creation (an ended delivery kept 90 days
// after its end, a reminder item kept forever). Each write is conditional
// (the TTL is still missing or earlier), so it never shortens a TTL and is
// safe to run twice, or while the functions run. It reads the whole table;
// with dryRun it only counts.
func (l *Ledger) Retain(ctx context.Context, dryRun bool) (Retained, error) {
	var r Retained
	in := &dynamodb.ScanInput{
		TableName: aws.String(l.cfg.Table),
		// Not a series item: its expiresAt is its first occurrence's, and it
		// lives until it is cancelled (CancelSeries sets its TTL then).
		FilterExpression:          aws.String("begins_with(#pk, :rem) AND #sk <> :series"),
		ProjectionExpression:      aws.String("#pk, #sk, expiresAt, #ttl"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK, "#ttl": attrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{":rem": sv("REM#"), ":series": sv(seriesSK)},
	}
	for {
		out, err := l.api.Scan(ctx, in)
		if err != nil {
			return r, fmt.Errorf("ledger: retain: scan %s: %w", l.cfg.Table, err)
		}
		for _, it := range out.Items {
			r.Items++
			exp, ok := it["expiresAt"].(*types.AttributeValueMemberS)
			if !ok {
				continue // not an item of a reminder's
			}
			expiresAt, err := time.Parse(time.RFC3339Nano, exp.Value)
			if err != nil {
				return r, fmt.Errorf("ledger: retain: item %s has expiresAt %q: %w", itemName(it), exp.Value, err)
			}
			want := l.Expiry(expiresAt).Unix()
			if n, ok := it[attrTTL].(*types.AttributeValueMemberN); ok {
				if have, err := strconv.ParseInt(n.Value, 10, 64); err == nil && have >= want {
					continue
				}
			}
			if dryRun {
				r.Extended++
				continue
			}
			_, err = l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(l.cfg.Table),
				Key:                       map[string]types.AttributeValue{attrPK: it[attrPK], attrSK: it[attrSK]},
				UpdateExpression:          aws.String("SET #ttl = :ttl"),
				ConditionExpression:       aws.String("attribute_exists(#pk) AND (attribute_not_exists(#ttl) OR #ttl < :ttl)"),
				ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#ttl": attrTTL},
				ExpressionAttributeValues: map[string]types.AttributeValue{":ttl": &types.AttributeValueMemberN{Value: strconv.FormatInt(want, 10)}},
			})
			var ccf *types.ConditionalCheckFailedException
			switch {
			case err == nil:
				r.Extended++
			case errors.As(err, &ccf): // set (or purged) meanwhile
			default:
				return r, fmt.Errorf("ledger: retain: set the TTL of %s: %w; run it again to finish", itemName(it), err)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return r, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// itemName is an item's keys, for messages.
func itemName(it map[string]types.AttributeValue) string {
	str := func(name string) string {
		if v, ok := it[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return "?"
	}
	return str(attrPK) + " " + str(attrSK)
}
