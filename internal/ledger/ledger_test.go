package ledger_test

import (
	"context"
	"errors"
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
	// A setting removed from the stack is recorded empty, and reads back
	// empty: the record does not keep the earlier value.
	for _, v := range []string{"sms=08:00-21:00", ""} {
		if err := l.RecordStage(ctx, ledger.StageFacts{Providers: []string{"ses"}, Env: map[string]string{"NUDGE_SEND_WINDOWS": v}}); err != nil {
			t.Fatal(err)
		}
		if f, ok, err := l.ReadStage(ctx); err != nil || !ok || f.Env["NUDGE_SEND_WINDOWS"] != v {
			t.Fatalf("recorded %q, read %+v, %v, %v", v, f.Env, ok, err)
		}
	}
}

// TestFeedbackKeepsEveryWriteAtOneUnit: an e-mail delivery as the intake
// writes it (an address, template data, the account), sent at its first
// attempt and at its fourth (a full history), then told sent, delayed,
// delivered, bounced and complained of by SES, with SES's ids: every
// feedback write costs 1 write unit and leaves the item under 1 KB, and a
// repeat is refused without a write. The fourth-attempt case is run again
// as the richest delivery the intake writes: with a fallback (taken after
// the bounce: the primary's mark), under send-late, and having waited for
// SES's record (an AwaitRecord note in its history and lastError). That
// one does not fit: right after its send it is 1103 bytes (79 over 1 KB:
// its first feedback write costs 2 units, and each later one, the history
// trimmed, 1), and after the take's mark 1026; the test holds it to
// richLimit, so that it grows no further unnoticed, until the item is made
// smaller (docs/ledger.md, "Item size"). Run with -v to see the item's
// size.
func TestFeedbackKeepsEveryWriteAtOneUnit(t *testing.T) {
	t.Parallel()
	db := standintest.DynamoDB(t)
	table := standintest.Table(t, db)
	ctx := context.Background()
	msg := "0100019a5f6e2b3c-8d2f4a61-3b7e-4c2a-9f10-6e5d4c3b2a19-000000"
	events := []ledger.Feedback{
		{Kind: ledger.FeedbackSentByProvider, At: t0.Add(time.Second), ID: msg + ":Send:2026-11-30T09:00:01.000Z", MessageID: msg},
		{Kind: ledger.FeedbackDelayed, Detail: "TransientCommunicationFailure", At: t0.Add(2 * time.Minute),
			ID: msg + ":DeliveryDelay:2026-11-30T09:02:00.000Z", MessageID: msg},
		{Kind: ledger.FeedbackDelivered, Detail: "250", At: t0.Add(3 * time.Second), ID: msg + ":Delivery:2026-11-30T09:00:03.000Z", MessageID: msg},
		{Kind: ledger.FeedbackBounced, Permanent: true, Detail: "Permanent/General", At: t0.Add(4 * time.Second),
			ID: "0100019a5f6e31aa-9c0b7d52-4a1e-4f3b-8e21-7d6c5b4a3f20-000000", MessageID: msg},
		{Kind: ledger.FeedbackComplained, Detail: "abuse", At: t0.Add(time.Hour), ID: "0100019a5f9b44cc-2e1d0c9b-8a7f-4e6d-b5c4-3a2b1c0d9e8f-000000", MessageID: msg},
	}
	const richLimit = 1057 // bytes: what the richest delivery reaches today, over 1 KB
	for _, tc := range []struct {
		attempts int
		rich     bool // fallback, send-late, a wait for SES's record, the take's mark
	}{{1, false}, {4, false}, {4, true}} {
		attempts := tc.attempts
		clk := clock.NewFake(t0)
		l, err := ledger.New(db, ledger.Config{Table: table, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		d := ledger.Delivery{ReminderID: fmt.Sprint("rem-1840000", attempts), Channel: "email", Provider: "ses", AccountRef: "acct-1",
			RecipientRef: "acct-1/contact-2", TemplateRef: "renewal-notice", Address: "ana.lima@example.com",
			TemplateData: map[string]string{"plan": "Pro", "renewsOn": "1 December", "reference": "R-184"},
			DueAt:        t0, ExpiresAt: t0.Add(24 * time.Hour), Status: ledger.StatusQueued}
		if tc.rich {
			d.ReminderID = "rem-18400005"
			d.Fallback, d.FallbackWithin = ledger.FallbackRef{Channel: "sms", Provider: "sns"}, 2*time.Hour
			d.Late, d.OnTimeUntil, d.ExpiresAt = ledger.LateSendLate, d.ExpiresAt, d.ExpiresAt.Add(2*time.Hour)
			held := ledger.Delivery{ReminderID: d.ReminderID, Channel: "sms", Provider: "sns", AccountRef: "acct-1", RecipientRef: "acct-1/contact-2-phone",
				TemplateRef: "renewal-sms", Address: "+351912345678", DueAt: t0, ExpiresAt: t0.Add(24 * time.Hour), Status: ledger.StatusHeld,
				FallbackOf: ledger.FallbackRef{Channel: "email", Provider: "ses"}, FallbackWithin: 2 * time.Hour}
			if err := l.Create(ctx, held); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= attempts; i++ {
			c, err := l.Claim(ctx, ledger.Claim{Key: d.Key(), Token: fmt.Sprintf("%032d", i), LeaseUntil: t0.Add(time.Minute), DueBy: t0})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.rich && i == attempts-1:
				_, err = l.AwaitRecord(ctx, c, ledger.Await{Note: "awaits ses record to 09:00:00Z", Next: t0.Add(time.Minute)})
			case i < attempts:
				_, err = l.Retry(ctx, c, ledger.Failure{Class: "throttled", Message: "ses answered 429 TooManyRequestsException", NextAttemptAt: t0.Add(time.Minute)})
			default:
				_, err = l.Complete(ctx, c, msg)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		key := map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: ledger.PartitionKey(d.ReminderID)},
			"SK": &types.AttributeValueMemberS{Value: ledger.SortKey(d.Channel, d.Provider)}}
		sizeNow := func() int {
			t.Helper()
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key})
			if err != nil {
				t.Fatal(err)
			}
			return itemSize(out.Item)
		}
		sizes := []int{sizeNow()}
		for _, f := range events {
			before := l.WriteUnits()
			_, err := l.RecordFeedback(ctx, d.Key(), f)
			if f.Kind == ledger.FeedbackSentByProvider {
				// The Send event of the message recorded sent adds nothing.
				if !errors.Is(err, ledger.ErrFeedbackRedundant) || l.WriteUnits() != before {
					t.Errorf("the Send event of the sent message: %v, %v units; want ErrFeedbackRedundant and no write", err, l.WriteUnits()-before)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if u := l.WriteUnits() - before; u != 1 && (!tc.rich || len(sizes) > 1 || sizes[0] < 1024) {
				t.Errorf("sent at attempt %d: recording %s cost %v write units, want 1", attempts, f.Note(), u)
			}
			if sizes = append(sizes, sizeNow()); sizes[len(sizes)-1] >= 1024 {
				t.Errorf("sent at attempt %d: after %s the item is %d bytes; want under 1 KB", attempts, f.Note(), sizes[len(sizes)-1])
			}
		}
		if tc.rich {
			bounced, err := l.Get(ctx, d.Key())
			if err != nil {
				t.Fatal(err)
			}
			reason, due := bounced.FallbackDue()
			if !due {
				t.Fatalf("the bounced primary's fallback is not due: %+v", bounced)
			}
			if _, err := l.TakeFallback(ctx, bounced, reason); err != nil {
				t.Fatal(err)
			}
			if sizes = append(sizes, sizeNow()); sizes[len(sizes)-1] > richLimit {
				t.Errorf("with a fallback, send-late and a wait for the record: after the take's mark the item is %d bytes; want at most %d",
					sizes[len(sizes)-1], richLimit)
			}
		}
		if sizes[0] >= 1024 && (!tc.rich || sizes[0] > richLimit) {
			t.Errorf("sent at attempt %d (rich %v): the item is %d bytes; want under 1 KB (the richest: at most %d)", attempts, tc.rich, sizes[0], richLimit)
		}
		t.Logf("sent at attempt %d (rich %v): %d bytes, then after each write %v", attempts, tc.rich, sizes[0], sizes[1:])
		before := l.WriteUnits()
		if _, err := l.RecordFeedback(ctx, d.Key(), events[1]); !errors.Is(err, ledger.ErrFeedbackSeen) || l.WriteUnits() != before {
			t.Errorf("a repeat: %v, %v units; want ErrFeedbackSeen and no write", err, l.WriteUnits()-before)
		}
	}
}

// TestFeedbackIsDecidedAgainWhenTheDeliveryChanged: a transition landing
// between RecordFeedback's read and its write (the consumer's Complete)
// refuses the write; the feedback is decided again from the item the
// refusal returned and written, the transition kept.
func TestFeedbackIsDecidedAgainWhenTheDeliveryChanged(t *testing.T) {
	t.Parallel()
	db := standintest.DynamoDB(t)
	clk := clock.NewFake(t0)
	table := standintest.Table(t, db)
	consumer, err := ledger.New(db, ledger.Config{Table: table, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d := ledger.Delivery{ReminderID: "rem-race", Channel: "email", Provider: "ses", DueAt: t0, ExpiresAt: t0.Add(time.Hour), Status: ledger.StatusQueued}
	if err := consumer.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	c, err := consumer.Claim(ctx, ledger.Claim{Key: d.Key(), Token: "tok", LeaseUntil: t0.Add(time.Minute), DueBy: t0})
	if err != nil {
		t.Fatal(err)
	}
	between := &completeBetween{dynamoAPI: db, complete: func() {
		if _, err := consumer.Complete(ctx, c, "msg-1"); err != nil {
			t.Error(err)
		}
	}}
	l, err := ledger.New(between, ledger.Config{Table: table, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.RecordFeedback(ctx, d.Key(), ledger.Feedback{Kind: ledger.FeedbackDelivered, At: t0, ID: "msg-1:Delivery", MessageID: "msg-1"})
	if err != nil {
		t.Fatal(err)
	}
	if between.updates != 2 || got.Status != ledger.StatusSent || got.Feedback.Kind != ledger.FeedbackDelivered {
		t.Fatalf("%d writes; %+v: want two writes, sent and the feedback", between.updates, got)
	}
	h := got.History
	if n := len(h); n < 2 || h[n-2].Status != ledger.StatusSent || !h[n-1].Feedback {
		t.Fatalf("history %+v: want the send, then the feedback", h)
	}
}

type dynamoAPI = ledger.API

// completeBetween runs complete before the first feedback write it passes
// on, as a consumer finishing its send would between the read and the write.
type completeBetween struct {
	dynamoAPI
	complete func()
	updates  int
}

func (c *completeBetween) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.updates++
	if c.updates == 1 {
		c.complete()
	}
	return c.dynamoAPI.UpdateItem(ctx, in, optFns...)
}

// itemSize is an item's size as DynamoDB counts it: each attribute's name
// and value, a number at most 21 bytes, 3 bytes per list or map and 1 per
// element.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return min(21, len(v.Value))
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	}
	return 0
}
