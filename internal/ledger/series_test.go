package ledger_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/pkg/clock"
)

// inFlight is DynamoDB Local as real DynamoDB answers a write that meets
// a write of the same item in flight, which the stand-in (one write at a
// time) never does: the first call of operation refuse ("PutItem" or
// "TransactWriteItems"; "": none) runs before, the other create that got
// there first, then is refused as DynamoDB refuses it, writing nothing.
// Query calls are counted.
type inFlight struct {
	ledger.API
	refuse  string
	before  func()
	once    sync.Once
	queries atomic.Int32
}

func (f *inFlight) first(op string) (refused bool) {
	if op != f.refuse {
		return false
	}
	f.once.Do(func() { f.before(); refused = true })
	return refused
}

func (f *inFlight) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if f.first("PutItem") {
		return nil, &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
	}
	return f.API.PutItem(ctx, in, opts...)
}

func (f *inFlight) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput,
	opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if f.first("TransactWriteItems") {
		return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled [TransactionConflict, None]"),
			CancellationReasons: []types.CancellationReason{{Code: aws.String("TransactionConflict")}, {Code: aws.String("None")}}}
	}
	return f.API.TransactWriteItems(ctx, in, opts...)
}

func (f *inFlight) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	f.queries.Add(1)
	return f.API.Query(ctx, in, opts...)
}

// raceSetup is a ledger on a fresh table of DynamoDB Local, and one on the
// same table through api (nil: none).
func raceSetup(t *testing.T, api func(ledger.API) ledger.API) (direct, through *ledger.Ledger) {
	t.Helper()
	db := standintest.DynamoDB(t)
	cfg := ledger.Config{Table: standintest.Table(t, db), Clock: clock.NewFake(t0)}
	direct, err := ledger.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if through, err = ledger.New(api(db), cfg); err != nil {
		t.Fatal(err)
	}
	return direct, through
}

func raceItem(id, recur string) ledger.ReminderItem {
	return ledger.ReminderItem{ID: id, AccountRef: "acct-1", DueAt: t0.Add(time.Hour), ExpiresAt: t0.Add(25 * time.Hour), Recur: recur,
		Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "c-1", TemplateRef: "t"}}}
}

// TestAReminderThatMeetsASeriesCreateInFlightIsRefusedAsTheSeries: a
// reminder's put refused by a series' transaction in flight on its key is
// made again, and refused with ErrSeriesID once the series stands: a typed
// answer for the loser of the race, not DynamoDB's conflict.
func TestAReminderThatMeetsASeriesCreateInFlightIsRefusedAsTheSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var direct *ledger.Ledger
	f := &inFlight{refuse: "PutItem", before: func() {
		if _, _, err := direct.CreateSeries(ctx, ledger.Series{Item: raceItem("id-1", "FREQ=DAILY"), Next: 1, ExtendAt: t0}); err != nil {
			t.Error(err)
		}
	}}
	direct, through := raceSetup(t, func(api ledger.API) ledger.API { f.API = api; return f })
	if _, exists, err := through.CreateReminder(ctx, raceItem("id-1", "")); !errors.Is(err, ledger.ErrSeriesID) || exists {
		t.Fatalf("the reminder: %v, %v; want ErrSeriesID", exists, err)
	}
}

// TestASeriesThatMeetsAReminderCreateInFlightIsRefusedAsTheReminder: a
// series' transaction cancelled for a conflict with a reminder's put in
// flight reads what stands, and is refused with ErrReminderID.
func TestASeriesThatMeetsAReminderCreateInFlightIsRefusedAsTheReminder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var direct *ledger.Ledger
	f := &inFlight{refuse: "TransactWriteItems", before: func() {
		if _, _, err := direct.CreateReminder(ctx, raceItem("id-2", "")); err != nil {
			t.Error(err)
		}
	}}
	direct, through := raceSetup(t, func(api ledger.API) ledger.API { f.API = api; return f })
	if _, exists, err := through.CreateSeries(ctx, ledger.Series{Item: raceItem("id-2", "FREQ=DAILY"), Next: 1, ExtendAt: t0}); !errors.Is(err, ledger.ErrReminderID) || exists {
		t.Fatalf("the series: %v, %v; want ErrReminderID", exists, err)
	}
}

// TestARefusedSeriesCreateTellsFromTheCancellationReasons: the same series
// again, and a series under a reminder's id, are told apart by the items
// the cancelled transaction returns, with no read of the partition; the
// series' create counts as reminder writes, not delivery writes.
func TestARefusedSeriesCreateTellsFromTheCancellationReasons(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &inFlight{}
	_, l := raceSetup(t, func(api ledger.API) ledger.API { f.API = api; return f })
	s := ledger.Series{Item: raceItem("id-3", "FREQ=DAILY"), Next: 1, ExtendAt: t0}
	if _, exists, err := l.CreateSeries(ctx, s); err != nil || exists {
		t.Fatalf("the series: %v, %v", exists, err)
	}
	// The claim, the series item and its entries in the account and due
	// indexes, at a transaction's rate: DynamoDB Local reports 16.
	if u := l.Units(); u.Reminders != 16 || u.Deliveries != 0 {
		t.Fatalf("a series' create counted %+v; want 16 reminder units (docs/ledger.md#write-units), no delivery units", u)
	}
	if got, exists, err := l.CreateSeries(ctx, s); err != nil || !exists || got.Item.Recur != "FREQ=DAILY" {
		t.Fatalf("the series again: %+v, %v, %v", got, exists, err)
	}
	if _, _, err := l.CreateReminder(ctx, raceItem("id-4", "")); err != nil {
		t.Fatal(err)
	}
	if _, exists, err := l.CreateSeries(ctx, ledger.Series{Item: raceItem("id-4", "FREQ=DAILY"), Next: 1}); !errors.Is(err, ledger.ErrReminderID) || exists {
		t.Fatalf("a series under a reminder's id: %v, %v; want ErrReminderID", exists, err)
	}
	if n := f.queries.Load(); n != 0 {
		t.Fatalf("the refusals read the partition %d times; want 0 (the cancellation reasons carry the items)", n)
	}
}

// TestAnOccurrencesCreateCostsATransaction: an occurrence's reminder item
// is written in a transaction with the check of its series, so it costs
// the transaction's rate for its put (the item and its account index
// entry) and for the check of the series item (with its index entries):
// DynamoDB Local reports 12 units, against a plain reminder's 2
// (docs/ledger.md#write-units).
func TestAnOccurrencesCreateCostsATransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, l := raceSetup(t, func(api ledger.API) ledger.API { return api })
	if _, _, err := l.CreateSeries(ctx, ledger.Series{Item: raceItem("ser-u", "FREQ=DAILY"), Next: 1, ExtendAt: t0}); err != nil {
		t.Fatal(err)
	}
	before := l.Units().Reminders
	if _, _, err := l.CreateReminder(ctx, raceItem("plain-u", "")); err != nil {
		t.Fatal(err)
	}
	plain := l.Units().Reminders - before
	occ := raceItem("ser-u.1", "")
	occ.Series = "ser-u"
	before = l.Units().Reminders
	if _, _, err := l.CreateOccurrence(ctx, occ, ledger.Start{DueAt: raceItem("ser-u", "").DueAt, Next: 1}); err != nil {
		t.Fatal(err)
	}
	guarded := l.Units().Reminders - before
	t.Logf("a reminder's create: %v units; an occurrence's: %v", plain, guarded)
	if plain != 2 || guarded != 12 {
		t.Fatalf("a reminder's create counted %v, an occurrence's %v; want 2 and 12 (docs/ledger.md#write-units)", plain, guarded)
	}
}
