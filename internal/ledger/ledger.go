package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/text"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/failure"
)

// API is the part of the DynamoDB client the ledger uses.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// ErrExists is the reason Create refuses a delivery that already exists.
var ErrExists = errors.New("delivery already exists")

// ErrChanged is the reason Requeue refuses a delivery that changed since
// the caller read it.
var ErrChanged = errors.New("delivery changed since it was read")

// Config configures a Ledger.
type Config struct {
	// Table is the DynamoDB table name. Required.
	Table string
	// HistoryLimit is how many transitions a delivery item keeps; older
	// ones are dropped (the logs keep the full stream). Default 8: the last
	// four attempts, which keeps a delivery item under 1 KB so that each
	// transition costs one write unit (docs/ledger.md has the measurement).
	HistoryLimit int
	// Retention is how long every item of a reminder, its deliveries and
	// the reminder item alike, is kept after the reminder's expiresAt,
	// through the table's TTL attribute "ttl" (see Expiry). Default
	// DefaultRetention.
	Retention time.Duration
	// Shards is how many due index shards new deliveries spread over.
	// Default 8, at most 1000. It may grow, never shrink: the ledger records
	// the largest count it used (StoredShards) and the enqueue reads that
	// many.
	Shards int
	// ShardsFromRegistry makes the ledger take the shard count from the
	// table's registry, where the enqueue records the stack's, and never
	// write the registry itself: for the operator CLI, which the stack's
	// operator policy does not let write it, and which so cannot spread
	// deliveries over a count the stack does not read. Shards is then
	// unused; placing a delivery before any count is recorded fails with
	// ErrNoShardCount.
	ShardsFromRegistry bool
	// Lookahead is how long before dueAt a delivery may be handed to the
	// queue, which delays it until due. Default and maximum 15 minutes (the
	// longest SQS delay).
	Lookahead time.Duration
	// ClockSkew is how far this writer's clock may be off from the
	// functions' clocks, where it decides something for others. A delivery
	// it places in the due index gets a publish time no earlier than now +
	// ClockSkew, so that a clock behind by up to ClockSkew plus the
	// enqueue's settle never writes behind the enqueue's cursor; and a
	// lease counts as lapsed only ClockSkew after its leaseUntil, so that a
	// clock ahead never takes a delivery from a consumer still sending it.
	// Default 0: Lambda's clock is kept by the Amazon Time Sync Service. The
	// operator CLI uses OperatorClockSkew. At most 10 minutes.
	ClockSkew time.Duration
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
}

// OperatorClockSkew is the clock skew the operator CLI allows for: a
// laptop's clock may be a minute or so off.
const OperatorClockSkew = time.Minute

// Ledger is the delivery ledger. It is safe for concurrent use.
type Ledger struct {
	api API
	cfg Config

	mu       sync.Mutex
	units    Units
	shards   int  // the shard count new deliveries spread over
	recorded bool // shards is settled: recorded in the table, or read from it
}

