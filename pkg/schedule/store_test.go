package schedule_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/local/standin/standintest"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// bundleLedger is what the tests ask of the ledger.
type bundleLedger interface {
	schedule.Ledger
	Get(ctx context.Context, key message.DeliveryKey) (ledger.Delivery, error)
	Claim(ctx context.Context, c ledger.Claim) (ledger.Delivery, error)
	Complete(ctx context.Context, d ledger.Delivery, receipt string) (ledger.Delivery, error)
}

type bundle struct {
	ctx    context.Context
	clk    *clock.Fake
	ledger bundleLedger
	table  string // setupLocal's table in DynamoDB Local
	store  *schedule.Store
}

// setup is a bundle on the in-memory ledger with a fake clock: the intake's
// logic (create, conflict, cancel, import) needs nothing else.
func setup(t *testing.T) bundle {
	t.Helper()
	clk := clock.NewFake(now)
	l, err := ledger.NewMemory(ledger.MemoryConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return newBundle(t, clk, l, "")
}

// setupLocal is a bundle on DynamoDB Local, for what DynamoDB does itself
// (TTL deletion).
func setupLocal(t *testing.T, db *dynamodb.Client) bundle {
	t.Helper()
	clk := clock.NewFake(now)
	table := standintest.Table(t, db)
	l, err := ledger.New(db, ledger.Config{Table: table, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return newBundle(t, clk, l, table)
}

func newBundle(t *testing.T, clk *clock.Fake, l bundleLedger, table string) bundle {
	t.Helper()
	s, err := schedule.New(schedule.Config{Ledger: l, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return bundle{ctx: context.Background(), clk: clk, ledger: l, table: table, store: s}
}

func (b bundle) parse(t *testing.T, js string) schedule.Reminder {
	t.Helper()
	r, err := b.store.Validator().ParseJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCreateIsIdempotentByID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.parse(t, good)
	for i, want := range []schedule.Outcome{schedule.Created, schedule.Unchanged} {
		got, err := b.store.Create(b.ctx, r)
		if err != nil || got != want {
			t.Fatalf("create #%d = %q, %v; want %q", i+1, got, err, want)
		}
	}
	d, err := b.ledger.Get(b.ctx, r.Key(r.Deliveries[0]))
	if err != nil || d.Status != ledger.StatusPending || d.RecipientRef != "acct-1/contact-2" || !d.DueAt.Equal(r.DueAt) || !d.ExpiresAt.Equal(r.ExpiresAt) {
		t.Fatalf("delivery = %+v, %v", d, err)
	}

	changed := b.parse(t, strings.Replace(good, "10:00:00+01:00", "11:00:00+01:00", 1))
	_, err = b.store.Create(b.ctx, changed)
	var ce *schedule.ConflictError
	if !errors.As(err, &ce) || ce.Field != "dueAt" || !strings.Contains(err.Error(), "nudge cancel rem-1") {
		t.Fatalf("changed dueAt: %v, want a conflict naming dueAt and the way out", err)
	}
	other := b.parse(t, strings.Replace(good, "renewal-v3", "renewal-v4", 1))
	if _, err := b.store.Create(b.ctx, other); !errors.As(err, &ce) || ce.Field != "deliveries" {
		t.Fatalf("changed template: %v, want a conflict naming deliveries", err)
	}
}

// failingLedger fails the nth delivery create, as a crash half-way would.
type failingLedger struct {
	bundleLedger
	fail int
	n    int
}

func (f *failingLedger) Create(ctx context.Context, d ledger.Delivery) error {
	f.n++
	if f.n == f.fail {
		return errors.New("connection reset")
	}
	return f.bundleLedger.Create(ctx, d)
}

func TestCreateFinishesWhatAnInterruptedCreateLeft(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.parse(t, strings.Replace(good, `}]`, `},{"channel":"sms","provider":"webhook","recipientRef":"acct-1/phone","templateRef":"renewal-sms"}]`, 1))
	broken, _ := schedule.New(schedule.Config{Ledger: &failingLedger{bundleLedger: b.ledger, fail: 2}, Clock: b.clk})
	if _, err := broken.Create(b.ctx, r); err == nil || !strings.Contains(err.Error(), "run the same create again") {
		t.Fatalf("interrupted create: %v", err)
	}
	if _, err := b.ledger.Get(b.ctx, r.Key(r.Deliveries[1])); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("second delivery exists after the interruption: %v", err)
	}
	if got, err := b.store.Create(b.ctx, r); err != nil || got != schedule.Completed {
		t.Fatalf("create again = %q, %v; want completed (finished)", got, err)
	}
	for _, d := range r.Deliveries {
		if _, err := b.ledger.Get(b.ctx, r.Key(d)); err != nil {
			t.Fatalf("delivery %s: %v", d.Channel, err)
		}
	}
}

func TestCancelRefusesASentDeliveryAndSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.parse(t, strings.Replace(good, `}]`, `},{"channel":"sms","provider":"webhook","recipientRef":"acct-1/phone","templateRef":"renewal-sms"}]`, 1))
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(25 * time.Hour) // due
	email := r.Key(r.Deliveries[0])
	c, err := b.ledger.Claim(b.ctx, ledger.Claim{Key: email, Token: "t", LeaseUntil: b.clk.Now().Add(time.Minute), DueBy: b.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ledger.Complete(b.ctx, c, "receipt-1"); err != nil {
		t.Fatal(err)
	}
	res, err := b.store.Cancel(b.ctx, r.ID, "customer renewed")
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[message.DeliveryKey]schedule.CancelResult{}
	for _, x := range res {
		byKey[x.Key] = x
	}
	if x := byKey[email]; x.Cancelled || !errors.Is(x.Refused, ledger.ErrAlreadySent) || x.At.IsZero() {
		t.Fatalf("sent delivery: %+v", x)
	}
	if x := byKey[r.Key(r.Deliveries[1])]; !x.Cancelled || x.Status != schedule.StatusCancelled {
		t.Fatalf("pending delivery: %+v", x)
	}
	if _, err := b.store.Cancel(b.ctx, "rem-unknown", "x"); !errors.Is(err, schedule.ErrNoReminder) {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestImportWritesValidRowsAndReportsTheRestByLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file                 string
		created, unchanged   int
		invalid, conflicting []int
	}{
		{"testdata/mixed.jsonl", 4, 0, []int{2, 5, 6}, []int{7}},
		{"testdata/mixed.csv", 2, 0, []int{5, 6, 7}, nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b := setup(t)
			f, err := os.Open(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			format, _ := schedule.FormatOf(tc.file)
			rows, err := schedule.ReadRows(f, format, b.store.Validator())
			if err != nil {
				t.Fatal(err)
			}
			var calls int
			sum, err := schedule.Import(b.ctx, rows, schedule.ImportConfig{Creator: b.store, Progress: func(done, total int) {
				calls++
				if done != calls || total != len(rows) {
					t.Errorf("progress %d/%d at call %d", done, total, calls)
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Created != tc.created || sum.Unchanged != tc.unchanged || !sameLines(sum.Invalid, tc.invalid) || !sameLines(sum.Conflicts, tc.conflicting) || len(sum.Failed) != 0 {
				t.Fatalf("summary = %+v", sum)
			}
			for _, e := range sum.Invalid {
				t.Logf("line %d: %v", e.Line, e.Err)
			}
			// Importing the same file again changes nothing.
			again, err := schedule.Import(b.ctx, rows, schedule.ImportConfig{Creator: b.store})
			if err != nil || again.Created != 0 || again.Unchanged != tc.created {
				t.Fatalf("second import = %+v, %v", again, err)
			}
		})
	}
}

func sameLines(es []schedule.RowError, lines []int) bool {
	if len(es) != len(lines) {
		return false
	}
	for i := range es {
		if es[i].Line != lines[i] {
			return false
		}
	}
	return true
}

// flaky fails every reminder's first two writes, as throttling would.
type flaky struct {
	schedule.Creator
	seen map[string]int
}

func (f *flaky) Create(ctx context.Context, r schedule.Reminder) (schedule.Outcome, error) {
	f.seen[r.ID]++
	if f.seen[r.ID] <= 2 {
		return "", errors.New("ProvisionedThroughputExceededException")
	}
	return f.Creator.Create(ctx, r)
}

func TestImportRetriesFailedWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rows, err := schedule.ReadRows(strings.NewReader(good+"\n"), schedule.JSONLines, b.store.Validator())
	if err != nil {
		t.Fatal(err)
	}
	f := &flaky{Creator: b.store, seen: map[string]int{}}
	sum, err := schedule.Import(b.ctx, rows, schedule.ImportConfig{Creator: f, Concurrency: 1, Backoff: time.Millisecond})
	if err != nil || sum.Created != 1 || f.seen["rem-1"] != 3 {
		t.Fatalf("summary = %+v, %v, attempts %d", sum, err, f.seen["rem-1"])
	}
	f.seen = map[string]int{}
	sum, _ = schedule.Import(b.ctx, rows, schedule.ImportConfig{Creator: f, Attempts: 2, Backoff: time.Millisecond})
	if len(sum.Failed) != 1 || sum.Failed[0].Line != 1 {
		t.Fatalf("summary with too few attempts = %+v", sum)
	}
}

// sweep deletes every item whose TTL has passed at now, as DynamoDB's TTL
// may at any time after it (DynamoDB Local keeps them).
func sweep(t *testing.T, db *dynamodb.Client, table string, now time.Time) (deleted int) {
	t.Helper()
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			n, ok := it["ttl"].(*types.AttributeValueMemberN)
			if !ok {
				continue
			}
			if ttl, _ := strconv.ParseInt(n.Value, 10, 64); ttl > now.Unix() {
				continue
			}
			if _, err := db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(table),
				Key: map[string]types.AttributeValue{"PK": it["PK"], "SK": it["SK"]}}); err != nil {
				t.Fatal(err)
			}
			deleted++
		}
	}
	return deleted
}

// TestImportAgainAfterRetentionNeverSendsAgain: a reminder that expires
// 400 days after it is due is sent, then its import is run again at day
// 100 (after 90 days of retention) and after it expired. No item may have
// gone while its expiresAt is ahead, so the second import finds the sent
// delivery and writes nothing; past expiresAt, intake refuses it, and 90
// days later every item of it may go. Before, the delivery item expired 90
// days after its send and the import created it anew, pending: sent a
// second time.
func TestImportAgainAfterRetentionNeverSendsAgain(t *testing.T) {
	t.Parallel()
	db := standintest.DynamoDB(t)
	b := setupLocal(t, db)
	js := strings.Replace(good, `"deliveries"`, `"expiresAt":"2028-01-05T09:00:00Z","deliveries"`, 1)
	r := b.parse(t, js)
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(25 * time.Hour)
	k := r.Key(r.Deliveries[0])
	c, err := b.ledger.Claim(b.ctx, ledger.Claim{Key: k, Token: "t", LeaseUntil: b.clk.Now().Add(time.Minute), DueBy: b.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ledger.Complete(b.ctx, c, "receipt-1"); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(100 * 24 * time.Hour)
	if n := sweep(t, db, b.table, b.clk.Now()); n != 0 {
		t.Fatalf("%d items expired at day 100, 300 days before their reminder", n)
	}
	if got, err := b.store.Create(b.ctx, b.parse(t, js)); err != nil || got != schedule.Unchanged {
		t.Fatalf("import again at day 100: %q, %v; want unchanged", got, err)
	}
	if d, err := b.ledger.Get(b.ctx, k); err != nil || d.Status != ledger.StatusSent {
		t.Fatalf("after the second import the delivery is %+v, %v; want it still sent", d.Status, err)
	}
	// Past expiresAt intake refuses the reminder; 90 days later every item
	// of it may go, the reminder item with its deliveries.
	b.clk.Advance(r.ExpiresAt.Add(time.Second).Sub(b.clk.Now()))
	if _, err := b.store.Validator().ParseJSON([]byte(js)); err == nil || !strings.Contains(err.Error(), "has passed") {
		t.Fatalf("import after expiresAt: %v; want it refused", err)
	}
	if n := sweep(t, db, b.table, b.clk.Now().Add(90*24*time.Hour-time.Minute)); n != 0 {
		t.Fatalf("%d items expired before 90 days after expiresAt", n)
	}
	b.clk.Advance(r.ExpiresAt.Add(90*24*time.Hour + time.Second).Sub(b.clk.Now()))
	if n := sweep(t, db, b.table, b.clk.Now()); n != 2 {
		t.Fatalf("%d items expired 90 days after expiresAt, want the reminder item and its delivery", n)
	}
}

// TestARescheduledReminderIsNeverCreatedAgainByTTL: after reschedules —
// later, with a delivery in flight that is sent meanwhile, and earlier —
// no item of a reminder expires while its reminder item lives, and no TTL
// is lowered, so a create of the reminder run again finds every delivery
// and sends nothing twice (on DynamoDB Local, TTL deletion swept by hand).
func TestARescheduledReminderIsNeverCreatedAgainByTTL(t *testing.T) {
	t.Parallel()
	db := standintest.DynamoDB(t)
	b := setupLocal(t, db)
	js := `{"id":"rem-moved","accountRef":"a","dueAt":"2026-12-01T10:00:00Z","deliveries":[` +
		`{"channel":"sms","provider":"webhook","recipientRef":"r","templateRef":"t"},{"channel":"email","provider":"webhook","recipientRef":"r","templateRef":"t"}]}`
	r := b.parse(t, js)
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(25 * time.Hour)
	sms := r.Key(r.Deliveries[0])
	c, err := b.ledger.Claim(b.ctx, ledger.Claim{Key: sms, Token: "t", LeaseUntil: b.clk.Now().Add(time.Minute), DueBy: b.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	later := schedule.Times{DueAt: "2027-12-01T10:00:00Z"}
	res, err := b.store.Reschedule(b.ctx, r.ID, later, "")
	if err != nil || !res.Refused() {
		t.Fatalf("reschedule with the sms in flight: %+v, %v; want it refused for the sms", res, err)
	}
	if _, err := b.ledger.Complete(b.ctx, c, "receipt-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Reschedule(b.ctx, r.ID, later, ""); err != nil { // sent again: the sms is now sent
		t.Fatal(err)
	}
	moved := strings.Replace(js, "2026-12-01T10:00:00Z", later.DueAt, 1)
	// At day 200, long after the old expiry + 90 days: nothing may have gone.
	b.clk.Advance(200 * 24 * time.Hour)
	if n := sweep(t, db, b.table, b.clk.Now()); n != 0 {
		t.Fatalf("%d items expired at day 200, before the moved reminder's expiry", n)
	}
	if got, err := b.store.Create(b.ctx, b.parse(t, moved)); err != nil || got != schedule.Unchanged {
		t.Fatalf("the moved reminder created again: %q, %v; want unchanged", got, err)
	}
	if d, _ := b.ledger.Get(b.ctx, sms); d.Status != ledger.StatusSent {
		t.Fatalf("the sms is %s after the create again; want sent, once", d.Status)
	}
	// Moved earlier: no TTL is lowered, none below the reminder item's.
	before, err := b.ledger.ReadReminder(b.ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Reschedule(b.ctx, r.ID, schedule.Times{DueAt: b.clk.Now().Add(time.Hour).Format(time.RFC3339)}, ""); err != nil {
		t.Fatal(err)
	}
	after, err := b.ledger.ReadReminder(b.ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Reminder.TTL.Before(before.Reminder.TTL) {
		t.Errorf("the reminder item's TTL went down from %v to %v", before.Reminder.TTL, after.Reminder.TTL)
	}
	for i, d := range after.Deliveries {
		if d.TTL.Before(before.Deliveries[i].TTL) || d.TTL.Before(after.Reminder.TTL) {
			t.Errorf("%s TTL %v: was %v, the reminder item's is %v", d.Key(), d.TTL, before.Deliveries[i].TTL, after.Reminder.TTL)
		}
	}
}

// createdAndClaimed creates the good reminder, a day later claims its
// first delivery, and returns them.
func createdAndClaimed(t *testing.T) (bundle, schedule.Reminder, ledger.Delivery) {
	t.Helper()
	b := setup(t)
	r := b.parse(t, good)
	if _, err := b.store.Create(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(25 * time.Hour)
	k := r.Key(r.Deliveries[0])
	c, err := b.ledger.Claim(b.ctx, ledger.Claim{Key: k, Token: "t", LeaseUntil: b.clk.Now().Add(time.Minute), DueBy: b.clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return b, r, c
}

// TestADeadDeliveryIsNotRescheduled: a redrive would send a dead delivery
// at its old time, so a reschedule leaves it to the operator and says so.
func TestADeadDeliveryIsNotRescheduled(t *testing.T) {
	t.Parallel()
	b, r, c := createdAndClaimed(t)
	l := b.ledger.(interface {
		DeadLetter(ctx context.Context, d ledger.Delivery, f ledger.Failure) (ledger.Delivery, error)
	})
	if _, err := l.DeadLetter(b.ctx, c, ledger.Failure{Class: "rejected", Message: "400"}); err != nil {
		t.Fatal(err)
	}
	res, err := b.store.Reschedule(b.ctx, r.ID, schedule.Times{DueAt: b.clk.Now().Add(48 * time.Hour).Format(time.RFC3339)}, "")
	if err != nil || len(res.Deliveries) != 1 || !errors.Is(res.Deliveries[0].Refused, schedule.ErrDeadLettered) {
		t.Fatalf("reschedule of a dead delivery: %+v, %v", res, err)
	}
}

// TestADeliveryWaitingForTheProvidersRecordIsNotRescheduled: a delivery
// whose last attempt may have gone out and that waits for the provider's
// record (retrying, class ambiguous) is as good as in flight: moved, its
// next claim would not know to wait and could send it twice.
func TestADeliveryWaitingForTheProvidersRecordIsNotRescheduled(t *testing.T) {
	t.Parallel()
	b, r, c := createdAndClaimed(t)
	k := c.Key()
	l := b.ledger.(interface {
		AwaitRecord(ctx context.Context, d ledger.Delivery, w ledger.Await) (ledger.Delivery, error)
	})
	if _, err := l.AwaitRecord(b.ctx, c, ledger.Await{Note: "awaits webhook record", Next: b.clk.Now().Add(15 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	res, err := b.store.Reschedule(b.ctx, r.ID, schedule.Times{DueAt: b.clk.Now().Add(48 * time.Hour).Format(time.RFC3339)}, "")
	if err != nil || len(res.Deliveries) != 1 || !errors.Is(res.Deliveries[0].Refused, ledger.ErrLeased) {
		t.Fatalf("reschedule of a delivery waiting for the record: %+v, %v", res, err)
	}
	if d, err := b.ledger.Get(b.ctx, k); err != nil || d.Status != ledger.StatusRetrying || d.LastErrorClass != "ambiguous" {
		t.Fatalf("after the refused reschedule: %+v, %v; want it still waiting", d, err)
	}
}

// TestATimeAtTheStartOfYearOneLeavesNoOrphan: "0001-01-01T00:00:00.0004Z"
// truncates to Go's zero time; it is refused at validation, the ledger
// refuses a reminder item with such times, and a cancel finishes one
// written before they were refused.
func TestATimeAtTheStartOfYearOneLeavesNoOrphan(t *testing.T) {
	b := setup(t)
	_, err := b.store.Validator().ParseJSON([]byte(`{"id":"rem-y1","accountRef":"a","dueAt":"0001-01-01T00:00:00.0004Z","expiresAt":"2026-12-02T00:00:00Z",
		"deliveries":[{"channel":"sms","provider":"webhook","recipientRef":"r","templateRef":"t"}]}`))
	var ve *schedule.ValidationError
	if !errors.As(err, &ve) || ve.Field != "dueAt" || !strings.Contains(ve.Problem, "before 2000") {
		t.Fatalf("a year-1 dueAt: %v; want a validation error naming dueAt", err)
	}
	if _, _, err := b.ledger.CreateReminder(b.ctx, ledger.ReminderItem{ID: "rem-y1", AccountRef: "a", ExpiresAt: now.Add(time.Hour),
		Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"}}}); err == nil {
		t.Fatal("the ledger wrote a reminder item due at the zero time")
	}
	if st, _ := b.ledger.ReadReminder(b.ctx, "rem-y1"); !st.Empty() {
		t.Fatalf("an item was left: %+v", st)
	}
	// One written before (read here with year-1 times over an item written
	// with sane ones, its create cut off before any delivery): the cancel
	// writes its tombstone and answers.
	if _, _, err := b.ledger.CreateReminder(b.ctx, ledger.ReminderItem{ID: "rem-y1", AccountRef: "a", DueAt: now, ExpiresAt: now.Add(time.Hour),
		Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"}}}); err != nil {
		t.Fatal(err)
	}
	legacy := &legacyLedger{bundleLedger: b.ledger, r: ledger.ReminderItem{ID: "rem-y1", AccountRef: "a", ExpiresAt: now.Add(time.Hour),
		Deliveries: []ledger.ReminderDelivery{{Channel: "sms", Provider: "webhook", RecipientRef: "r", TemplateRef: "t"}}}}
	st, err := schedule.New(schedule.Config{Ledger: legacy, Clock: b.clk})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Cancel(b.ctx, "rem-y1", "by owner")
	if err != nil || len(res) != 1 || !res[0].Cancelled {
		t.Fatalf("cancel of a year-1 reminder item: %+v, %v", res, err)
	}
}

// legacyLedger reads a reminder item as an older version wrote it, with
// the deliveries the ledger has.
type legacyLedger struct {
	bundleLedger
	r ledger.ReminderItem
}

func (l *legacyLedger) ReadReminder(ctx context.Context, id string) (ledger.Stored, error) {
	s, err := l.bundleLedger.ReadReminder(ctx, id)
	if id == l.r.ID {
		r := l.r
		s.Reminder = &r
	}
	return s, err
}
