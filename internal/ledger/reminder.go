package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/message"
)

// ReminderItem is the reminder item: a reminder as the intake accepted it
// (pkg/schedule validates it, and converts its own Reminder to and from
// this), stored as one item beside its deliveries, in the reminder's
// partition, so that a repeated create can be compared with it. It is the
// table's shape only: the API's is schedule.Reminder.
type ReminderItem struct {
	ID         string             `dynamodbav:"reminderId"`
	AccountRef string             `dynamodbav:"accountRef"`
	DueAt      time.Time          `dynamodbav:"-"` // stored Format'ed (reminderRecord)
	ExpiresAt  time.Time          `dynamodbav:"-"` // stored Format'ed (reminderRecord)
	Deliveries []ReminderDelivery `dynamodbav:"deliveries"`
	Metadata   map[string]string  `dynamodbav:"metadata,omitempty"`
	// Late is the reminder's late policy; the zero rule is the default,
	// expire. Stored as attributes "late" and "lateWithin" (seconds),
	// absent for the default (reminderRecord). Not in the account index.
	Late LateRule `dynamodbav:"-"`
	// Local is the reminder's zone and local times as its caller gave
	// them; zero for a reminder given in absolute times only. Stored as
	// attributes "timeZone", "dueLocal" and "expiresLocal", each absent
	// where empty. Not in the account index.
	Local Local `dynamodbav:"-"`
	// Recur is, on a series item (Series.Item), the RFC 5545 rule its
	// occurrences follow (pkg/recur's canonical text); empty on a
	// reminder item. Attribute "recur".
	Recur string `dynamodbav:"recur,omitempty"`
	// Series is, on an occurrence of a series, the series' id; empty on
	// any other reminder. Attribute "series".
	Series string `dynamodbav:"series,omitempty"`
	// CreatedBy is the principal that created the reminder through the
	// API (the intake's caller: an IAM role or user), which alone may act
	// on it there, besides the stage's full-access principals. Empty for a
	// reminder the operator's CLI created, and for one created before the
	// intake recorded it: only full-access principals act on those through
	// the API (docs/api.md#who-sees-what). Written once, with the item.
	CreatedBy string `dynamodbav:"createdBy,omitempty"`
	// TTL is when DynamoDB may delete the reminder item, as read (zero:
	// never, or not read).
	TTL time.Time `dynamodbav:"-"`
}

// Local is a reminder's local times: the recipient's IANA zone
// ("Europe/Berlin") and the wall-clock due and expiry times the caller gave
// in it ("2027-03-28T02:30", pkg/localtime's form), each empty where the
// caller gave an absolute time. DueAt and ExpiresAt are always the
// instants, computed from these where given.
type Local struct {
	TimeZone     string
	DueLocal     string
	ExpiresLocal string
}

// IsZero reports whether l holds nothing.
func (l Local) IsZero() bool { return l == Local{} }

// ReminderDelivery is one delivery a ReminderItem lists. It has no
// address: a recipient's address (SES) is kept on the delivery item alone
// (Delivery.Address), never on the reminder item.
type ReminderDelivery struct {
	Channel      string `dynamodbav:"channel"`
	Provider     string `dynamodbav:"provider"`
	RecipientRef string `dynamodbav:"recipientRef"`
	TemplateRef  string `dynamodbav:"templateRef"`
	// Fallback is the delivery taken if this one fails (a held delivery
	// item beside it, FallbackOf this one); nil if none.
	Fallback *ReminderFallback `dynamodbav:"fallback,omitempty"`
	// Window is its send window, as Delivery.Window; empty for none.
	Window string `dynamodbav:"window,omitempty"`
}

// ReminderFallback is a ReminderDelivery's fallback, without its address
// (kept on its delivery item alone, as a delivery's is).
type ReminderFallback struct {
	Channel      string `dynamodbav:"channel"`
	Provider     string `dynamodbav:"provider"`
	RecipientRef string `dynamodbav:"recipientRef"`
	TemplateRef  string `dynamodbav:"templateRef"`
	// Within is how long it may take once taken; stored as "within", in
	// whole seconds.
	Within time.Duration `dynamodbav:"-"`
	// Window is its send window, as Delivery.Window; empty for none.
	Window string `dynamodbav:"-"`
}

// fallbackRecord is a ReminderFallback as stored.
type fallbackRecord struct {
	Channel      string `dynamodbav:"channel"`
	Provider     string `dynamodbav:"provider"`
	RecipientRef string `dynamodbav:"recipientRef"`
	TemplateRef  string `dynamodbav:"templateRef"`
	Within       int64  `dynamodbav:"within,omitempty"`
	Window       string `dynamodbav:"window,omitempty"`
}

// MarshalDynamoDBAttributeValue stores f with Within in seconds.
func (f ReminderFallback) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	return attributevalue.Marshal(fallbackRecord{Channel: f.Channel, Provider: f.Provider, RecipientRef: f.RecipientRef,
		TemplateRef: f.TemplateRef, Within: int64(f.Within / time.Second), Window: f.Window})
}

