package ledger

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// warmKey is an item that never exists: its partition is no reminder's,
// cursor's or the registry's.
var warmKey = map[string]types.AttributeValue{attrPK: &types.AttributeValueMemberS{Value: "WARM"}, attrSK: &types.AttributeValueMemberS{Value: "WARM"}}

// WarmRead reads an item that never exists: one eventually consistent
// GetItem (half a read unit), which the enqueue's and the intake's roles
// allow. A function makes it at init to open its connection to DynamoDB
// before the first event; its answer says nothing.
func (l *Ledger) WarmRead(ctx context.Context) error {
	_, err := l.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.cfg.Table), Key: warmKey, ProjectionExpression: aws.String(attrPK)})
	return err
}

// WarmWrite asks for an update of an item that never exists, under a
// condition that never holds: DynamoDB refuses it and writes nothing (the
// refused condition is billed one write unit). It is the consumer's
// warm-up, since its role allows UpdateItem alone on the table.
func (l *Ledger) WarmWrite(ctx context.Context) error {
	_, err := l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(l.cfg.Table), Key: warmKey,
		UpdateExpression: aws.String("SET #w = :w"), ConditionExpression: aws.String("attribute_exists(#pk) AND attribute_not_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#w": "warm", "#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":w": &types.AttributeValueMemberBOOL{Value: true}}})
	return err
}