// New validates cfg and returns a Ledger on api.
func New(api API, cfg Config) (*Ledger, error) {
	if api == nil {
		return nil, errors.New("ledger: DynamoDB client is nil")
	}
	if cfg.Table == "" {
		return nil, errors.New("ledger: table name is empty; set the ledger table (NUDGE_TABLE)")
	}
	if cfg.HistoryLimit == 0 {
		cfg.HistoryLimit = 8
	}
	if cfg.HistoryLimit < 2 {
		return nil, fmt.Errorf("ledger: history limit %d is below 2", cfg.HistoryLimit)
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Shards == 0 {
		cfg.Shards = 8
	}
	if cfg.Shards < 1 || cfg.Shards > 1000 {
		return nil, fmt.Errorf("ledger: %d shards; use 1 to 1000 (NUDGE_SHARDS)", cfg.Shards)
	}
	if cfg.Lookahead == 0 {
		cfg.Lookahead = MaxLookahead
	}
	if cfg.Lookahead < 0 || cfg.Lookahead > MaxLookahead {
		return nil, fmt.Errorf("ledger: lookahead %v is outside (0, %v]; SQS delays a message at most 15 minutes (NUDGE_LOOKAHEAD)", cfg.Lookahead, MaxLookahead)
	}
	if cfg.ClockSkew < 0 || cfg.ClockSkew > 10*time.Minute {
		return nil, fmt.Errorf("ledger: clock skew %v is outside [0, 10m]; a clock further off must be fixed, not allowed for", cfg.ClockSkew)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Ledger{api: api, cfg: cfg, shards: cfg.Shards}, nil
}

// Table returns the table name.
func (l *Ledger) Table() string { return l.cfg.Table }

// Shards returns the configured shard count.
func (l *Ledger) Shards() int { return l.cfg.Shards }

// Lookahead returns the configured lookahead.
func (l *Ledger) Lookahead() time.Duration { return l.cfg.Lookahead }

// DefaultRetention is how long a reminder's items are kept after its
// expiresAt unless the ledger is told otherwise.
const DefaultRetention = 90 * 24 * time.Hour

// Expiry is when DynamoDB may delete an item of a reminder expiring at
// expiresAt (the reminder item, or a delivery): Retention after expiresAt.
// A delivery's TTL is set when it is created. No item may go before
// expiresAt: while one exists, creating its reminder again (an old import
// run once more) finds it and writes nothing, and once expiresAt has passed
// intake refuses the reminder; so nothing is ever created, and sent, twice.
// A live delivery past expiresAt can never be claimed, so its item may go
// too.
func (l *Ledger) Expiry(expiresAt time.Time) time.Time {
	return Expiry(time.Time{}, expiresAt, l.cfg.Retention)
}

// Expiry is when an item of a reminder expiring at expiresAt may be deleted
// with the given retention: retention after expiresAt, or after ended if it
// ended later.
func Expiry(ended, expiresAt time.Time, retention time.Duration) time.Time {
	return later(ended, expiresAt).Add(retention).Truncate(time.Second)
}

// publishAt is when a delivery due at dueAt, placed in the index now, may be
// handed off: PublishAt, allowing for this writer's clock skew.
func (l *Ledger) publishAt(dueAt, now time.Time) time.Time {
	return publishTime(dueAt, now.Add(l.cfg.ClockSkew), l.cfg.Lookahead)
}

// lapsedBefore is the leaseUntil before which a lease counts as lapsed at
// now, allowing for this writer's clock skew.
func (l *Ledger) lapsedBefore(now time.Time) time.Time { return now.Add(-l.cfg.ClockSkew) }

// Units are the write capacity units DynamoDB reported for a ledger's
// writes so far, by the items written.
type Units struct {
	Deliveries float64 // delivery items and their due index entries
	Reminders  float64 // reminder and series items (a series' claim of its id too)
	Cursors    float64 // the enqueue's cursors
}

// WriteUnits returns the write capacity units DynamoDB reported for this
// ledger's delivery writes so far.
func (l *Ledger) WriteUnits() float64 { return l.Units().Deliveries }

// Units returns the write units of every kind so far.
func (l *Ledger) Units() Units {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.units
}

// count adds what a delivery write consumed.
func (l *Ledger) count(cc *types.ConsumedCapacity) { l.countTo(&l.units.Deliveries, cc) }

func (l *Ledger) countTo(dst *float64, cc *types.ConsumedCapacity) {
	if cc == nil || cc.CapacityUnits == nil {
		return
	}
	l.mu.Lock()
	*dst += *cc.CapacityUnits
	l.mu.Unlock()
}

// Create writes a new pending delivery and enters it in the due index; it
// refuses (ErrExists, with the stored delivery) if the key is taken. Status
// defaults to pending; a held one (a fallback) enters no index until
// TakeFallback takes it. Its TTL is Expiry(ExpiresAt), or d.TTL if that is
// later (a held fallback is kept as long as its siblings).
func (l *Ledger) Create(ctx context.Context, d Delivery) error {
	if err := d.Key().Validate(); err != nil {
		return fmt.Errorf("ledger: create: %w", err)
	}
	if d.DueAt.IsZero() || d.ExpiresAt.IsZero() || !d.ExpiresAt.After(d.DueAt) {
		return fmt.Errorf("ledger: create %s: dueAt and expiresAt must be set and expiresAt after dueAt", d.Key())
	}
	now := l.cfg.Clock.Now()
	if d.Status == "" {
		d.Status = StatusPending
	}
	d.UpdatedAt = now
	if len(d.History) == 0 {
		d.History = []Entry{{At: Format(now), Status: d.Status}}
	}
	shards, err := l.shardCount(ctx)
	if err != nil {
		return err
	}
	var shard, sort string
	d.TTL = later(d.TTL, l.Expiry(d.ExpiresAt))
	switch {
	case d.Status == StatusHeld: // a fallback: in no index until taken
	case !d.Status.Terminal():
		shard, sort = ShardKey(ShardOf(d.ReminderID, shards)), indexSort(l.publishAt(d.DueAt, now), d.Key(), d.HandOff)
	default:
		d.TTL = Expiry(now, d.ExpiresAt, l.cfg.Retention)
	}
	av, err := toItem(d, shard, sort)
	if err != nil {
		return err
	}
	out, err := l.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(l.cfg.Table),
		Item:                                av,
		ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			cur, _ := fromItem(ccf.Item)
			return &RefusedError{Op: "create", Key: d.Key(), Reason: ErrExists, Current: cur}
		}
		return fmt.Errorf("ledger: create %s: %w", d.Key(), err)
	}
	l.count(out.ConsumedCapacity)
	return nil
}

