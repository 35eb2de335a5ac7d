package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableInput returns the definition of the ledger table: string keys PK and
// SK, on-demand billing, the sparse due index (IndexName) keyed by dueShard
// and dueSort, projecting dueAt and expiresAt, and the sparse account index
// (AccountIndexName) over reminder items, keyed by accountRef and dueAt,
// and its stream (new and old images), which the outcomes function reads.
// The CDK stack and the local stand-ins both use it.
func TableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrDueShard), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrDueSort), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrAccount), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrDueAt), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(IndexName),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrDueShard), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrDueSort), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{
				ProjectionType:   types.ProjectionTypeInclude,
				NonKeyAttributes: IndexProjection(),
			},
		}, {
			IndexName: aws.String(AccountIndexName),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrAccount), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrDueAt), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{
				ProjectionType:   types.ProjectionTypeInclude,
				NonKeyAttributes: AccountIndexProjection(),
			},
		}},
	}
}

// IndexProjection is the due index's projected non-key attributes.
func IndexProjection() []string { return []string{"dueAt", "expiresAt"} }

// TableAPI is what CreateTable needs.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// CreateTable creates the ledger table with its TTL attribute, for local
// stand-ins and tests (in AWS the CDK stack creates it). An existing table
// is left as it is.
func CreateTable(ctx context.Context, api TableAPI, name string) error {
	_, err := api.CreateTable(ctx, TableInput(name))
	var inUse *types.ResourceInUseException
	if errors.As(err, &inUse) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledger: create table %q: %w", name, err)
	}
	_, err = api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrTTL), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("ledger: enable TTL on %q: %w", name, err)
	}
	return nil
}
