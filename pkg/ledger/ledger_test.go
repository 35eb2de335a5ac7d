package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/ledger/ledgertest"
	"github.com/nudgehq/nudge/pkg/standin/standintest"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// TestConformance runs the ledger conformance suite against DynamoDB Local.
func TestConformance(t *testing.T) {
	db := standintest.DynamoDB(t)
	ledgertest.Run(t, func(t *testing.T, clk *clock.Fake, historyLimit int) ledgertest.Store {
		l, err := ledger.New(db, ledger.Config{Table: standintest.Table(t, db), Clock: clk, HistoryLimit: historyLimit})
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
	if got := l.WriteUnits(); got != 3 {
		t.Fatalf("create+claim+complete consumed %v write units, want 3 (1 KB items)", got)
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
