package ledger

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A reminder's creator (ReminderItem.CreatedBy) is on its reminder item, which
// the account index does not project: DynamoDB cannot change an existing
// index's projection (a new index would be needed, which an existing table
// takes in two deploys, one index created or deleted per update). So a
// listing of one creator's reminders reads the account index as
// ListAccount does and then the creators of the entries it read, from
// their reminder items, in one batch read, and keeps the creator's own.
// What it costs: per entry read, half a read unit for its reminder item
// (an eventually consistent read of an item under 4 KB), whoever created
// it; other creators' entries are read and dropped. An account whose
// reminders are all one caller's pays that and nothing more.
const (
	// MaxCreatorLen is the longest creator a listing takes.
	MaxCreatorLen = 2048
	// accountRounds bounds the index reads of one ListAccountCreatedBy
	// call: the first reads as many entries as the page asks, each
	// further one MaxAccountPage. A call that meets fewer of the creator's
	// reminders returns a short page, or an empty one, with a next token.
	accountRounds = 4
)

// ListAccountCreatedBy returns a page of up to limit (1 to MaxAccountPage)
// of account's reminders that creator created, latest due first, after
// the page token next, as ListAccount does, each with its CreatedBy. The
// other creators' reminders (and those with no recorded creator) are
// skipped; a page may therefore be short, or empty, and still have a next
// token: the listing has ended only when Next is "". It reads at most
// accountRounds pages of the account index, and the creators of the
// entries they hold (see above).
func (l *Ledger) ListAccountCreatedBy(ctx context.Context, account, creator string, limit int, next string) (AccountPage, error) {
	return listCreatedBy(ctx, account, creator, limit, next, l.ListAccount, l.creators)
}

// ListAccountCreatedBy is Ledger.ListAccountCreatedBy: the same rounds, so
// the same short pages.
func (m *Memory) ListAccountCreatedBy(ctx context.Context, account, creator string, limit int, next string) (AccountPage, error) {
	return listCreatedBy(ctx, account, creator, limit, next, m.ListAccount, m.creators)
}

func listCreatedBy(ctx context.Context, account, creator string, limit int, next string,
	list func(ctx context.Context, account string, limit int, next string) (AccountPage, error),
	creators func(ctx context.Context, entries []Listed) (map[string]string, error)) (AccountPage, error) {
	if creator == "" || len(creator) > MaxCreatorLen {
		return AccountPage{}, fmt.Errorf("ledger: list account: the creator is empty or over %d bytes", MaxCreatorLen)
	}
	if err := checkListing(account, limit); err != nil {
		return AccountPage{}, err
	}
	var out AccountPage
	for round := range accountRounds {
		want := limit - len(out.Reminders)
		read := want
		if round > 0 {
			read = MaxAccountPage
		}
		page, err := list(ctx, account, read, next)
		if err != nil {
			return AccountPage{}, err
		}
		by, err := creators(ctx, page.Reminders)
		if err != nil {
			return AccountPage{}, err
		}
		for _, r := range page.Reminders {
			if by[r.ID] != creator {
				continue
			}
			r.CreatedBy = creator
			out.Reminders = append(out.Reminders, r)
			if len(out.Reminders) == limit {
				// The page is full: the next one starts after this
				// reminder, the entries after it in this round unread.
				out.Next = pageToken{ID: r.ID, DueAt: Format(r.DueAt), Series: r.IsSeries}.encode()
				if r.ID == page.Reminders[len(page.Reminders)-1].ID {
					out.Next = page.Next // the round's last: as the index says whether more follow
				}
				return out, nil
			}
		}
		if next = page.Next; next == "" {
			return out, nil
		}
	}
	out.Next = next
	return out, nil
}

// creators reads the creators of reminders ids from their reminder items:
// an eventually consistent batch read (a creator is written once, with the
// item). A reminder with no item, or no recorded creator, has none.
func (l *Ledger) creators(ctx context.Context, entries []Listed) (map[string]string, error) {
	out := make(map[string]string, len(entries))
	if len(entries) == 0 {
		return out, nil
	}
	if len(entries) > MaxAccountPage {
		return nil, fmt.Errorf("ledger: read %d creators at once; the limit is %d", len(entries), MaxAccountPage)
	}
	req := &types.KeysAndAttributes{
		ProjectionExpression:     aws.String("#pk, #createdBy"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#createdBy": attrCreatedBy},
	}
	for _, e := range entries {
		sk := reminderSK
		if e.IsSeries {
			sk = seriesSK // a series item: an id is a reminder's or a series', never both
		}
		req.Keys = append(req.Keys, map[string]types.AttributeValue{attrPK: sv(PartitionKey(e.ID)), attrSK: sv(sk)})
	}
	err := l.batchGet(ctx, req, "reminder items", func(it map[string]types.AttributeValue) error {
		pk, _ := it[attrPK].(*types.AttributeValueMemberS)
		by, _ := it[attrCreatedBy].(*types.AttributeValueMemberS)
		if pk == nil || by == nil {
			return nil
		}
		if id, ok := strings.CutPrefix(pk.Value, PartitionKey("")); ok {
			out[id] = by.Value
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

const attrCreatedBy = "createdBy"

// creators is Ledger.creators.
func (m *Memory) creators(_ context.Context, entries []Listed) (map[string]string, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		if r, ok := m.t.reminders[e.ID]; ok && r.CreatedBy != "" {
			out[e.ID] = r.CreatedBy
		}
		if s, ok := m.t.series[e.ID]; ok && s.Item.CreatedBy != "" {
			out[e.ID] = s.Item.CreatedBy
		}
	}
	return out, nil
}
