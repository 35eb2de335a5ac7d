package ledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
)

// TestWarmCallsTouchNothing: the functions' warm-up requests, against
// DynamoDB Local: the read finds nothing, the write is refused by its
// condition, and the table stays empty.
func TestWarmCallsTouchNothing(t *testing.T) {
	t.Parallel()
	db := standintest.DynamoDB(t)
	table := standintest.Table(t, db)
	l, err := ledger.New(db, ledger.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.WarmRead(ctx); err != nil {
		t.Fatalf("WarmRead: %v", err)
	}
	var refused *types.ConditionalCheckFailedException
	if err := l.WarmWrite(ctx); !errors.As(err, &refused) {
		t.Fatalf("WarmWrite: %v; want its condition refused", err)
	}
	out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Count != 0 {
		t.Fatalf("the table holds %d items after the warm-up; want none", out.Count)
	}
}