// UnmarshalDynamoDBAttributeValue reads what MarshalDynamoDBAttributeValue
// stored.
func (f *ReminderFallback) UnmarshalDynamoDBAttributeValue(v types.AttributeValue) error {
	var r fallbackRecord
	if err := attributevalue.Unmarshal(v, &r); err != nil {
		return err
	}
	*f = ReminderFallback{Channel: r.Channel, Provider: r.Provider, RecipientRef: r.RecipientRef, TemplateRef: r.TemplateRef,
		Within: time.Duration(r.Within) * time.Second, Window: r.Window}
	return nil
}

// Ref is the delivery f names.
func (f ReminderFallback) Ref() FallbackRef {
	return FallbackRef{Channel: f.Channel, Provider: f.Provider}
}

// Keys are the delivery keys of r's deliveries and their fallbacks, in
// the order r lists them, each fallback after its primary.
func (r ReminderItem) Keys() []message.DeliveryKey {
	var out []message.DeliveryKey
	for _, d := range r.Deliveries {
		out = append(out, r.Key(d))
		if d.Fallback != nil {
			out = append(out, d.Fallback.Ref().Key(r.ID))
		}
	}
	return out
}

// Key returns the delivery key of d in r.
func (r ReminderItem) Key(d ReminderDelivery) message.DeliveryKey {
	return message.DeliveryKey{ReminderID: r.ID, Channel: d.Channel, Provider: d.Provider}
}

// reminderSK is the sort key of the reminder item, beside its deliveries.
const reminderSK = "REMINDER"

// conflictPause is the first pause before a write refused by a transaction
// in flight on its item (TransactionConflictException) is made again; it
// doubles, three pauses at most (70 ms in all).
const conflictPause = 10 * time.Millisecond

// reminderRecord is a ReminderItem as it is marshalled: its keys, and its
// times as the ledger writes them.
type reminderRecord struct {
	PK           string `dynamodbav:"PK"`
	SK           string `dynamodbav:"SK"`
	ReminderItem        // inline
	DueAt        string `dynamodbav:"dueAt"`
	ExpiresAt    string `dynamodbav:"expiresAt"`
	CreatedAt    string `dynamodbav:"createdAt"`
	// Late and LateWithin are ReminderItem.Late, absent for the default.
	Late       LatePolicy `dynamodbav:"late,omitempty"`
	LateWithin int64      `dynamodbav:"lateWithin,omitempty"`
	// TimeZone, DueLocal and ExpiresLocal are ReminderItem.Local.
	TimeZone     string `dynamodbav:"timeZone,omitempty"`
	DueLocal     string `dynamodbav:"dueLocal,omitempty"`
	ExpiresLocal string `dynamodbav:"expiresLocal,omitempty"`
	// TTL is when DynamoDB may delete the item: the retention after
	// expiresAt, as for its deliveries.
	TTL int64 `dynamodbav:"ttl"`
}

// CreateReminder writes reminder r's item unless one exists under its id;
// then it returns the stored one, and exists true, for the caller to
// compare. Where a series holds the id it is refused with ErrSeriesID. Its
// deliveries are written by Create, one by one, after it.
func (l *Ledger) CreateReminder(ctx context.Context, r ReminderItem) (stored ReminderItem, exists bool, err error) {
	return l.createReminder(ctx, r, nil)
}

// CreateOccurrence is CreateReminder for an occurrence of series
// r.Series, created by its extension from start at: only while the series
// is still there (its DueAt and count of restarts as at's, not cancelled),
// in one transaction with the put (ErrSeriesMoved otherwise, nothing
// written). So an extension that read the series before a restart, or a
// cancel, creates nothing after it: what it created before, the restart's
// settle (or the cancel) finds.
func (l *Ledger) CreateOccurrence(ctx context.Context, r ReminderItem, at Start) (stored ReminderItem, exists bool, err error) {
	if r.Series == "" {
		return ReminderItem{}, false, fmt.Errorf("ledger: occurrence %q names no series", r.ID)
	}
	return l.createReminder(ctx, r, &at)
}

