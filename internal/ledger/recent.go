package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The recent activity (the console's overview): the deliveries whose
// status changed since a time, read by a bounded, paged scan.

// RecentQuery bounds one read of the recently changed deliveries.
type RecentQuery struct {
	// Since is the earliest last change (updatedAt) read. Required.
	Since time.Time
	// Read is the most items the read examines, of every kind and age
	// (a scan is priced by what it reads, not by what it returns).
	// Required, 1 to MaxDeadRead.
	Read int
	// After is an earlier page's Next, to read on from where it stopped;
	// "" reads from the start.
	After string
}

// RecentPage is what one ReadRecent found.
type RecentPage struct {
	// Deliveries are the deliveries among the items read whose status
	// last changed at or after Since, in no order, with what an account
	// of the activity needs: their key, status, times, attempts, last
	// error and history; never the address, the template data or the
	// recipient's references.
	Deliveries []Delivery
	// Scanned counts the items read, at most the query's Read.
	Scanned int
	// Next, when the read stopped at its bound, is where the next read
	// goes on (RecentQuery.After); "" once the table has been read to its
	// end.
	Next string
}

func (q RecentQuery) check() (*deadToken, error) {
	switch {
	case q.Since.IsZero():
		return nil, fmt.Errorf("ledger: read the recent deliveries: no Since; give the earliest change to read")
	case q.Read < 1 || q.Read > MaxDeadRead:
		return nil, fmt.Errorf("ledger: read the recent deliveries: a read of %d items; read 1 to %d at a time", q.Read, MaxDeadRead)
	case q.After == "":
		return nil, nil
	}
	k, err := decodeDeadToken(q.After)
	if err != nil {
		return nil, fmt.Errorf("ledger: read the recent deliveries after %q: %w", q.After, ErrBadPageToken)
	}
	return &k, nil
}

// recentProjection is what ReadRecent reads of a delivery item: nothing
// personal.
var recentProjection = []string{attrPK, attrSK, "reminderId", "channel", "provider", "status", "dueAt", "expiresAt", "attempts",
	"lastErrorClass", "lastError", "sentAt", "updatedAt", "history"}

// ReadRecent reads up to q.Read items of the table, from the start or from
// where an earlier read stopped, and returns the deliveries among them
// whose updatedAt (their last transition) is at or after q.Since. It is a
// scan with a filter, strongly consistent, bounded by q.Read and paged by
// Next: for the operator, never the functions.
func (l *Ledger) ReadRecent(ctx context.Context, q RecentQuery) (RecentPage, error) {
	after, err := q.check()
	if err != nil {
		return RecentPage{}, err
	}
	in := l.deliveryScan(recentProjection, "#updated >= :since", map[string]string{"#updated": "updatedAt"},
		map[string]types.AttributeValue{":since": sv(Format(q.Since))}, after)
	var page RecentPage
	page.Deliveries, page.Scanned, page.Next, err = l.scanDeliveries(ctx, in, q.Read, "the recent deliveries")
	return page, err
}

// ReadRecent is Ledger.ReadRecent: the table's delivery items in key
// order, each counted as read, those changed since q.Since returned as
// ReadRecent projects them; Next when the bound stopped the read.
func (m *Memory) ReadRecent(_ context.Context, q RecentQuery) (RecentPage, error) {
	after, err := q.check()
	if err != nil {
		return RecentPage{}, err
	}
	since := Format(q.Since)
	var page RecentPage
	page.Scanned, page.Next = m.scanDeliveries(after, q.Read, func(d Delivery) {
		if formatOpt(d.UpdatedAt) >= since {
			page.Deliveries = append(page.Deliveries, recentOf(d))
		}
	})
	return page, nil
}

// recentOf is d as ReadRecent projects it.
func recentOf(d Delivery) Delivery {
	return Delivery{ReminderID: d.ReminderID, Channel: d.Channel, Provider: d.Provider, Status: d.Status, DueAt: d.DueAt, ExpiresAt: d.ExpiresAt,
		Attempts: d.Attempts, LastErrorClass: d.LastErrorClass, LastError: d.LastError, SentAt: d.SentAt, UpdatedAt: d.UpdatedAt, History: d.History}
}