// Get reads a delivery with a strongly consistent read.
func (l *Ledger) Get(ctx context.Context, key message.DeliveryKey) (Delivery, error) {
	out, err := l.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(l.cfg.Table),
		Key:            keyAttrs(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Delivery{}, fmt.Errorf("ledger: get %s: %w", key, err)
	}
	if len(out.Item) == 0 {
		return Delivery{}, &RefusedError{Op: "get", Key: key, Reason: ErrNotFound}
	}
	return fromItem(out.Item)
}

// GetMany reads up to 100 deliveries with strongly consistent reads, in one
// BatchGetItem (and more for keys DynamoDB leaves unprocessed). Keys with
// no item are absent from the result.
func (l *Ledger) GetMany(ctx context.Context, keys []message.DeliveryKey) (map[message.DeliveryKey]Delivery, error) {
	if len(keys) > 100 {
		return nil, fmt.Errorf("ledger: get %d deliveries at once; the limit is 100", len(keys))
	}
	out := make(map[message.DeliveryKey]Delivery, len(keys))
	req := &types.KeysAndAttributes{ConsistentRead: aws.Bool(true)}
	for _, k := range keys {
		req.Keys = append(req.Keys, keyAttrs(k))
	}
	err := l.batchGet(ctx, req, "deliveries", func(it map[string]types.AttributeValue) error {
		d, err := fromItem(it)
		if err != nil {
			return err
		}
		out[d.Key()] = d
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// batchGet reads the items req names, in one BatchGetItem and more for
// the keys DynamoDB leaves unprocessed (eight reads at most, with a
// growing pause between), handing each item to each; what names the items
// in errors ("deliveries").
func (l *Ledger) batchGet(ctx context.Context, req *types.KeysAndAttributes, what string, each func(map[string]types.AttributeValue) error) error {
	for attempt := 0; len(req.Keys) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(time.Duration(attempt*attempt) * 50 * time.Millisecond): // wall clock: a pause for DynamoDB to recover, which must pass under a stopped test clock too
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if attempt == 8 {
			return fmt.Errorf("ledger: %d %s stayed unprocessed after %d reads; DynamoDB is throttling", len(req.Keys), what, attempt)
		}
		res, err := l.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{l.cfg.Table: *req}})
		if err != nil {
			return fmt.Errorf("ledger: get %d %s: %w", len(req.Keys), what, err)
		}
		for _, it := range res.Responses[l.cfg.Table] {
			if err := each(it); err != nil {
				return err
			}
		}
		req.Keys = res.UnprocessedKeys[l.cfg.Table].Keys
	}
	return nil
}

// Claim is a request to start a delivery attempt.
type Claim struct {
	Key message.DeliveryKey
	// Token identifies this attempt; later writes must present it.
	Token string
	// LeaseUntil is when the claim lapses if this consumer dies.
	LeaseUntil time.Time
	// DueBy is the latest dueAt that may be claimed now: the consumer's
	// now, once it has held a record that came a moment early until due.
	DueBy time.Time
	// Revive is set for a message that came back from the DLQ (it carries
	// the consumer's dead-letter attributes: a console redrive). Only such
	// a claim may take a dead delivery, and taking it restarts the attempt
	// budget (BudgetFrom); any other copy of a dead delivery's message is
	// refused with ErrFinished, so a late duplicate never revives what was
	// dead-lettered for review.
	Revive bool
	// ReviveAttempts, if above 0, is the delivery's attempt count its dead
	// letter recorded (nudge-attempts): the revive takes the delivery only
	// while it still has that count, so that a second DLQ copy of the same
	// dead-lettering, redriven after the first was sent and dead-lettered
	// again, is refused with ErrFinished instead of sending once more.
	ReviveAttempts int
}

// Claim moves a delivery to sending under a lease and returns it as it now
// is. It succeeds from pending, queued, retrying or (with c.Revive) dead, or
// from sending whose lease has lapsed, and only if the delivery is due by
// c.DueBy and not expired. Otherwise it returns a *RefusedError with reason
// ErrAlreadySent, ErrFinished, ErrLeased, ErrExpired, ErrNotDue or
// ErrNotFound, and the delivery as it was. A revive of a dead primary whose
// fallback was taken (FallbackTaken) is refused with ErrFallbackTaken: the
// fallback stands in for it.
//
// With c.Revive, a claim refused because the delivery is dead is followed
// by a second write that takes the dead delivery and restarts its attempt
// budget: two requests on that rare path (a console redrive), one on every
// other.
func (l *Ledger) Claim(ctx context.Context, c Claim) (Delivery, error) {
	if c.Token == "" {
		return Delivery{}, errors.New("ledger: claim without a token")
	}
	d, err := l.claim(ctx, c, false)
	var re *RefusedError
	if c.Revive && errors.As(err, &re) && re.Current.Status == StatusDead {
		return l.claim(ctx, c, true)
	}
	return d, err
}

