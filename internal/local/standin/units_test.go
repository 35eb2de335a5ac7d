package standin_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
)

// TestProxyCountsCapacityUnits: DynamoDB requests through the proxy are
// counted in capacity units as DynamoDB would charge them: a delivery's
// creation 2 write units (item and due index entry), a refused conditional
// write 1 (which DynamoDB Local does not report), a strongly consistent
// read of a small item 1 read unit.
func TestProxyCountsCapacityUnits(t *testing.T) {
	t.Parallel()
	cfg := standintest.AWSConfig(t)
	table := standintest.Table(t, standintest.DynamoDB(t))
	p, err := standin.NewProxy(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(p.Endpoint) })
	led, err := ledger.New(db, ledger.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d := ledger.Delivery{ReminderID: "rem-units", Channel: "email", Provider: "webhook", RecipientRef: "r", TemplateRef: "t",
		DueAt: time.Now().Add(time.Hour), ExpiresAt: time.Now().Add(2 * time.Hour), Status: ledger.StatusPending}
	if err := led.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := led.Create(ctx, d); err == nil || !errors.Is(err, ledger.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	if _, err := led.Get(ctx, message.DeliveryKey{ReminderID: "rem-units", Channel: "email", Provider: "webhook"}); err != nil {
		t.Fatal(err)
	}
	// The ledger records its shard count once (an UpdateItem, 1 unit).
	if read, write := p.Units(); write != 4 || read != 1 {
		t.Fatalf("units read %v, write %v; want 1 and 4 (shard record 1, create 2, refused create 1); requests %v", read, write, p.Counts())
	}
	if c := p.Counts(); c["PutItem"] != 2 || c["GetItem"] != 1 || c["UpdateItem"] != 1 {
		t.Fatalf("counts %v", c)
	}
}
