package ledger

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/failure"
)

// TTLAttribute is the table's time-to-live attribute.
const TTLAttribute = attrTTL

// Attribute names of the delivery item. docs/ledger.md describes each.
const (
	attrPK       = "PK"
	attrSK       = "SK"
	attrTTL      = "ttl"
	attrDueShard = "dueShard" // due index partition key; present only while live
	attrDueSort  = "dueSort"  // due index sort key; present only while live

	attrFallback      = "fb"      // a primary's fallback, "channel#provider"
	attrFallbackTaken = "fbTaken" // when a primary's fallback was taken
	attrOnTime        = "onTime"  // under send-late, the reminder's expiresAt
)

// item is the stored form of a Delivery.
type item struct {
	PK             string            `dynamodbav:"PK"`
	SK             string            `dynamodbav:"SK"`
	ReminderID     string            `dynamodbav:"reminderId"`
	Channel        string            `dynamodbav:"channel"`
	Provider       string            `dynamodbav:"provider"`
	Status         Status            `dynamodbav:"status"`
	AccountRef     string            `dynamodbav:"account,omitempty"`
	RecipientRef   string            `dynamodbav:"recipientRef"`
	TemplateRef    string            `dynamodbav:"templateRef"`
	Address        string            `dynamodbav:"address,omitempty"`
	TemplateData   map[string]string `dynamodbav:"templateData,omitempty"`
	DueAt          string            `dynamodbav:"dueAt"`
	ExpiresAt      string            `dynamodbav:"expiresAt"`
	Attempts       int               `dynamodbav:"attempts"`
	UnendedAttempt int               `dynamodbav:"unendedAttempt,omitempty"`
	Repairs        int               `dynamodbav:"repairs,omitempty"`
	BudgetFrom     int               `dynamodbav:"budgetFrom,omitempty"`
	ClaimToken     string            `dynamodbav:"claimToken,omitempty"`
	LeaseUntil     string            `dynamodbav:"leaseUntil,omitempty"`
	LastErrorClass failure.Class     `dynamodbav:"lastErrorClass,omitempty"`
	LastError      string            `dynamodbav:"lastError,omitempty"`
	NextAttemptAt  string            `dynamodbav:"nextAttemptAt,omitempty"`
	SentAt         string            `dynamodbav:"sentAt,omitempty"`
	Receipt        string            `dynamodbav:"receipt,omitempty"`
	UpdatedAt      string            `dynamodbav:"updatedAt,omitempty"`
	History        []Entry           `dynamodbav:"history"`
	Feedback       FeedbackKind      `dynamodbav:"feedback,omitempty"`
	FeedbackAt     string            `dynamodbav:"feedbackAt,omitempty"`
	FeedbackDetail string            `dynamodbav:"feedbackDetail,omitempty"`
	FeedbackPerm   bool              `dynamodbav:"feedbackPermanent,omitempty"`
	ProviderMsgID  string            `dynamodbav:"providerMessageId,omitempty"`
	FeedbackIDs    []string          `dynamodbav:"feedbackIds,omitempty"`
	TTL            int64             `dynamodbav:"ttl,omitempty"`
	DueShard       string            `dynamodbav:"dueShard,omitempty"`
	DueSort        string            `dynamodbav:"dueSort,omitempty"`
	// The fallback's and late policy's attributes have short names: a
	// delivery item stays under 1 KB (one write unit) with them.
	Fallback       string     `dynamodbav:"fb,omitempty"`
	FallbackOf     string     `dynamodbav:"fbOf,omitempty"`
	FallbackWithin int64      `dynamodbav:"fbWithin,omitempty"` // seconds
	FallbackTaken  string     `dynamodbav:"fbTaken,omitempty"`
	Late           LatePolicy `dynamodbav:"late,omitempty"`
	OnTimeUntil    string     `dynamodbav:"onTime,omitempty"`
	Window         string     `dynamodbav:"win,omitempty"`
	TimeZone       string     `dynamodbav:"tz,omitempty"` // attrTimeZone
}

// attrTimeZone is a delivery item's Delivery.TimeZone.
const attrTimeZone = "tz"

// PartitionKey returns the PK of a reminder's items.
func PartitionKey(reminderID string) string { return "REM#" + reminderID }

// SortKey returns the SK of a delivery item.
func SortKey(channel, provider string) string { return "DLV#" + channel + "#" + provider }

func keyAttrs(k message.DeliveryKey) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: PartitionKey(k.ReminderID)},
		attrSK: &types.AttributeValueMemberS{Value: SortKey(k.Channel, k.Provider)},
	}
}

func formatOpt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return Format(t)
}

func unixOpt(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func parseOpt(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("ledger: attribute %s %q is not a time: %w", field, s, err)
	}
	return t.UTC(), nil
}