// claim is one claim write: of a dead delivery (revive), or of a live one.
func (l *Ledger) claim(ctx context.Context, c Claim, revive bool) (Delivery, error) {
	now := l.cfg.Clock.Now()
	u := l.newUpdate("claim", c.Key, now)
	u.set("#status", ":sending", StatusSending)
	u.set("claimToken", ":token", c.Token)
	u.set("leaseUntil", ":lease", Format(c.LeaseUntil))
	u.add("attempts", ":one", 1)
	u.remove("repairs") // the hand-off worked
	u.history(Delivery{}, Entry{Status: StatusSending})
	u.values[":dueBy"] = sv(Format(c.DueBy))
	if revive {
		// attempts is read before the update applies: the budget restarts
		// from the attempts made before this one.
		u.sets = append(u.sets, "budgetFrom = if_not_exists(attempts, :zero)")
		u.values[":zero"], u.values[":dead"] = av(0), sv(StatusDead)
		// A primary whose fallback was taken is never sent after it.
		u.cond = "attribute_exists(PK) AND #status = :dead AND attribute_not_exists(" + attrFallbackTaken + ") AND dueAt <= :dueBy AND expiresAt > :now"
	} else {
		u.values[":pending"], u.values[":queued"], u.values[":retrying"] = sv(StatusPending), sv(StatusQueued), sv(StatusRetrying)
		u.values[":lapsed"] = sv(Format(l.lapsedBefore(now)))
		u.cond = "attribute_exists(PK) AND (#status IN (:pending, :queued, :retrying) OR (#status = :sending AND leaseUntil < :lapsed)) AND dueAt <= :dueBy AND expiresAt > :now"
	}
	if revive && c.ReviveAttempts > 0 {
		u.values[":reviveAttempts"] = av(c.ReviveAttempts)
		u.cond += " AND attempts = :reviveAttempts"
	}
	return l.write(ctx, u, func(old Delivery) error { return claimRefusal(old, now, l.lapsedBefore(now), c, revive) })
}

// Complete records that the provider accepted the claimed delivery d. It
// refuses with ErrAlreadySent if another attempt recorded the send first,
// or ErrLeaseLost if d's lease is no longer held.
func (l *Ledger) Complete(ctx context.Context, d Delivery, receipt string) (Delivery, error) {
	now := l.cfg.Clock.Now()
	u := l.newUpdate("complete", d.Key(), now)
	u.set("#status", ":sent", StatusSent)
	u.set("sentAt", ":now", nil)
	u.set("receipt", ":receipt", text.Clip(receipt, MaxReceipt))
	u.terminal(Expiry(now, d.ExpiresAt, l.cfg.Retention))
	u.remove("claimToken", "leaseUntil", "nextAttemptAt")
	u.history(d, Entry{Status: StatusSent, Attempt: d.Attempts, Note: text.Clip(receipt, 80)})
	u.holdsLease(d)
	return l.write(ctx, u, leaseRefusal)
}

// MaxReceipt is the most of a provider's receipt a delivery item keeps, in
// bytes: a receipt is an identifier, and the item must stay under 1 KB.
const MaxReceipt = 256

// RetryNote is the history note of a retry: the wait, which is shorter
// than the time it ends at and keeps the item under 1 KB.
func RetryNote(now, next time.Time) string {
	return "in " + next.Sub(now).Round(time.Second).String()
}

// Failure describes a failed attempt.
type Failure struct {
	// Class is the error class (failure.Class…).
	Class failure.Class
	// Message is a short description, free of recipient data.
	Message string
	// NextAttemptAt is when the retry is expected, for Retry.
	NextAttemptAt time.Time
}

// Retry records a transient failure of the claimed delivery d: it moves to
// retrying, releasing the lease.
func (l *Ledger) Retry(ctx context.Context, d Delivery, f Failure) (Delivery, error) {
	now := l.cfg.Clock.Now()
	u := l.newUpdate("retry", d.Key(), now)
	u.set("#status", ":retrying", StatusRetrying)
	u.set("lastErrorClass", ":class", f.Class)
	u.set("lastError", ":error", text.Clip(f.Message, 500))
	u.set("nextAttemptAt", ":next", Format(f.NextAttemptAt))
	u.remove("claimToken", "leaseUntil")
	u.history(d, Entry{Status: StatusRetrying, Attempt: d.Attempts, Class: f.Class, Note: RetryNote(now, f.NextAttemptAt)})
	u.holdsLease(d)
	return l.write(ctx, u, leaseRefusal)
}

