package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/ledger/ledgertest"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/clock"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// TestMemoryConformance runs the ledger conformance suite against the
// in-memory ledger.
func TestMemoryConformance(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T, clk *clock.Fake, o ledgertest.Options) ledgertest.Store {
		m, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk, HistoryLimit: o.HistoryLimit, Shards: o.Shards, ClockSkew: o.ClockSkew})
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// TestConformance runs the ledger conformance suite against DynamoDB Local.
func TestConformance(t *testing.T) {
	db := standintest.DynamoDB(t)
	ledgertest.Run(t, func(t *testing.T, clk *clock.Fake, o ledgertest.Options) ledgertest.Store {
		l, err := ledger.New(db, ledger.Config{Table: standintest.Table(t, db), Clock: clk, HistoryLimit: o.HistoryLimit, Shards: o.Shards, ClockSkew: o.ClockSkew})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

func TestWriteUnitsAreCounted(t *testing.T) {
	t.Parallel()
	db := standintest.DynamoDB(t)
	clk := clock.NewFake(t0)
	l, err := ledger.New(db, ledger.Config{Table: standintest.Table(t, db), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d := ledger.Delivery{ReminderID: "rem-12", Channel: "email", Provider: "webhook", DueAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := l.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	c, err := l.Claim(ctx, ledger.Claim{Key: d.Key(), Token: "tok", LeaseUntil: t0.Add(time.Minute), DueBy: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Complete(ctx, c, "r"); err != nil {
		t.Fatal(err)
	}
	// Create 1 + its due index entry 1, claim 1 (the index is untouched),
	// complete 1 + removing the index entry 1: the budget of 5.
	if got := l.WriteUnits(); got != 5 {
		t.Fatalf("create+claim+complete consumed %v write units, want 5 (1 KB items, index included)", got)
	}
}

// BenchmarkClaim measures one claim against DynamoDB Local, alone and ten
// at once, to show how far the stand-in serialises parallel writes.
func BenchmarkClaim(b *testing.B) {
	for _, parallel := range []int{1, 10} {
		b.Run(fmt.Sprint("parallel=", parallel), func(b *testing.B) {
			db := standintest.DynamoDB(b)
			clk := clock.NewFake(t0)
			l, err := ledger.New(db, ledger.Config{Table: standintest.Table(b, db), Clock: clk})
			if err != nil {
				b.Fatal(err)
			}
			ds := make([]ledger.Delivery, b.N*parallel)
			for i := range ds {
				ds[i] = ledger.Delivery{ReminderID: fmt.Sprint("rem-", i), Channel: "email", Provider: "webhook", DueAt: t0, ExpiresAt: t0.Add(time.Hour), Status: ledger.StatusQueued}
				if err := l.Create(context.Background(), ds[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for j := 0; j < parallel; j++ {
					wg.Add(1)
					go func(d ledger.Delivery) {
						defer wg.Done()
						if _, err := l.Claim(context.Background(), ledger.Claim{Key: d.Key(), Token: "t", LeaseUntil: t0.Add(time.Minute), DueBy: t0}); err != nil {
							b.Error(err)
						}
					}(ds[i*parallel+j])
				}
				wg.Wait()
			}
		})
	}
}

// TestHistoryLimitKeepsEveryWriteAtOneUnit drives one delivery through
// twelve failed attempts and reads the write units DynamoDB Local reports
// for each claim and retry: with the default history limit the item stays
// under 1 KB. Run with -v to see the units per attempt, and with a limit
// of 20 for comparison.
func TestHistoryLimitKeepsEveryWriteAtOneUnit(t *testing.T) {
	t.Parallel()
	db := standintest.DynamoDB(t)
	for _, limit := range []int{0, 20} { // 0: the default
		clk := clock.NewFake(t0)
		l, err := ledger.New(db, ledger.Config{Table: standintest.Table(t, db), Clock: clk, HistoryLimit: limit})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		d := ledger.Delivery{ReminderID: "rem-18400000", Channel: "email", Provider: "webhook", RecipientRef: "acct-1/contact-2", TemplateRef: "renewal-v3",
			DueAt: t0, ExpiresAt: t0.Add(time.Hour), Status: ledger.StatusQueued}
		if err := l.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		var units []float64
		for i := 1; i <= 12; i++ {
			before := l.WriteUnits()
			c, err := l.Claim(ctx, ledger.Claim{Key: d.Key(), Token: fmt.Sprintf("%032d", i), LeaseUntil: t0.Add(time.Minute), DueBy: t0})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Retry(ctx, c, ledger.Failure{Class: "server", Message: "provider answered 503 (retry after 30s)", NextAttemptAt: t0.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			units = append(units, l.WriteUnits()-before)
		}
		t.Logf("history limit %d: write units per attempt (claim + retry): %v", limit, units)
		if limit == 0 {
			for i, u := range units {
				if u != 2 {
					t.Errorf("attempt %d cost %v write units, want 2 (1 per write)", i+1, u)
				}
			}
		}
	}
}

// TestTheStageRecordKeepsItsFormat: the stage record the enqueue writes is
// the one every version wrote (providers, and each variable as an
// attribute of its own: sesTemplatePrefix), so that a CLI of an earlier
// version reads what this one records, and this one reads a record an
// earlier enqueue wrote.
func TestTheStageRecordKeepsItsFormat(t *testing.T) {
	t.Parallel()
	db := standintest.DynamoDB(t)
	table := standintest.Table(t, db)
	l, err := ledger.New(db, ledger.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "NUDGE"}, "SK": &types.AttributeValueMemberS{Value: "STAGE"}}
	// As the enqueue before 2026-12-02 wrote it.
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key,
		UpdateExpression: aws.String("SET providers = :p, sesTemplatePrefix = :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "webhook"}, &types.AttributeValueMemberS{Value: "ses"}}},
			":t": &types.AttributeValueMemberS{Value: "nudge-old-"},
		}}); err != nil {
		t.Fatal(err)
	}
	f, ok, err := l.ReadStage(ctx)
	if err != nil || !ok || f.Env["NUDGE_SES_TEMPLATE_PREFIX"] != "nudge-old-" || strings.Join(f.Providers, ",") != "webhook,ses" {
		t.Fatalf("an earlier record reads %+v, %v, %v", f, ok, err)
	}
	if err := l.RecordStage(ctx, ledger.StageFacts{Providers: []string{"ses"}, Env: map[string]string{"NUDGE_SES_TEMPLATE_PREFIX": "nudge-dev-"}}); err != nil {
		t.Fatal(err)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := out.Item["sesTemplatePrefix"].(*types.AttributeValueMemberS); !ok || v.Value != "nudge-dev-" || len(out.Item) != 4 {
		t.Fatalf("the record is %v; want PK, SK, providers and sesTemplatePrefix = nudge-dev-", out.Item)
	}
}
