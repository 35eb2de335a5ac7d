package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/clock"
)

// indexEntries reads every due index entry of shard n.
func indexEntries(t *testing.T, l *ledger.Ledger, n int) []ledger.IndexEntry {
	t.Helper()
	var es []ledger.IndexEntry
	if _, err := l.DueBy(context.Background(), n, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), func(page []ledger.IndexEntry) bool {
		es = append(es, page...)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return es
}

func TestDueIndexHoldsLiveDeliveriesOnly(t *testing.T) {
	t.Parallel()
	db := standintest.DynamoDB(t)
	clk := clock.NewFake(t0)
	table := standintest.Table(t, db)
	l, err := ledger.New(db, ledger.Config{Table: table, Clock: clk, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	far := ledger.Delivery{ReminderID: "rem-far", Channel: "email", Provider: "webhook", DueAt: t0.Add(2 * time.Hour), ExpiresAt: t0.Add(3 * time.Hour)}
	soon := ledger.Delivery{ReminderID: "rem-soon", Channel: "sms", Provider: "webhook", DueAt: t0.Add(5 * time.Minute), ExpiresAt: t0.Add(time.Hour)}
	for _, d := range []ledger.Delivery{far, soon} {
		if err := l.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	es := indexEntries(t, l, 0)
	if len(es) != 2 {
		t.Fatalf("index = %+v, want 2 entries", es)
	}
	// Ordered by publish time: "soon" was written inside its lookahead, so
	// it publishes now; "far" publishes 15 minutes before it is due.
	if es[0].Key != soon.Key() || !es[0].PublishAt.Equal(t0) || !es[0].DueAt.Equal(soon.DueAt) || !es[0].ExpiresAt.Equal(soon.ExpiresAt) {
		t.Fatalf("first entry = %+v", es[0])
	}
	if es[1].Key != far.Key() || !es[1].PublishAt.Equal(far.DueAt.Add(-15*time.Minute)) {
		t.Fatalf("second entry = %+v", es[1])
	}

	// A claim and a requeue leave the index alone: one write unit each.
	before := l.WriteUnits()
	c, err := l.Claim(ctx, ledger.Claim{Key: soon.Key(), Token: "tok", LeaseUntil: t0.Add(time.Minute), DueBy: soon.DueAt})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.WriteUnits() - before; got != 1 {
		t.Fatalf("claim cost %v write units, want 1", got)
	}
	read, _ := l.Get(ctx, far.Key())
	before = l.WriteUnits()
	if _, err := l.Requeue(ctx, read, "repair"); err != nil {
		t.Fatal(err)
	}
	if got := l.WriteUnits() - before; got != 1 {
		t.Fatalf("requeue cost %v write units, want 1", got)
	}

	// Release moves the entry to its new publish time: now, which is
	// after dueAt − 15m.
	clk.Advance(110 * time.Minute)
	if _, err := l.Release(ctx, far.Key(), far.DueAt, "early"); err != nil {
		t.Fatal(err)
	}
	es = indexEntries(t, l, 0)
	if len(es) != 2 || es[1].Key != far.Key() || !es[1].PublishAt.Equal(clk.Now()) {
		t.Fatalf("after release: %+v", es)
	}

	// Terminal transitions remove the entries.
	if _, err := l.Complete(ctx, c, "r"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Cancel(ctx, far.Key(), "test"); err != nil {
		t.Fatal(err)
	}
	if es := indexEntries(t, l, 0); len(es) != 0 {
		t.Fatalf("index after complete and cancel = %+v, want empty", es)
	}
}

func TestShardsSpreadAndTheLargestCountIsRecorded(t *testing.T) {
	t.Parallel()
	counts := make([]int, 8)
	for i := range 8000 {
		counts[ledger.ShardOf("rem-"+time.Duration(i).String(), 8)]++
	}
	for n, c := range counts {
		if c < 800 || c > 1200 {
			t.Errorf("shard %d holds %d of 8000 ids, want 1000 ± 20%%", n, c)
		}
	}

	db := standintest.DynamoDB(t)
	table := standintest.Table(t, db)
	ctx := context.Background()
	for i, shards := range []int{4, 16, 8} {
		l, err := ledger.New(db, ledger.Config{Table: table, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		d := ledger.Delivery{ReminderID: "rem-" + string(rune('a'+i)), Channel: "email", Provider: "webhook", DueAt: t0, ExpiresAt: t0.Add(time.Hour)}
		if err := l.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := ledger.New(db, ledger.Config{Table: table, Shards: 2})
	if n, err := l.StoredShards(ctx); err != nil || n != 16 {
		t.Fatalf("StoredShards = %d, %v; want 16, the largest any writer used", n, err)
	}
}

// TestARegistryReaderPlacesDeliveriesOverTheStacksShards: the operator
// CLI's ledger takes the shard count the enqueue recorded and never writes
// the registry (the operator policy does not let it): before any count is
// recorded it refuses to place a delivery, saying why; after, it spreads
// deliveries over the recorded count, not its own.
func TestARegistryReaderPlacesDeliveriesOverTheStacksShards(t *testing.T) {
	t.Parallel()
	db := standintest.DynamoDB(t)
	table := standintest.Table(t, db)
	ctx := context.Background()
	cli, err := ledger.New(db, ledger.Config{Table: table, Shards: 1, ShardsFromRegistry: true})
	if err != nil {
		t.Fatal(err)
	}
	d := ledger.Delivery{ReminderID: "rem-cli", Channel: "email", Provider: "webhook", DueAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := cli.Create(ctx, d); !errors.Is(err, ledger.ErrNoShardCount) {
		t.Fatalf("create before the enqueue recorded a count: %v; want ErrNoShardCount", err)
	}
	enqueue, _ := ledger.New(db, ledger.Config{Table: table, Shards: 5})
	if n, err := enqueue.StoredShards(ctx); err != nil || n != 5 {
		t.Fatalf("the enqueue's first run: %d, %v", n, err)
	}
	if err := cli.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if n, err := cli.StoredShards(ctx); err != nil || n != 5 {
		t.Fatalf("the registry after the CLI's create: %d, %v; want 5, the CLI writing nothing", n, err)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: ledger.PartitionKey("rem-cli")}, "SK": &types.AttributeValueMemberS{Value: ledger.SortKey("email", "webhook")}}})
	if err != nil {
		t.Fatal(err)
	}
	if shard := out.Item["dueShard"].(*types.AttributeValueMemberS).Value; shard != ledger.ShardKey(ledger.ShardOf("rem-cli", 5)) {
		t.Fatalf("the CLI placed rem-cli in %s; want the shard of 5", shard)
	}
}

func TestLedgerConfigIsValidated(t *testing.T) {
	t.Parallel()
	for _, cfg := range []ledger.Config{
		{Table: "t", Shards: -1},
		{Table: "t", Shards: 1001},
		{Table: "t", Lookahead: 16 * time.Minute},
		{Table: "t", Lookahead: -time.Second},
		{Table: ""},
	} {
		if _, err := ledger.New(&dynamodb.Client{}, cfg); err == nil {
			t.Errorf("ledger.New(%+v) accepted it", cfg)
		}
	}
}