// DeadLetter records that d will not be retried. d is either the claimed
// delivery (its token proves the lease) or a delivery this consumer did not
// claim, which must then not be in flight elsewhere. It refuses with
// ErrAlreadySent, ErrFinished or ErrLeased.
//
// Like every terminal transition it takes d out of the due index, so the
// enqueue's overdue scan no longer watches it; a redrive that hands it back
// to the queue (the operator CLI's) must also enter it in the index again.
func (l *Ledger) DeadLetter(ctx context.Context, d Delivery, f Failure) (Delivery, error) {
	now := l.cfg.Clock.Now()
	u := l.newUpdate("dead-letter", d.Key(), now)
	u.set("#status", ":dead", StatusDead)
	u.set("lastErrorClass", ":class", f.Class)
	u.set("lastError", ":error", text.Clip(f.Message, 500))
	u.terminal(Expiry(now, d.ExpiresAt, l.cfg.Retention))
	u.remove("claimToken", "leaseUntil", "nextAttemptAt")
	u.history(d, Entry{Status: StatusDead, Attempt: d.Attempts, Class: f.Class, Note: text.Clip(f.Message, 120)})
	u.live(d)
	return l.write(ctx, u, liveRefusal)
}

// Expire records that the delivery d names passed its expiresAt unsent.
// d is as the caller read it (the overdue scan's read, or a refused
// claim's item): its claim token is never taken for a lease, so a
// delivery that a consumer is sending now is refused with ErrLeased, and
// only the holder's Complete or Retry ends it. The write holds only if the
// stored expiresAt has passed: a reschedule landing after the read is
// refused with ErrNotExpired, not recorded expired. A delivery whose last
// attempt started and never recorded its end (UnendedAttempt) is expired
// with that said (class ambiguous): it may have been sent.
func (l *Ledger) Expire(ctx context.Context, d Delivery) (Delivery, error) {
	return l.endUnsent(ctx, "expire", d.Key(), StatusExpired, "expiresAt "+Format(d.ExpiresAt),
		func(now time.Time) time.Time { return Expiry(now, d.ExpiresAt, l.cfg.Retention) },
		"attribute_exists(PK) AND NOT (#status IN (:sent, :dead, :expired, :cancelled, :held))"+
			" AND (#status <> :sending OR leaseUntil < :lapsed) AND expiresAt <= :now",
		expireRefusal)
}

// Cancel ends a delivery that has not been sent: it becomes cancelled and
// leaves the due index. A dead one is cancelled too, so that no redrive
// (the CLI's or the console's) sends it after its owner cancelled it. It
// refuses with ErrAlreadySent, ErrFinished (expired, or cancelled already),
// or ErrLeased while a consumer holds it (the send may be under way). One
// whose last attempt never recorded its end is cancelled with that said
// (UnendedAttempt): that attempt may have gone out.
func (l *Ledger) Cancel(ctx context.Context, key message.DeliveryKey, note string) (Delivery, error) {
	return l.endUnsent(ctx, "cancel", key, StatusCancelled, note,
		func(now time.Time) time.Time { return Expiry(now, time.Time{}, l.cfg.Retention) },
		"attribute_exists(PK) AND NOT (#status IN (:sent, :expired, :cancelled)) AND (#status <> :sending OR leaseUntil < :lapsed)",
		cancelRefusal)
}

// unendedCond holds for a delivery whose last attempt started and never
// recorded an end: Delivery.unended, as a DynamoDB condition.
const unendedCond = "((#status = :sending AND leaseUntil < :lapsed)" +
	" OR (#status IN (:pending, :queued, :retrying) AND unendedAttempt = attempts AND (attribute_not_exists(budgetFrom) OR unendedAttempt > budgetFrom))" +
	" OR (#status IN (:dead, :retrying) AND lastErrorClass = :ambiguous))"

// errAgain is the internal reason an end was refused that another write
// takes: the delivery has an unended attempt (or no longer has one), and
// is ended by the write that says so (or by the plain one).
var errAgain = errors.New("written again")

