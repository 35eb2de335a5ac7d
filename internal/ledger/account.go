package ledger

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/message"
)

// The account index is a sparse global secondary index over reminder items
// only (no other item has an accountRef): an account's reminders, by due
// time, for support's "what did we send this customer?". Each reminder
// costs one index write when it is created (its projection is under 1 KB
// for all but the largest reminders: a write unit per KB) and two when it
// is rescheduled (its sort key changes); nothing else rewrites a reminder
// item. Metadata is left out of the projection to keep it small.
const (
	// AccountIndexName is the account index's name.
	AccountIndexName = "account"
	attrAccount      = "accountRef"
	attrDueAt        = "dueAt"
	// MaxAccountPage is the most reminders one ListAccount page returns.
	MaxAccountPage = 100
)

// AccountIndexProjection is the account index's projected non-key
// attributes.
func AccountIndexProjection() []string {
	return []string{"reminderId", "expiresAt", "deliveries", "createdAt"}
}

// ErrBadPageToken is ListAccount's answer for a page token it did not give.
var ErrBadPageToken = errors.New("the page token is not one this listing gave")

// Listed is a reminder item as the account index holds it: without
// metadata or creator.
type Listed struct {
	ReminderItem
	// CreatedAt is when the reminder item was written.
	CreatedAt time.Time
	// IsSeries is set for a series item (its Recur is not in the index:
	// ReadReminder has it).
	IsSeries bool
}

// AccountPage is one page of an account's reminders, latest due first.
type AccountPage struct {
	Reminders []Listed
	// Next is the token of the next page; "" on the last.
	Next string
}

// pageToken is where a page ended: the last reminder's id and dueAt (with
// the account, that is the index's whole key).
type pageToken struct {
	ID    string `json:"i"`
	DueAt string `json:"d"`
	// Series is set when the last entry was a series item.
	Series bool `json:"s,omitempty"`
}

func (p pageToken) encode() string {
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(s string) (pageToken, error) {
	var p pageToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 1024 || json.Unmarshal(b, &p) != nil {
		return p, ErrBadPageToken
	}
	if _, err := time.Parse(time.RFC3339Nano, p.DueAt); err != nil {
		return p, ErrBadPageToken
	}
	if (message.DeliveryKey{ReminderID: p.ID, Channel: "x", Provider: "x"}).Validate() != nil {
		return p, ErrBadPageToken
	}
	return p, nil
}

func checkListing(account string, limit int) error {
	if account == "" || len(account) > 1024 {
		return fmt.Errorf("ledger: list account: the account reference is empty or too long")
	}
	if limit < 1 || limit > MaxAccountPage {
		return fmt.Errorf("ledger: list account: page size %d; use 1 to %d", limit, MaxAccountPage)
	}
	return nil
}

// ListAccount returns a page of up to limit (1 to MaxAccountPage) of
// account's reminders, latest due first, starting after the page token
// next ("" for the first page). It reads the account index, eventually
// consistent: a reminder created a moment ago may be missing. A token it
// did not give is refused with ErrBadPageToken.
func (l *Ledger) ListAccount(ctx context.Context, account string, limit int, next string) (AccountPage, error) {
	if err := checkListing(account, limit); err != nil {
		return AccountPage{}, err
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(l.cfg.Table),
		IndexName:                 aws.String(AccountIndexName),
		KeyConditionExpression:    aws.String("#account = :account"),
		ExpressionAttributeNames:  map[string]string{"#account": attrAccount},
		ExpressionAttributeValues: map[string]types.AttributeValue{":account": sv(account)},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(int32(limit)),
	}
	if next != "" {
		p, err := decodePageToken(next)
		if err != nil {
			return AccountPage{}, fmt.Errorf("ledger: list account: %w", err)
		}
		sk := reminderSK
		if p.Series {
			sk = seriesSK
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			attrPK: sv(PartitionKey(p.ID)), attrSK: sv(sk), attrAccount: sv(account), attrDueAt: sv(p.DueAt),
		}
	}
	out, err := l.api.Query(ctx, in)
	if err != nil {
		return AccountPage{}, fmt.Errorf("ledger: list account: %w", err)
	}
	var page AccountPage
	for _, it := range out.Items {
		r, err := fromReminderItem(it)
		if err != nil {
			return AccountPage{}, err
		}
		listed := Listed{ReminderItem: r}
		if sk, ok := it[attrSK].(*types.AttributeValueMemberS); ok && sk.Value == seriesSK {
			listed.IsSeries = true
		}
		if c, ok := it["createdAt"].(*types.AttributeValueMemberS); ok {
			listed.CreatedAt, _ = time.Parse(time.RFC3339Nano, c.Value)
		}
		page.Reminders = append(page.Reminders, listed)
	}
	if len(out.LastEvaluatedKey) > 0 && len(page.Reminders) > 0 {
		last := page.Reminders[len(page.Reminders)-1]
		page.Next = pageToken{ID: last.ID, DueAt: Format(last.DueAt), Series: last.IsSeries}.encode()
	}
	return page, nil
}
