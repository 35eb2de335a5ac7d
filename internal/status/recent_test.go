package status_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/status"
	"github.com/nudgehq/nudge/pkg/clock"
)

// recentLedger is what the activity's test drives: a ledger's transitions,
// and the read Recent makes.
type recentLedger interface {
	Create(ctx context.Context, d ledger.Delivery) error
	Claim(ctx context.Context, c ledger.Claim) (ledger.Delivery, error)
	Complete(ctx context.Context, d ledger.Delivery, receipt string) (ledger.Delivery, error)
	Retry(ctx context.Context, d ledger.Delivery, f ledger.Failure) (ledger.Delivery, error)
	DeadLetter(ctx context.Context, d ledger.Delivery, f ledger.Failure) (ledger.Delivery, error)
	Expire(ctx context.Context, d ledger.Delivery) (ledger.Delivery, error)
	ReadRecent(ctx context.Context, q ledger.RecentQuery) (ledger.RecentPage, error)
}

// TestRecentCountsTheWindowsTransitionsByProvider on the Memory ledger
// and on DynamoDB Local.
func TestRecentCountsTheWindowsTransitionsByProvider(t *testing.T) {
	t.Parallel()
	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(t0)
		m, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		testRecent(t, m, clk)
	})
	t.Run("DynamoDB", func(t *testing.T) {
		t.Parallel()
		db := standintest.DynamoDB(t)
		clk := clock.NewFake(t0)
		l, err := ledger.New(db, ledger.Config{Table: standintest.Table(t, db), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		testRecent(t, l, clk)
	})
}

var t0 = time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)

// testRecent: a send seven hours ago is outside the default window of six;
// in it, two webhook sends (one after a retry) 2 s and 40 s late, an SES
// delivery dead-lettered and one expired. The counts are by provider, the
// lateness in its buckets, with percentiles; a wider window takes the old
// send in; a read bounded below the table's size says it sampled.
func testRecent(t *testing.T, l recentLedger, clk *clock.Fake) {
	ctx := context.Background()
	create := func(id, provider string, expires time.Duration) ledger.Delivery {
		t.Helper()
		d := ledger.Delivery{ReminderID: id, Channel: "email", Provider: provider, RecipientRef: "r", TemplateRef: "t",
			DueAt: clk.Now(), ExpiresAt: clk.Now().Add(expires)}
		if err := l.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	claim := func(d ledger.Delivery, tok string) ledger.Delivery {
		t.Helper()
		c, err := l.Claim(ctx, ledger.Claim{Key: d.Key(), Token: tok, LeaseUntil: clk.Now().Add(time.Minute), DueBy: clk.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	must := func(_ ledger.Delivery, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	old := create("rem-old", "webhook", time.Hour)
	must(l.Complete(ctx, claim(old, "t-old"), "r-old"))
	clk.Advance(7 * time.Hour)

	one := create("rem-1", "webhook", time.Hour)
	two := create("rem-2", "webhook", time.Hour)
	dead := create("rem-3", "ses", time.Hour)
	expiring := create("rem-4", "ses", time.Second)
	clk.Advance(2 * time.Second)
	must(l.Complete(ctx, claim(one, "t-1"), "r-1"))
	must(l.Retry(ctx, claim(two, "t-2"), ledger.Failure{Class: "server", Message: "503", NextAttemptAt: clk.Now().Add(30 * time.Second)}))
	must(l.DeadLetter(ctx, claim(dead, "t-3"), ledger.Failure{Class: "permanent", Message: "400"}))
	must(l.Expire(ctx, expiring))
	clk.Advance(38 * time.Second)
	must(l.Complete(ctx, claim(two, "t-2b"), "r-2"))
	clk.Advance(time.Minute)

	a, err := status.Recent(ctx, status.RecentConfig{Ledger: l, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if a.Hours != 6 || !a.Until.Equal(clk.Now()) || !a.Since.Equal(clk.Now().Add(-6*time.Hour)) {
		t.Errorf("window %d h, %s to %s", a.Hours, a.Since, a.Until)
	}
	want := []status.ProviderActivity{
		{Provider: "ses", Counts: status.Counts{DeadLettered: 1, Expired: 1}},
		{Provider: "webhook", Counts: status.Counts{Sent: 2, Retried: 1}},
	}
	if len(a.Providers) != 2 || a.Providers[0] != want[0] || a.Providers[1] != want[1] {
		t.Errorf("providers %+v, want %+v", a.Providers, want)
	}
	if a.Total != (status.Counts{Sent: 2, Retried: 1, DeadLettered: 1, Expired: 1}) {
		t.Errorf("total %+v", a.Total)
	}
	lt := a.Lateness
	counts := map[string]int{}
	for _, b := range lt.Buckets {
		counts[b.Label] = b.Count
	}
	if lt.Sent != 2 || len(lt.Buckets) != 8 || counts["1–5s"] != 1 || counts["15s–1m"] != 1 || lt.P50 != 2 || lt.P99 != 40 || lt.Max != 40 {
		t.Errorf("lateness %+v", lt)
	}
	if a.Sampled || a.Read < 5 || !strings.HasPrefix(a.Source, "exact") { // DynamoDB's table holds its shard registry too
		t.Errorf("read %d, sampled %v (%s); want the 5 deliveries and no more than the table, exact", a.Read, a.Sampled, a.Source)
	}

	wide, err := status.Recent(ctx, status.RecentConfig{Ledger: l, Clock: clk, Hours: 8})
	if err != nil || wide.Total.Sent != 3 || wide.Lateness.Sent != 3 || wide.Lateness.Buckets[0].Count != 1 {
		t.Errorf("over 8 h: %+v, %v; want the old send too, on time", wide, err)
	}
	sampled, err := status.Recent(ctx, status.RecentConfig{Ledger: l, Clock: clk, MaxRead: 2})
	if err != nil || !sampled.Sampled || sampled.Read != 2 || !strings.HasPrefix(sampled.Source, "sampled") {
		t.Errorf("bounded to 2: read %d, sampled %v (%s), %v", sampled.Read, sampled.Sampled, sampled.Source, err)
	}
	if _, err := status.Recent(ctx, status.RecentConfig{Ledger: l, Clock: clk, Hours: 73}); err == nil || !strings.Contains(err.Error(), "1 to 72") {
		t.Errorf("73 hours: %v", err)
	}
}