// endUnsent ends a delivery unsent (to expired or cancelled) with one
// conditional write, cond; or, for one whose last attempt never recorded
// its end, with a second write that records that attempt (class
// ambiguous) in the history and lastErrorClass. refusal says why cond
// failed from the item as it was, nil if it held but for the unended
// attempt.
func (l *Ledger) endUnsent(ctx context.Context, op string, key message.DeliveryKey, to Status, note string, expiry func(now time.Time) time.Time,
	cond string, refusal func(old Delivery, now, lapsedBefore time.Time) error) (Delivery, error) {
	unended, attempts := 0, 0
	for range 3 {
		now := l.cfg.Clock.Now()
		u := l.newUpdate(op, key, now)
		u.set("#status", ":to", to)
		u.terminal(expiry(now))
		u.remove("claimToken", "leaseUntil", "nextAttemptAt")
		e := Entry{Status: to, Note: text.Clip(note, 120)}
		for _, s := range []Status{StatusSent, StatusDead, StatusExpired, StatusCancelled, StatusSending, StatusPending, StatusQueued, StatusRetrying} {
			u.values[":"+string(s)] = sv(s)
		}
		if strings.Contains(cond, ":held") {
			u.values[":held"] = sv(StatusHeld)
		}
		u.values[":lapsed"], u.values[":ambiguous"] = sv(Format(u.lapsed)), sv(failure.ClassAmbiguous)
		if unended == 0 {
			u.cond = cond + " AND NOT " + unendedCond
		} else {
			e.Attempt, e.Class, e.Note = unended, failure.ClassAmbiguous, text.Clip(UnendedNote(unended)+"; "+note, 120)
			u.set("lastErrorClass", ":ambiguous", nil)
			u.values[":attempts"] = av(attempts)
			u.cond = cond + " AND " + unendedCond + " AND attempts = :attempts"
		}
		u.history(Delivery{}, e)
		d, err := l.write(ctx, u, func(old Delivery) error {
			if err := refusal(old, ms(now), ms(u.lapsed)); err != nil {
				return err
			}
			unended, attempts = old.unended(ms(u.lapsed)), old.Attempts
			return errAgain
		})
		if !errors.Is(err, errAgain) {
			return d, err
		}
	}
	return Delivery{}, &RefusedError{Op: op, Key: key, Reason: ErrChanged}
}

// Release hands a delivery that is not yet due back to the calendar: it
// becomes pending again, and its due index entry moves to its new publish
// time, max(dueAt − Lookahead, now), which is ahead of any enqueue cursor,
// unmarked (a writer whose hand-off failed releases it so).
// dueAt must be the delivery's own. It refuses with ErrNotReleasable unless
// the delivery is pending, queued or retrying with that dueAt.
func (l *Ledger) Release(ctx context.Context, key message.DeliveryKey, dueAt time.Time, note string) (Delivery, error) {
	return l.release(ctx, "release", key, dueAt, note, false)
}

// GiveBack is Release for a writer whose short-notice hand-off failed
// (Delivery.HandOff): only a delivery still pending at dueAt and never
// claimed goes back to the calendar, unmarked. One a consumer has claimed
// meanwhile (the publish failed after SQS took the message) is left as it
// is: refused with ErrNotReleasable.
func (l *Ledger) GiveBack(ctx context.Context, key message.DeliveryKey, dueAt time.Time, note string) (Delivery, error) {
	return l.release(ctx, "give back", key, dueAt, note, true)
}

// release puts a delivery back in the due index at its publish time,
// unmarked, pending: from pending, queued or retrying, or, unclaimed, from
// pending never claimed.
func (l *Ledger) release(ctx context.Context, op string, key message.DeliveryKey, dueAt time.Time, note string, unclaimed bool) (Delivery, error) {
	shards, err := l.shardCount(ctx)
	if err != nil {
		return Delivery{}, err
	}
	now := l.cfg.Clock.Now()
	u := l.newUpdate(op, key, now)
	u.set("#status", ":pending", StatusPending)
	u.set(attrDueSort, ":sort", IndexSort(l.publishAt(dueAt, now), key))
	// Its shard stays; a delivery a revive took out of the index gets one
	// again, so that it is back in the index whole.
	u.sets = append(u.sets, attrDueShard+" = if_not_exists("+attrDueShard+", :shard)")
	u.values[":shard"] = sv(ShardKey(ShardOf(key.ReminderID, shards)))
	u.history(Delivery{}, Entry{Status: StatusPending, Note: text.Clip(note, 120)})
	u.values[":dueAt"] = sv(Format(dueAt))
	if unclaimed {
		u.values[":zero"] = av(0)
		u.cond = "attribute_exists(PK) AND #status = :pending AND dueAt = :dueAt AND (attribute_not_exists(attempts) OR attempts = :zero)"
	} else {
		u.values[":queued"], u.values[":retrying"] = sv(StatusQueued), sv(StatusRetrying)
		u.cond = "attribute_exists(PK) AND #status IN (:pending, :queued, :retrying) AND dueAt = :dueAt"
	}
	return l.write(ctx, u, releaseRefusal)
}