func toItem(d Delivery, shard, sort string) (map[string]types.AttributeValue, error) {
	it := item{
		PK: PartitionKey(d.ReminderID), SK: SortKey(d.Channel, d.Provider),
		ReminderID: d.ReminderID, Channel: d.Channel, Provider: d.Provider, Status: d.Status, AccountRef: d.AccountRef,
		RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef, Address: d.Address, TemplateData: d.TemplateData,
		DueAt: Format(d.DueAt), ExpiresAt: Format(d.ExpiresAt), Attempts: d.Attempts, BudgetFrom: d.BudgetFrom, UnendedAttempt: d.UnendedAttempt, Repairs: d.Repairs,
		ClaimToken: d.ClaimToken, LeaseUntil: formatOpt(d.LeaseUntil),
		LastErrorClass: d.LastErrorClass, LastError: d.LastError,
		NextAttemptAt: formatOpt(d.NextAttemptAt), SentAt: formatOpt(d.SentAt),
		Receipt: d.Receipt, UpdatedAt: formatOpt(d.UpdatedAt), History: d.History,
		TTL:      unixOpt(d.TTL),
		DueShard: shard, DueSort: sort,
		Feedback: d.Feedback.Kind, FeedbackDetail: d.Feedback.Detail, FeedbackPerm: d.Feedback.Permanent,
		FeedbackIDs: d.FeedbackSeen,
		Fallback:    d.Fallback.stored(), FallbackOf: d.FallbackOf.stored(), FallbackWithin: int64(d.FallbackWithin / time.Second),
		FallbackTaken: formatOpt(d.FallbackTaken), Late: d.Late, OnTimeUntil: formatOpt(d.OnTimeUntil), Window: d.Window,
		TimeZone: d.TimeZone,
	}
	if d.Feedback.Kind != "" {
		it.FeedbackAt = Format(d.Feedback.At)
	}
	if d.Feedback.MessageID != d.Receipt {
		it.ProviderMsgID = d.Feedback.MessageID // kept only where it is not the receipt
	}
	if it.History == nil {
		it.History = []Entry{}
	}
	return attributevalue.MarshalMap(it)
}

func fromItem(av map[string]types.AttributeValue) (Delivery, error) {
	var it item
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return Delivery{}, fmt.Errorf("ledger: item is not a delivery: %w", err)
	}
	d := Delivery{
		ReminderID: it.ReminderID, Channel: it.Channel, Provider: it.Provider, Status: it.Status, AccountRef: it.AccountRef,
		RecipientRef: it.RecipientRef, TemplateRef: it.TemplateRef, Address: it.Address, TemplateData: it.TemplateData, Attempts: it.Attempts, BudgetFrom: it.BudgetFrom, UnendedAttempt: it.UnendedAttempt, Repairs: it.Repairs,
		ClaimToken: it.ClaimToken, LastErrorClass: it.LastErrorClass, LastError: it.LastError,
		Receipt: it.Receipt, History: it.History,
		Feedback:       Feedback{Kind: it.Feedback, Detail: it.FeedbackDetail, Permanent: it.FeedbackPerm, MessageID: it.ProviderMsgID},
		FeedbackSeen:   it.FeedbackIDs,
		FallbackWithin: time.Duration(it.FallbackWithin) * time.Second, Late: it.Late, Window: it.Window, TimeZone: it.TimeZone,
	}
	var err error
	if d.Fallback, err = parseFallbackRef(attrFallback, it.Fallback); err != nil {
		return Delivery{}, err
	}
	if d.FallbackOf, err = parseFallbackRef("fbOf", it.FallbackOf); err != nil {
		return Delivery{}, err
	}
	if it.TTL > 0 {
		d.TTL = time.Unix(it.TTL, 0).UTC()
	}
	if d.Feedback.Kind != "" && d.Feedback.MessageID == "" {
		d.Feedback.MessageID = d.Receipt // providerMessageId is absent where it is the receipt
	}
	if it.DueShard != "" || it.DueSort != "" {
		shard, err := strconv.Atoi(strings.TrimPrefix(it.DueShard, "DUE#"))
		if err != nil || !strings.HasPrefix(it.DueShard, "DUE#") {
			return Delivery{}, fmt.Errorf("ledger: delivery %s has due index shard %q, not DUE#n", d.Key(), it.DueShard)
		}
		publish, _, handedOff, err := splitSort(it.DueSort)
		if err != nil {
			return Delivery{}, err
		}
		at, err := parseOpt("publishAt", publish)
		if err != nil {
			return Delivery{}, err
		}
		d.Index = &IndexPosition{Shard: shard, Sort: it.DueSort, PublishAt: at, HandedOff: handedOff}
	}
	for _, f := range []struct {
		name string
		src  string
		dst  *time.Time
	}{
		{"dueAt", it.DueAt, &d.DueAt}, {"expiresAt", it.ExpiresAt, &d.ExpiresAt},
		{"leaseUntil", it.LeaseUntil, &d.LeaseUntil}, {"nextAttemptAt", it.NextAttemptAt, &d.NextAttemptAt},
		{"sentAt", it.SentAt, &d.SentAt}, {"updatedAt", it.UpdatedAt, &d.UpdatedAt}, {"feedbackAt", it.FeedbackAt, &d.Feedback.At},
		{attrOnTime, it.OnTimeUntil, &d.OnTimeUntil}, {attrFallbackTaken, it.FallbackTaken, &d.FallbackTaken},
	} {
		if *f.dst, err = parseOpt(f.name, f.src); err != nil {
			return Delivery{}, err
		}
	}
	return d, nil
}

// DeliveryOfImage decodes an item image as the table's stream gives it:
// the delivery it holds, and ok false for an item that is not a delivery
// (a reminder item, the stage record) or an empty image (no image: an
// INSERT's old one, a REMOVE's new one).
func DeliveryOfImage(av map[string]types.AttributeValue) (d Delivery, ok bool, err error) {
	sk, _ := av[attrSK].(*types.AttributeValueMemberS)
	if sk == nil || !strings.HasPrefix(sk.Value, "DLV#") {
		return Delivery{}, false, nil
	}
	d, err = fromItem(av)
	return d, err == nil, err
}

// Image returns the item d is stored as, without its due index keys: what
// the table's stream shows of it (DeliveryOfImage reads it back).
func Image(d Delivery) (map[string]types.AttributeValue, error) { return toItem(d, "", "") }
