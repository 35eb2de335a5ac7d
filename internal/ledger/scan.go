package ledger

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ScanDeliveries calls fn with every delivery in the table, in no order,
// with strongly consistent reads. It reads the whole table: for operators
// and local runs, never for the functions' hot path.
func (l *Ledger) ScanDeliveries(ctx context.Context, fn func(Delivery) error) error {
	table := l.cfg.Table
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(table),
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("begins_with(#sk, :dlv)"),
		ExpressionAttributeNames:  map[string]string{"#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":dlv": &types.AttributeValueMemberS{Value: "DLV#"}},
	}
	for {
		out, err := l.api.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("ledger: scan %s: %w", table, err)
		}
		for _, it := range out.Items {
			if sk, ok := it[attrSK].(*types.AttributeValueMemberS); !ok || !strings.HasPrefix(sk.Value, "DLV#") {
				continue
			}
			d, err := fromItem(it)
			if err != nil {
				return err
			}
			if err := fn(d); err != nil {
				return err
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