// Requeue records that the enqueue handed d to the queue again because its
// earlier hand-off was lost: d becomes queued, with updatedAt as the time
// of the hand-off. d must be as the caller read it (status and updatedAt
// unchanged since), so that of two concurrent enqueue runs only one hands
// it off; the other gets ErrChanged, or ErrAlreadySent or ErrFinished.
func (l *Ledger) Requeue(ctx context.Context, d Delivery, note string) (Delivery, error) {
	now := l.cfg.Clock.Now()
	u := l.newUpdate("requeue", d.Key(), now)
	u.set("#status", ":queued", StatusQueued)
	u.add("repairs", ":one", 1)
	if d.Status == StatusSending {
		// The attempt that holds it never ended: the next claim must know.
		u.set("unendedAttempt", ":unended", d.Attempts)
	}
	u.history(Delivery{}, Entry{Status: StatusQueued, Attempt: d.Attempts, Note: text.Clip(note, 120)})
	u.values[":was"], u.values[":wasAt"] = sv(d.Status), sv(formatOpt(d.UpdatedAt))
	u.cond = "attribute_exists(PK) AND #status = :was AND updatedAt = :wasAt"
	return l.write(ctx, u, requeueRefusal)
}

// The reasons a refused write gives, from the item as it was: shared by the
// DynamoDB ledger and Memory, so that both refuse alike.

// claimRefusal says why a claim due by dueBy was refused at now, with
// leases ending before lapsedBefore counted as lapsed.
func claimRefusal(old Delivery, now, lapsedBefore time.Time, c Claim, revive bool) error {
	dueBy := c.DueBy
	switch {
	case old.Status == StatusSent:
		return ErrAlreadySent
	case old.Status == StatusCancelled || old.Status == StatusExpired || old.Status == StatusDead && !revive:
		return ErrFinished
	case old.Status == StatusDead && !old.FallbackTaken.IsZero():
		return ErrFallbackTaken
	case old.Status == StatusDead && c.ReviveAttempts > 0 && old.Attempts != c.ReviveAttempts:
		// A copy of an earlier dead-lettering: the delivery was revived
		// and ended again since.
		return ErrFinished
	case old.Status == StatusHeld:
		return ErrHeld
	case !old.ExpiresAt.After(now):
		return ErrExpired
	case old.Status == StatusSending && !old.LeaseUntil.Before(lapsedBefore):
		return ErrLeased
	case old.DueAt.After(dueBy):
		return ErrNotDue
	}
	return fmt.Errorf("unexpected state %q", old.Status)
}

// leaseRefusal says why a write that needed the writer's lease (Complete,
// Retry) was refused.
func leaseRefusal(old Delivery) error {
	if old.Status == StatusSent {
		return ErrAlreadySent
	}
	return ErrLeaseLost
}

// liveRefusal says why a write that needed an unfinished delivery not in
// flight elsewhere (DeadLetter, Expire) was refused.
func liveRefusal(old Delivery) error {
	switch {
	case old.Status == StatusSent:
		return ErrAlreadySent
	case old.Status == StatusHeld:
		return ErrHeld
	case old.Status.Terminal():
		return ErrFinished
	case old.Status == StatusSending:
		return ErrLeased
	}
	return fmt.Errorf("unexpected state %q", old.Status)
}

// expireRefusal says why an Expire was refused at now, with leases ending
// before lapsedBefore counted as lapsed; nil if only an unended attempt
// (or its absence) stood in the way.
func expireRefusal(old Delivery, now, lapsedBefore time.Time) error {
	if err := cancelRefusal(old, now, lapsedBefore); err != nil {
		return err
	}
	switch {
	case old.Status == StatusDead:
		return ErrFinished
	case old.Status == StatusHeld:
		return ErrHeld // its primary's end takes it, or expires with it
	case old.ExpiresAt.After(now):
		return ErrNotExpired
	}
	return nil
}

// cancelRefusal says why a Cancel was refused, as expireRefusal.
func cancelRefusal(old Delivery, _, lapsedBefore time.Time) error {
	switch {
	case old.Status == StatusSent:
		return ErrAlreadySent
	case old.Status == StatusExpired || old.Status == StatusCancelled:
		return ErrFinished
	case old.Status == StatusSending && !old.LeaseUntil.Before(lapsedBefore):
		return ErrLeased
	}
	return nil
}

// requeueRefusal says why a Requeue was refused.
func requeueRefusal(old Delivery) error {
	switch {
	case old.Status == StatusSent:
		return ErrAlreadySent
	case old.Status.Terminal():
		return ErrFinished
	}
	return ErrChanged
}

// releaseRefusal says why a Release was refused.
func releaseRefusal(old Delivery) error {
	if old.Status == StatusSent {
		return ErrAlreadySent
	}
	return ErrNotReleasable
}

// update builds one conditional UpdateItem.
type update struct {
	op      string
	key     message.DeliveryKey
	sets    []string
	adds    []string
	removes []string
	cond    string
	names   map[string]string
	values  map[string]types.AttributeValue
	limit   int
	now     time.Time
	lapsed  time.Time // leases ending before this have lapsed
}