func (l *Ledger) createReminder(ctx context.Context, r ReminderItem, guard *Start) (stored ReminderItem, exists bool, err error) {
	if err := checkTimes(r.ID, r.DueAt, r.ExpiresAt); err != nil {
		return ReminderItem{}, false, err
	}
	av, err := attributevalue.MarshalMap(reminderRecord{
		PK: PartitionKey(r.ID), SK: reminderSK, ReminderItem: r,
		DueAt: Format(r.DueAt), ExpiresAt: Format(r.ExpiresAt), CreatedAt: Format(l.cfg.Clock.Now()),
		TTL: l.Expiry(r.ExpiresAt).Unix(), Late: r.Late.Policy, LateWithin: int64(r.Late.Within / time.Second),
		TimeZone: r.Local.TimeZone, DueLocal: r.Local.DueLocal, ExpiresLocal: r.Local.ExpiresLocal,
	})
	if err != nil {
		return ReminderItem{}, false, fmt.Errorf("ledger: reminder %q: %w", r.ID, err)
	}
	if guard != nil {
		return l.createOccurrence(ctx, r, av, *guard)
	}
	in := &dynamodb.PutItemInput{
		TableName: aws.String(l.cfg.Table), Item: av,
		ConditionExpression:                 aws.String("attribute_not_exists(PK)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
	}
	out, err := l.api.PutItem(ctx, in)
	// A transaction writing the key (a series' create claiming the id at
	// the same time, or a reschedule) refuses the put, which wrote
	// nothing: put again once it is done, and its condition tells.
	var conflict *types.TransactionConflictException
	for wait := conflictPause; errors.As(err, &conflict) && wait <= 4*conflictPause; wait *= 2 {
		if perr := pause(ctx, wait); perr != nil {
			return ReminderItem{}, false, fmt.Errorf("ledger: write reminder %q: %w", r.ID, err)
		}
		out, err = l.api.PutItem(ctx, in)
	}
	if err == nil {
		l.countTo(&l.units.Reminders, out.ConsumedCapacity)
		return r, false, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if isSeriesClaim(ccf.Item) {
			return ReminderItem{}, false, fmt.Errorf("ledger: reminder %q: %w", r.ID, ErrSeriesID)
		}
		stored, err := fromReminderItem(ccf.Item)
		return stored, true, err
	}
	return ReminderItem{}, false, fmt.Errorf("ledger: write reminder %q: %w", r.ID, err)
}

func fromReminderItem(av map[string]types.AttributeValue) (ReminderItem, error) {
	var it reminderRecord
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return ReminderItem{}, fmt.Errorf("ledger: stored reminder is unreadable: %w", err)
	}
	r := it.ReminderItem
	r.Late = LateRule{Policy: it.Late, Within: time.Duration(it.LateWithin) * time.Second}
	r.Local = Local{TimeZone: it.TimeZone, DueLocal: it.DueLocal, ExpiresLocal: it.ExpiresLocal}
	var err error
	if r.DueAt, err = time.Parse(time.RFC3339Nano, it.DueAt); err != nil {
		return ReminderItem{}, fmt.Errorf("ledger: stored reminder %q has dueAt %q: %w", r.ID, it.DueAt, err)
	}
	if r.ExpiresAt, err = time.Parse(time.RFC3339Nano, it.ExpiresAt); err != nil {
		return ReminderItem{}, fmt.Errorf("ledger: stored reminder %q has expiresAt %q: %w", r.ID, it.ExpiresAt, err)
	}
	if it.TTL > 0 {
		r.TTL = time.Unix(it.TTL, 0).UTC()
	}
	return r, nil
}

// Stored is everything stored under one reminder id.
type Stored struct {
	// Reminder is the reminder item; nil if there is none (deliveries
	// written without the intake, or a series), or if it could not be read
	// (ReminderErr).
	Reminder *ReminderItem
	// Series is the series item, if the id is a series'; nil otherwise, or
	// if it could not be read (ReminderErr).
	Series *Series
	// ReminderErr says why a reminder item that exists could not be read.
	// It stops nothing that works from the keys: a cancel, a purge.
	ReminderErr error
	// Deliveries are its deliveries as they are now, in key order.
	Deliveries []Delivery
	// keys are the sort keys of every item, for Purge.
	keys []string
}

// Empty reports whether nothing is stored.
func (s Stored) Empty() bool { return len(s.keys) == 0 }

// OtherItems counts the items that are not deliveries (the reminder item).
func (s Stored) OtherItems() int { return len(s.keys) - len(s.Deliveries) }

// ReadReminder reads everything stored under reminder id, with strong
// consistency: one query of its partition.
func (l *Ledger) ReadReminder(ctx context.Context, id string) (Stored, error) {
	var s Stored
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(l.cfg.Table),
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": sv(PartitionKey(id))},
		ConsistentRead:            aws.Bool(true),
	}
	for {
		out, err := l.api.Query(ctx, in)
		if err != nil {
			return s, fmt.Errorf("ledger: read reminder %q: %w", id, err)
		}
		for _, it := range out.Items {
			sk, _ := it[attrSK].(*types.AttributeValueMemberS)
			if sk == nil {
				continue
			}
			s.keys = append(s.keys, sk.Value)
			switch {
			case sk.Value == reminderSK && isSeriesClaim(it):
				// The series' claim of its id: the series item says it all.
			case sk.Value == reminderSK:
				if r, err := fromReminderItem(it); err != nil {
					s.ReminderErr = err
				} else {
					s.Reminder = &r
				}
			case sk.Value == seriesSK:
				if r, err := fromSeriesItem(it); err != nil {
					s.ReminderErr = err
				} else {
					s.Series = &r
				}
			case strings.HasPrefix(sk.Value, "DLV#"):
				d, err := fromItem(it)
				if err != nil {
					return s, err
				}
				s.Deliveries = append(s.Deliveries, d)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return s, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
