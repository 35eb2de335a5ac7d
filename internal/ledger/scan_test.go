package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/clock"
)

// TestScanDeliveriesReadsEveryDeliveryAndNothingElse: deliveries across
// pages are all read; the table's other items (a reminder item, the shard
// registry) are not.
func TestScanDeliveriesReadsEveryDeliveryAndNothingElse(t *testing.T) {
	t.Parallel()
	db := standintest.DynamoDB(t)
	table := standintest.Table(t, db)
	l, err := ledger.New(db, ledger.Config{Table: table, Clock: clock.NewFake(t0)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Big enough items that the scan needs more than one 1 MB page.
	pad := fmt.Sprintf("%0900d", 0)
	const n = 1300
	for i := range n {
		d := ledger.Delivery{ReminderID: fmt.Sprintf("rem-%d", i), Channel: "email", Provider: "webhook", RecipientRef: pad, TemplateRef: "t",
			DueAt: t0, ExpiresAt: t0.Add(time.Hour)}
		if err := l.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "REM#rem-1"}, "SK": &types.AttributeValueMemberS{Value: "REMINDER"}}}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err = l.ScanDeliveries(ctx, func(d ledger.Delivery) error {
		if seen[d.Key().String()] {
			t.Errorf("%s read twice", d.Key())
		}
		seen[d.Key().String()] = true
		return nil
	})
	if err != nil || len(seen) != n {
		t.Fatalf("read %d deliveries (%v), want %d", len(seen), err, n)
	}
}