func (l *Ledger) newUpdate(op string, key message.DeliveryKey, now time.Time) *update {
	u := &update{
		op: op, key: key, limit: l.cfg.HistoryLimit, now: now, lapsed: l.lapsedBefore(now),
		names:  map[string]string{"#status": "status"},
		values: map[string]types.AttributeValue{":now": sv(Format(now))},
	}
	u.sets = append(u.sets, "updatedAt = :now")
	return u
}

func (u *update) set(attr, placeholder string, v any) {
	u.sets = append(u.sets, attr+" = "+placeholder)
	if v != nil {
		u.values[placeholder] = av(v)
	}
}

func (u *update) add(attr, placeholder string, v any) {
	u.adds = append(u.adds, attr+" "+placeholder)
	u.values[placeholder] = av(v)
}

func (u *update) remove(attrs ...string) { u.removes = append(u.removes, attrs...) }

// terminal takes the delivery out of the due index. Its TTL was set when it
// was created; an item written before that has none, and gets expiry
// (retention after the end, or after expiresAt when the writer knows it).
func (u *update) terminal(expiry time.Time) {
	u.names["#ttl"] = attrTTL // a reserved word
	u.sets = append(u.sets, "#ttl = if_not_exists(#ttl, :ttl)")
	u.values[":ttl"] = av(expiry.Unix())
	u.remove(attrDueShard, attrDueSort)
}

// history appends e. When d is a delivery this consumer claimed (it has a
// token and its history), the list is rewritten to the last limit entries;
// the lease condition guarantees no one else changed it meanwhile.
func (u *update) history(d Delivery, e Entry) {
	e.At = Format(u.now)
	if d.ClaimToken != "" && len(d.History)+1 > u.limit {
		kept := append(append([]Entry{}, d.History[len(d.History)-(u.limit-1):]...), e)
		u.set("history", ":history", kept)
		return
	}
	u.sets = append(u.sets, "history = list_append(if_not_exists(history, :noHistory), :entry)")
	u.values[":noHistory"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	u.values[":entry"] = av([]Entry{e})
}

// holdsLease requires d's claim to be current.
func (u *update) holdsLease(d Delivery) {
	u.values[":sending"] = sv(StatusSending)
	u.values[":token"] = sv(d.ClaimToken)
	u.cond = "#status = :sending AND claimToken = :token"
}

// live requires the delivery to be unfinished, not held, and not in flight
// elsewhere.
func (u *update) live(d Delivery) {
	token := d.ClaimToken
	if token == "" {
		token = "-" // matches no claim
	}
	for _, s := range []Status{StatusSent, StatusDead, StatusExpired, StatusCancelled, StatusSending, StatusHeld} {
		u.values[":"+string(s)] = sv(s)
	}
	u.values[":token"] = sv(token)
	u.values[":lapsed"] = sv(Format(u.lapsed))
	u.cond = "attribute_exists(PK) AND NOT (#status IN (:sent, :dead, :expired, :cancelled, :held))" +
		" AND (#status <> :sending OR claimToken = :token OR leaseUntil < :lapsed)"
}

func (l *Ledger) write(ctx context.Context, u *update, refusal func(old Delivery) error) (Delivery, error) {
	expr := "SET " + strings.Join(u.sets, ", ")
	if len(u.adds) > 0 {
		expr += " ADD " + strings.Join(u.adds, ", ")
	}
	if len(u.removes) > 0 {
		expr += " REMOVE " + strings.Join(u.removes, ", ")
	}
	out, err := l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(l.cfg.Table),
		Key:                                 keyAttrs(u.key),
		UpdateExpression:                    aws.String(expr),
		ConditionExpression:                 aws.String(u.cond),
		ExpressionAttributeNames:            maps.Clone(u.names),
		ExpressionAttributeValues:           u.values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return Delivery{}, fmt.Errorf("ledger: %s %s: %w", u.op, u.key, err)
		}
		if len(ccf.Item) == 0 {
			return Delivery{}, &RefusedError{Op: u.op, Key: u.key, Reason: ErrNotFound}
		}
		old, perr := fromItem(ccf.Item)
		if perr != nil {
			return Delivery{}, perr
		}
		return Delivery{}, &RefusedError{Op: u.op, Key: u.key, Reason: refusal(old), Current: old}
	}
	l.count(out.ConsumedCapacity)
	return fromItem(out.Attributes)
}

func sv[T ~string](s T) types.AttributeValue { return &types.AttributeValueMemberS{Value: string(s)} }

func av(v any) types.AttributeValue {
	a, err := attributevalue.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ledger: cannot marshal %T: %v", v, err)) // only fixed internal types reach here
	}
	return a
}
