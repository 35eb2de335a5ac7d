package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/recur"
)

// ErrBadPageToken is List's answer for a page token it did not give.
var ErrBadPageToken = ledger.ErrBadPageToken

// MaxListPage is the most reminders one page of a listing holds (the
// ledger's account index page, ledger.MaxAccountPage).
const MaxListPage = ledger.MaxAccountPage

// Listed is one reminder of an account's listing, with its deliveries as
// they are now.
type Listed struct {
	// Reminder is the reminder as the account index holds it: without
	// metadata or creator.
	Reminder
	// CreatedAt is when the reminder was created (zero if its item does
	// not say).
	CreatedAt time.Time
	// Now are its deliveries as they are now, by key, as a Document shows
	// them (addresses masked; HandedOff not asked); a delivery missing
	// here was not found (created a moment ago, or purged).
	Now map[message.DeliveryKey]DeliveryDocument
	// IsSeries is set for a series (Recur says its rule; its occurrences
	// are listed as reminders of their own); Next is then its next
	// occurrence after now, nil once it has none or was cancelled.
	IsSeries bool
	Next     *NextOccurrence
}

// NextOccurrence is a series' next occurrence, created or not.
type NextOccurrence struct {
	ID       string    `json:"id"`
	DueAt    time.Time `json:"dueAt"`
	DueLocal string    `json:"dueLocal"`
}

// ListPage is a page of an account's reminders, latest due first.
type ListPage struct {
	Reminders []Listed
	// Next is the next page's token; "" on the last page.
	Next string
}

// List returns up to limit (1 to MaxListPage) of account's
// reminders after the page token next, latest due first, each with its
// deliveries' states: one query of the account index and one batch read
// of the deliveries per page. It is the operator's door: every creator's
// reminders (ListAs is the caller's).
func (s *Store) List(ctx context.Context, account string, limit int, next string) (ListPage, error) {
	return s.list(ctx, operator, account, limit, next)
}

func (s *Store) list(ctx context.Context, c Caller, account string, limit int, next string) (ListPage, error) {
	if err := c.check(); err != nil {
		return ListPage{}, err
	}
	if p := checkRef(account, 128); p != "" {
		return ListPage{}, &ValidationError{Field: "account", Problem: p, Fix: "give the account's reference, as the reminders' accountRef, up to 128 characters"}
	}
	if limit < 1 || limit > MaxListPage {
		return ListPage{}, &ValidationError{Field: "limit", Problem: fmt.Sprintf("is %d", limit), Fix: fmt.Sprintf("ask for 1 to %d reminders a page", MaxListPage)}
	}
	var page ledger.AccountPage
	var err error
	if c.FullAccess {
		page, err = s.cfg.Ledger.ListAccount(ctx, account, limit, next)
	} else {
		page, err = s.cfg.Ledger.ListAccountCreatedBy(ctx, account, c.Principal, limit, next)
	}
	if errors.Is(err, ledger.ErrBadPageToken) {
		return ListPage{}, &ValidationError{Field: "next", Problem: "is not a page token this listing gave", Fix: "pass the next token of the previous page unchanged, or leave it out for the first page"}
	}
	if err != nil {
		return ListPage{}, fmt.Errorf("schedule: list %q: %w", account, err)
	}
	out := ListPage{Next: page.Next}
	var keys []message.DeliveryKey
	now := map[message.DeliveryKey]ledger.Delivery{}
	flush := func() error {
		got, err := s.cfg.Ledger.GetMany(ctx, keys)
		if err != nil {
			return fmt.Errorf("schedule: list %q: %w", account, err)
		}
		for k, d := range got {
			now[k] = d
		}
		keys = keys[:0]
		return nil
	}
	for _, r := range page.Reminders {
		if r.IsSeries {
			continue // no deliveries of its own
		}
		ks := r.Keys() // its deliveries and their fallbacks
		if len(keys)+len(ks) > 100 {
			if err := flush(); err != nil {
				return ListPage{}, err
			}
		}
		keys = append(keys, ks...)
	}
	if len(keys) > 0 {
		if err := flush(); err != nil {
			return ListPage{}, err
		}
	}
	for _, r := range page.Reminders {
		l := Listed{Reminder: reminderOf(r.ReminderItem), CreatedAt: r.CreatedAt, Now: map[message.DeliveryKey]DeliveryDocument{}, IsSeries: r.IsSeries}
		if r.IsSeries {
			// The index does not hold its rule: its item does.
			if err := s.listSeries(ctx, &l); err != nil {
				return ListPage{}, fmt.Errorf("schedule: list %q: %w", account, err)
			}
			out.Reminders = append(out.Reminders, l)
			continue
		}
		for _, k := range r.Keys() {
			if cur, ok := now[k]; ok {
				l.Now[k] = deliveryDocument(cur, false)
			}
		}
		out.Reminders = append(out.Reminders, l)
	}
	return out, nil
}

// listSeries fills a series' listing entry from its item: its rule, and
// its next occurrence after now.
func (s *Store) listSeries(ctx context.Context, l *Listed) error {
	stored, err := s.cfg.Ledger.ReadReminder(ctx, l.ID)
	if err != nil {
		return err
	}
	sr := stored.Series
	if sr == nil {
		return nil // purged since the index was read
	}
	l.Recur = sr.Item.Recur
	if !sr.CancelledAt.IsZero() {
		return nil
	}
	series, err := seriesOf(sr.Item)
	if err != nil {
		return err
	}
	if next := series.After(s.cfg.Clock.Now(), 1); len(next) == 1 {
		o := next[0]
		l.Next = &NextOccurrence{ID: recur.OccurrenceID(sr.Item.ID, o), DueAt: o.At, DueLocal: o.Wall.String()}
	}
	return nil
}
