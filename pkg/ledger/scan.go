package ledger

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ScanAPI is what ScanDeliveries needs of DynamoDB.
type ScanAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ ScanAPI = (*dynamodb.Client)(nil)

// ScanDeliveries calls fn with every delivery in table, in no order, with
// strongly consistent reads. It reads the whole table: for operators and
// local runs, never for the functions' hot path.
func ScanDeliveries(ctx context.Context, api ScanAPI, table string, fn func(Delivery) error) error {
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(table),
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("begins_with(#sk, :dlv)"),
		ExpressionAttributeNames:  map[string]string{"#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":dlv": &types.AttributeValueMemberS{Value: "DLV#"}},
	}
	for {
		out, err := api.Scan(ctx, in)
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
