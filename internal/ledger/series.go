package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// seriesSK is the sort key of a series item, in the partition of the
// series' id.
const seriesSK = "SERIES"

// An id is a reminder's or a series', never both. A series holds its id
// with a claim: an item at the reminder item's key (SK REMINDER) with
// attribute seriesClaim and nothing else (no account, no times: in no
// index, left alone by Retain), written in one transaction with the series
// item, each on condition that its key is free. So a reminder's create
// (CreateReminder, conditional on that key, one write as before) is
// refused where a series stands (ErrSeriesID), a series' create where a
// reminder stands (ErrReminderID), and of the two created at once one
// wins. ReadReminder passes over the claim; Purge removes it with the rest;
// CancelSeries gives it the series item's TTL.
const attrSeriesClaim = "seriesClaim"

var (
	// ErrSeriesID is CreateReminder's refusal where the id is a series'.
	ErrSeriesID = errors.New("the id is a series'")
	// ErrReminderID is CreateSeries' refusal where the id is a reminder's.
	ErrReminderID = errors.New("the id is a reminder's")
)

// isSeriesClaim reports whether item is a series' claim of its id.
func isSeriesClaim(item map[string]types.AttributeValue) bool {
	_, ok := item[attrSeriesClaim]
	return ok
}

// SeriesShardKey is the due index partition in which series wait for their
// next extension: apart from the delivery shards (DUE#n), which no cursor
// of this partition reads.
func SeriesShardKey(n int) string { return "SERIES#" + strconv.Itoa(n) }

// Series is a series item: a recurring reminder (pkg/schedule makes each of
// its occurrences a reminder of its own, a bounded number ahead).
//
// Item is the series as created: its Recur (the rule), its first
// occurrence's times (DueAt, ExpiresAt, Local), its deliveries and policies,
// the template of every occurrence. It is in the account index (the series
// is listed with the account's reminders).
type Series struct {
	Item ReminderItem
	// Addresses are the deliveries' addresses (SES's), by delivery key
	// "channel#provider", kept on the series item alone for the
	// occurrences it will create; never shown, never indexed.
	Addresses map[string]string
	// Next is the index (1-based) of the first occurrence not created yet.
	Next int
	// ExtendAt is when the series is next extended (its next occurrence's
	// due time minus the horizon); zero once every occurrence is created.
	ExtendAt time.Time
	// CancelledAt is when the series was cancelled; zero while it runs.
	CancelledAt time.Time
	// Starts are the series' starts before each of its restarts
	// (RestartSeries), oldest first, each with how far it was created:
	// the occurrences they created are the series' too (a purge deletes
	// them).
	Starts []Start
	// Unsettled is set by a restart until the occurrences its last start
	// created and the new one does not give are cancelled (SettleRestart):
	// whoever reads it set finishes that first (the reschedule, or else
	// the next extension), and no other restart is taken meanwhile.
	Unsettled bool
	// Early are occurrences created ahead of the series' extension, by a
	// cancel or a reschedule of that one occurrence (NoteEarly), however
	// far ahead: a cancel of the series, and a purge, find them here.
	Early []string
}

// MaxEarly bounds Series.Early.
const MaxEarly = 1000

// ErrTooManyEarly is NoteEarly's refusal past MaxEarly.
var ErrTooManyEarly = fmt.Errorf("the series has %d occurrences created ahead of their time, the most it keeps", MaxEarly)

// Start is a series' first occurrence (its UTC time, and its wall-clock
// time in the series' zone) and the index of its first occurrence not
// created yet (Series.Next): a series' state that a restart replaces.
// Restarts is how many restarts came before it (its index in
// Series.Starts; the current start's is len(Series.Starts)), and LeftAt,
// in Series.Starts, when the restart left it: an extension that read it
// may have created occurrences past Next until then (it stopped, or its
// record of them was refused by the restart).
type Start struct {
	DueAt    time.Time
	DueLocal string
	Next     int
	Restarts int
	LeftAt   time.Time
}

// CurrentStart is series s's current start, as AdvanceSeries and
// RestartSeries take it.
func (s Series) CurrentStart() Start {
	return Start{DueAt: s.Item.DueAt, DueLocal: s.Item.Local.DueLocal, Next: s.Next, Restarts: len(s.Starts)}
}

// MaxRestarts bounds how many times a series restarts: each keeps its
// start on the series item.
const MaxRestarts = 100

// startRecord is a Start as stored.
type startRecord struct {
	DueAt    string `dynamodbav:"dueAt"`
	DueLocal string `dynamodbav:"dueLocal,omitempty"`
	Next     int    `dynamodbav:"next"`
	LeftAt   string `dynamodbav:"leftAt,omitempty"`
}

// seriesRecord is a Series as stored.
type seriesRecord struct {
	reminderRecord
	Addresses   map[string]string `dynamodbav:"addresses,omitempty"`
	Next        int               `dynamodbav:"next"`
	ExtendAt    string            `dynamodbav:"extendAt,omitempty"`
	CancelledAt string            `dynamodbav:"cancelledAt,omitempty"`
	DueShard    string            `dynamodbav:"dueShard,omitempty"`
	DueSort     string            `dynamodbav:"dueSort,omitempty"`
	Starts      []startRecord     `dynamodbav:"starts,omitempty"`
	Unsettled   bool              `dynamodbav:"unsettled,omitempty"`
	Early       []string          `dynamodbav:"early,stringset,omitempty"`
}

// seriesKey is series id's item's key.
func seriesKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: sv(PartitionKey(id)), attrSK: sv(seriesSK)}
}

// seriesSort is a series' due index sort key: its extension time, then its
// id.
func seriesSort(at time.Time, id string) string { return Format(at) + "#" + id }

// CreateSeries writes series s (Next 1, due for extension at s.ExtendAt)
// unless a series item exists under its id; then it returns the stored one,
// and exists true, for the caller to compare.
func (l *Ledger) CreateSeries(ctx context.Context, s Series) (stored Series, exists bool, err error) {
	r := s.Item
	if err := checkTimes(r.ID, r.DueAt, r.ExpiresAt); err != nil {
		return Series{}, false, err
	}
	shards, err := l.shardCount(ctx)
	if err != nil {
		return Series{}, false, err
	}
	rec := seriesRecord{
		reminderRecord: reminderRecord{PK: PartitionKey(r.ID), SK: seriesSK, ReminderItem: r,
			DueAt: Format(r.DueAt), ExpiresAt: Format(r.ExpiresAt), CreatedAt: Format(l.cfg.Clock.Now()),
			Late: r.Late.Policy, LateWithin: int64(r.Late.Within / time.Second),
			TimeZone: r.Local.TimeZone, DueLocal: r.Local.DueLocal, ExpiresLocal: r.Local.ExpiresLocal},
		Addresses: s.Addresses, Next: max(s.Next, 1),
	}
	if !s.ExtendAt.IsZero() {
		rec.ExtendAt = Format(s.ExtendAt)
		rec.DueShard, rec.DueSort = SeriesShardKey(ShardOf(r.ID, shards)), seriesSort(s.ExtendAt, r.ID)
	}
	av, err := attributevalue.MarshalMap(rec)
	if err != nil {
		return Series{}, false, fmt.Errorf("ledger: series %q: %w", r.ID, err)
	}
	delete(av, attrTTL) // a series item lives until it is cancelled and purged, or ends
	claim := map[string]types.AttributeValue{attrPK: sv(PartitionKey(r.ID)), attrSK: sv(reminderSK), attrSeriesClaim: &types.AttributeValueMemberBOOL{Value: true}}
	free := aws.String("attribute_not_exists(PK)")
	out, err := l.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(l.cfg.Table), Item: claim, ConditionExpression: free,
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			{Put: &types.Put{TableName: aws.String(l.cfg.Table), Item: av, ConditionExpression: free,
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
		},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err == nil {
		for _, cc := range out.ConsumedCapacity {
			l.countTo(&l.units.Reminders, &cc)
		}
		return s, false, nil
	}
	var cancelled *types.TransactionCanceledException
	if !errors.As(err, &cancelled) {
		return Series{}, false, fmt.Errorf("ledger: write series %q: %w", r.ID, err)
	}
	return l.seriesRefused(ctx, r.ID, cancelled)
}

// seriesRefused is CreateSeries' answer for series id, whose transaction
// (the claim first, then the series item) was cancelled. The reasons say
// which key was taken, and by what (each put returns the item that failed
// its condition): the series item's key, by this series (an earlier
// create: the stored one, exists true); the claim's key, by a reminder
// (ErrReminderID). Where they do not tell (a claim whose series is gone, a
// stand-in that returns no items, or a conflict with a write of the same
// key in flight: a reminder's create at the same time), what stands is
// read. Other reasons (throttling, capacity) are an error to retry.
func (l *Ledger) seriesRefused(ctx context.Context, id string, cancelled *types.TransactionCanceledException) (Series, bool, error) {
	reason := func(i int) (code string, item map[string]types.AttributeValue) {
		if i >= len(cancelled.CancellationReasons) {
			return "", nil
		}
		return aws.ToString(cancelled.CancellationReasons[i].Code), cancelled.CancellationReasons[i].Item
	}
	claimCode, claimItem := reason(0)
	seriesCode, seriesItem := reason(1)
	switch {
	case seriesCode == "ConditionalCheckFailed" && len(seriesItem) > 0:
		stored, err := fromSeriesItem(seriesItem)
		return stored, true, err
	case claimCode == "ConditionalCheckFailed" && len(claimItem) > 0 && !isSeriesClaim(claimItem):
		return Series{}, false, fmt.Errorf("ledger: series %q: %w", id, ErrReminderID)
	case !slices.ContainsFunc([]string{claimCode, seriesCode}, func(c string) bool { return c == "ConditionalCheckFailed" || c == "TransactionConflict" }):
		return Series{}, false, fmt.Errorf("ledger: write series %q: %w", id, cancelled)
	}
	st, err := l.ReadReminder(ctx, id)
	switch {
	case err != nil:
		return Series{}, false, err
	case st.Series != nil:
		return *st.Series, true, nil
	case st.Reminder != nil:
		return Series{}, false, fmt.Errorf("ledger: series %q: %w", id, ErrReminderID)
	}
	return Series{}, false, fmt.Errorf("ledger: write series %q: its keys were taken (%s) and hold neither a reminder nor a series now "+
		"(another create or a purge of the id at the same time); create it again", id, cancelled.ErrorMessage())
}

func fromSeriesItem(av map[string]types.AttributeValue) (Series, error) {
	r, err := fromReminderItem(av)
	if err != nil {
		return Series{}, err
	}
	var rec seriesRecord
	if err := attributevalue.UnmarshalMap(av, &rec); err != nil {
		return Series{}, fmt.Errorf("ledger: stored series is unreadable: %w", err)
	}
	s := Series{Item: r, Addresses: rec.Addresses, Next: rec.Next, Unsettled: rec.Unsettled, Early: rec.Early}
	slices.Sort(s.Early)
	for _, st := range rec.Starts {
		at, err := parseOpt("starts.dueAt", st.DueAt)
		if err != nil {
			return Series{}, err
		}
		left, err := parseOpt("starts.leftAt", st.LeftAt)
		if err != nil {
			return Series{}, err
		}
		s.Starts = append(s.Starts, Start{DueAt: at, DueLocal: st.DueLocal, Next: st.Next, Restarts: len(s.Starts), LeftAt: left})
	}
	if s.ExtendAt, err = parseOpt("extendAt", rec.ExtendAt); err != nil {
		return Series{}, err
	}
	if s.CancelledAt, err = parseOpt("cancelledAt", rec.CancelledAt); err != nil {
		return Series{}, err
	}
	s.Item.TTL = time.Time{}
	return s, nil
}

// MaxSeriesSpan bounds how long after a series' cancel one of its
// occurrences may still be live (its due time, at most the intake's five
// years ahead, plus its window): the cancelled series item is kept the
// retention after that, then deleted by its TTL.
const MaxSeriesSpan = 5*366*24*time.Hour + 7*24*time.Hour

// ErrSeriesMoved is AdvanceSeries' refusal when the series is not at the
// Next the caller read (another extension advanced it), or was cancelled.
var ErrSeriesMoved = errors.New("the series moved on since it was read")

// AdvanceSeries records that series id's occurrences before next are
// created, and when it is next extended (zero: never, every occurrence is
// created): only while it is at from (its Next, from the same start: its
// DueAt and its count of restarts, since a restart in between may have
// brought it back to the same Next, and even the same DueAt) and not
// cancelled (ErrSeriesMoved otherwise), so that of two extensions one
// advances it, and none the restarted series.
func (l *Ledger) AdvanceSeries(ctx context.Context, id string, from Start, next int, extendAt time.Time) error {
	shards, err := l.shardCount(ctx)
	if err != nil {
		return err
	}
	values := map[string]types.AttributeValue{":from": av(from.Next), ":fromDue": sv(Format(from.DueAt)), ":next": av(next)}
	restarts := restartsAre(from.Restarts, values)
	set := "SET #next = :next"
	remove := ""
	if extendAt.IsZero() {
		remove = " REMOVE extendAt, dueShard, dueSort"
	} else {
		set += ", extendAt = :at, dueShard = :shard, dueSort = :sort"
		values[":at"], values[":shard"], values[":sort"] = sv(Format(extendAt)), sv(SeriesShardKey(ShardOf(id, shards))), sv(seriesSort(extendAt, id))
	}
	_, err = l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.cfg.Table), Key: seriesKey(id),
		UpdateExpression:          aws.String(set + remove),
		ConditionExpression:       aws.String("#next = :from AND dueAt = :fromDue AND " + restarts + " AND attribute_not_exists(cancelledAt)"),
		ExpressionAttributeNames:  map[string]string{"#next": "next"},
		ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("ledger: advance series %q: %w", id, ErrSeriesMoved)
	}
	if err != nil {
		return fmt.Errorf("ledger: advance series %q: %w", id, err)
	}
	return nil
}

// RestartSeries moves series id from its start from (the DueAt, DueLocal
// and Next the caller read) to a new first occurrence: due at due,
// expiring at expires, with local times local (in the series' zone), none
// of its occurrences created (Next 1), due for extension at extendAt. The
// start from is kept (Series.Starts, left at extendAt) and the restart
// marked unsettled, until SettleRestart: so that the occurrences from
// created and the new start does not give are cancelled even if the
// caller stops before it cancels them (the next extension does). Only
// while the series is at from (Next, DueAt, restarts), not cancelled and
// not unsettled (ErrSeriesMoved otherwise: an extension came between, or
// another restart), and had fewer than MaxRestarts (ErrTooManyRestarts).
func (l *Ledger) RestartSeries(ctx context.Context, id string, from Start, due, expires time.Time, local Local, extendAt time.Time) error {
	if err := checkTimes(id, due, expires); err != nil {
		return err
	}
	if from.Restarts >= MaxRestarts {
		return fmt.Errorf("ledger: restart series %q: %w", id, ErrTooManyRestarts)
	}
	shards, err := l.shardCount(ctx)
	if err != nil {
		return err
	}
	prev, err := attributevalue.Marshal([]startRecord{{DueAt: Format(from.DueAt), DueLocal: from.DueLocal, Next: from.Next, LeftAt: Format(extendAt)}})
	if err != nil {
		return err
	}
	values := map[string]types.AttributeValue{":from": av(from.Next), ":fromDue": sv(Format(from.DueAt)), ":one": av(1),
		":due": sv(Format(due)), ":exp": sv(Format(expires)), ":prev": prev, ":none": &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
		":true": &types.AttributeValueMemberBOOL{Value: true},
		":at":   sv(Format(extendAt)), ":shard": sv(SeriesShardKey(ShardOf(id, shards))), ":sort": sv(seriesSort(extendAt, id))}
	names := map[string]string{"#next": "next"}
	set := "SET #next = :one, dueAt = :due, expiresAt = :exp, extendAt = :at, dueShard = :shard, dueSort = :sort, " +
		"starts = list_append(if_not_exists(starts, :none), :prev), unsettled = :true"
	var remove []string
	// By placeholder: timeZone is one of DynamoDB's reserved words.
	for _, f := range []struct{ attr, value string }{{"timeZone", local.TimeZone}, {"dueLocal", local.DueLocal}, {"expiresLocal", local.ExpiresLocal}} {
		names["#"+f.attr] = f.attr
		if f.value == "" {
			remove = append(remove, "#"+f.attr)
			continue
		}
		set += ", #" + f.attr + " = :" + f.attr
		values[":"+f.attr] = sv(f.value)
	}
	if len(remove) > 0 {
		set += " REMOVE " + strings.Join(remove, ", ")
	}
	_, err = l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.cfg.Table), Key: seriesKey(id),
		UpdateExpression: aws.String(set),
		ConditionExpression: aws.String("#next = :from AND dueAt = :fromDue AND " + restartsAre(from.Restarts, values) +
			" AND attribute_not_exists(cancelledAt) AND attribute_not_exists(unsettled)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("ledger: restart series %q: %w", id, ErrSeriesMoved)
	}
	if err != nil {
		return fmt.Errorf("ledger: restart series %q: %w", id, err)
	}
	return nil
}

// createOccurrence is CreateOccurrence's transaction: the put of the
// reminder item av, and the check that series r.Series is at start at.
func (l *Ledger) createOccurrence(ctx context.Context, r ReminderItem, av map[string]types.AttributeValue, at Start) (ReminderItem, bool, error) {
	values := map[string]types.AttributeValue{":due": sv(Format(at.DueAt))}
	cond := "dueAt = :due AND " + restartsAre(at.Restarts, values) + " AND attribute_not_exists(cancelledAt)"
	in := &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(l.cfg.Table), Item: av, ConditionExpression: aws.String("attribute_not_exists(PK)"),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String(l.cfg.Table),
				Key:                 seriesKey(r.Series),
				ConditionExpression: aws.String(cond), ExpressionAttributeValues: values}},
		},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	for wait := conflictPause; ; wait *= 2 {
		out, err := l.api.TransactWriteItems(ctx, in)
		if err == nil {
			for _, cc := range out.ConsumedCapacity {
				l.countTo(&l.units.Reminders, &cc)
			}
			return r, false, nil
		}
		var cancelled *types.TransactionCanceledException
		if !errors.As(err, &cancelled) {
			return ReminderItem{}, false, fmt.Errorf("ledger: write occurrence %q: %w", r.ID, err)
		}
		code := func(i int) string {
			if i >= len(cancelled.CancellationReasons) {
				return ""
			}
			return aws.ToString(cancelled.CancellationReasons[i].Code)
		}
		switch {
		case code(1) == "ConditionalCheckFailed":
			return ReminderItem{}, false, fmt.Errorf("ledger: occurrence %q of series %q: %w", r.ID, r.Series, ErrSeriesMoved)
		case code(0) == "ConditionalCheckFailed":
			item := cancelled.CancellationReasons[0].Item
			if isSeriesClaim(item) {
				return ReminderItem{}, false, fmt.Errorf("ledger: reminder %q: %w", r.ID, ErrSeriesID)
			}
			if len(item) == 0 {
				// A stand-in that returns no item: what stands is read.
				st, err := l.ReadReminder(ctx, r.ID)
				switch {
				case err != nil:
					return ReminderItem{}, false, err
				case st.ReminderErr != nil:
					return ReminderItem{}, false, fmt.Errorf("ledger: reminder %q: %w", r.ID, st.ReminderErr)
				case st.Reminder != nil:
					return *st.Reminder, true, nil
				case st.Series != nil:
					return ReminderItem{}, false, fmt.Errorf("ledger: reminder %q: %w", r.ID, ErrSeriesID)
				case wait > 4*conflictPause:
					return ReminderItem{}, false, fmt.Errorf("ledger: write occurrence %q: its key is taken by an item that is neither a reminder nor a series (a series' claim left by a purge at the same time?); create it again", r.ID)
				}
				if err := pause(ctx, wait); err != nil {
					return ReminderItem{}, false, fmt.Errorf("ledger: write occurrence %q: %w", r.ID, err)
				}
				continue // gone since: put again
			}
			stored, err := fromReminderItem(item)
			return stored, true, err
		case (code(0) == "TransactionConflict" || code(1) == "TransactionConflict") && wait <= 4*conflictPause:
			// Another transaction on one of the keys: put again once it
			// is done, and the conditions tell.
			if err := pause(ctx, wait); err != nil {
				return ReminderItem{}, false, fmt.Errorf("ledger: write occurrence %q: %w", r.ID, err)
			}
		default:
			return ReminderItem{}, false, fmt.Errorf("ledger: write occurrence %q: %w", r.ID, err)
		}
	}
}

// pause waits d, for another DynamoDB transaction on the same keys to
// finish, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d): // wall clock: a pause for DynamoDB's transaction to finish, DynamoDB's time
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// restartsAre is the condition that a series has had n restarts (its
// starts' count), with its value added to values.
func restartsAre(n int, values map[string]types.AttributeValue) string {
	if n == 0 {
		return "attribute_not_exists(starts)"
	}
	values[":restarts"] = av(n)
	return "size(starts) = :restarts"
}

// NoteEarly records on series id that its occurrence oid is created ahead
// of its extension (Series.Early): before the create, so that a create
// never goes unnoted. ErrTooManyEarly past MaxEarly; ErrNotFound without
// the series.
func (l *Ledger) NoteEarly(ctx context.Context, id, oid string) error {
	_, err := l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.cfg.Table), Key: seriesKey(id),
		UpdateExpression:    aws.String("ADD early :one"),
		ConditionExpression: aws.String("attribute_exists(PK) AND (attribute_not_exists(early) OR size(early) < :max OR contains(early, :oid))"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": &types.AttributeValueMemberSS{Value: []string{oid}}, ":oid": sv(oid), ":max": av(MaxEarly),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) == 0 {
			return fmt.Errorf("ledger: series %q: %w", id, ErrNotFound)
		}
		return fmt.Errorf("ledger: series %q: occurrence %s: %w", id, oid, ErrTooManyEarly)
	}
	if err != nil {
		return fmt.Errorf("ledger: series %q: note occurrence %s: %w", id, oid, err)
	}
	return nil
}

// ErrTooManyRestarts is RestartSeries' refusal of a series restarted
// MaxRestarts times already.
var ErrTooManyRestarts = fmt.Errorf("the series was restarted %d times, the most a series is", MaxRestarts)

// SettleRestart marks series id's last restart settled: the occurrences of
// its start before it that the new one does not give are cancelled. starts
// is how many starts the caller read (len(Series.Starts)): a settle of an
// earlier restart does not settle a later one (ErrSeriesMoved then).
func (l *Ledger) SettleRestart(ctx context.Context, id string, starts int) error {
	_, err := l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.cfg.Table), Key: seriesKey(id),
		UpdateExpression:          aws.String("REMOVE unsettled"),
		ConditionExpression:       aws.String("size(starts) = :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": av(starts)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("ledger: settle series %q: %w", id, ErrSeriesMoved)
	}
	if err != nil {
		return fmt.Errorf("ledger: settle series %q: %w", id, err)
	}
	return nil
}

// CancelSeries marks series id cancelled (its first cancel's time stands)
// and takes it out of the due index: no occurrence is created any more.
// ErrNotFound if there is no such series.
func (l *Ledger) CancelSeries(ctx context.Context, id string) (Series, error) {
	out, err := l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.cfg.Table), Key: seriesKey(id),
		// Kept the retention after its cancel, as long as any occurrence it
		// created may still be live; then DynamoDB deletes it, addresses
		// and all.
		UpdateExpression:          aws.String("SET cancelledAt = if_not_exists(cancelledAt, :now), #ttl = if_not_exists(#ttl, :ttl) REMOVE extendAt, dueShard, dueSort"),
		ConditionExpression:       aws.String("attribute_exists(PK)"),
		ExpressionAttributeNames:  map[string]string{"#ttl": attrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": sv(Format(l.cfg.Clock.Now())), ":ttl": av(l.Expiry(l.cfg.Clock.Now().Add(MaxSeriesSpan)).Unix())},
		ReturnValues:              types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return Series{}, fmt.Errorf("ledger: cancel series %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Series{}, fmt.Errorf("ledger: cancel series %q: %w", id, err)
	}
	sr, err := fromSeriesItem(out.Attributes)
	if err != nil {
		return Series{}, err
	}
	// Its claim of the id goes with it (a series created before claims has
	// none: nothing to do).
	_, err = l.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.cfg.Table), Key: map[string]types.AttributeValue{attrPK: sv(PartitionKey(id)), attrSK: sv(reminderSK)},
		UpdateExpression:          aws.String("SET #ttl = if_not_exists(#ttl, :ttl)"),
		ConditionExpression:       aws.String("attribute_exists(" + attrSeriesClaim + ")"),
		ExpressionAttributeNames:  map[string]string{"#ttl": attrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{":ttl": out.Attributes[attrTTL]},
	})
	if err != nil && !errors.As(err, &ccf) {
		return Series{}, fmt.Errorf("ledger: cancel series %q: its claim of the id: %w", id, err)
	}
	return sr, nil
}

// DueSeries lists the ids of the series of shard whose extension time is
// at or before by, at most limit, earliest first.
func (l *Ledger) DueSeries(ctx context.Context, shard int, by time.Time, limit int) ([]string, error) {
	out, err := l.api.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(l.cfg.Table), IndexName: aws.String(IndexName),
		KeyConditionExpression: aws.String("dueShard = :shard AND dueSort <= :by"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":shard": sv(SeriesShardKey(shard)), ":by": sv(Format(by) + "#~"),
		},
		Limit: aws.Int32(int32(limit)),
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: series due in shard %d: %w", shard, err)
	}
	var ids []string
	for _, it := range out.Items {
		if s, ok := it[attrDueSort].(*types.AttributeValueMemberS); ok {
			if _, id, ok := strings.Cut(s.Value, "#"); ok {
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

func copySeries(s Series) Series {
	s.Item = copyReminder(s.Item)
	s.Addresses = maps.Clone(s.Addresses)
	s.Starts = slices.Clone(s.Starts)
	s.Early = slices.Clone(s.Early)
	return s
}

// CreateSeries is Ledger.CreateSeries.
func (m *Memory) CreateSeries(_ context.Context, s Series) (Series, bool, error) {
	if err := checkTimes(s.Item.ID, s.Item.DueAt, s.Item.ExpiresAt); err != nil {
		return Series{}, false, err
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	if stored, ok := m.t.series[s.Item.ID]; ok {
		return copySeries(stored), true, nil
	}
	if _, ok := m.t.reminders[s.Item.ID]; ok {
		return Series{}, false, fmt.Errorf("ledger: series %q: %w", s.Item.ID, ErrReminderID)
	}
	s = copySeries(s)
	s.Item.DueAt, s.Item.ExpiresAt, s.Item.TTL = ms(s.Item.DueAt), ms(s.Item.ExpiresAt), time.Time{}
	s.Next, s.ExtendAt = max(s.Next, 1), ms(s.ExtendAt)
	m.t.series[s.Item.ID] = s
	m.t.created[s.Item.ID] = m.now()
	return copySeries(s), false, nil
}

// AdvanceSeries is Ledger.AdvanceSeries.
func (m *Memory) AdvanceSeries(_ context.Context, id string, from Start, next int, extendAt time.Time) error {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	s, ok := m.t.series[id]
	if !ok || s.Next != from.Next || !s.Item.DueAt.Equal(ms(from.DueAt)) || len(s.Starts) != from.Restarts || !s.CancelledAt.IsZero() {
		return fmt.Errorf("ledger: advance series %q: %w", id, ErrSeriesMoved)
	}
	s.Next, s.ExtendAt = next, ms(extendAt)
	m.t.series[id] = s
	return nil
}

// RestartSeries is Ledger.RestartSeries.
func (m *Memory) RestartSeries(_ context.Context, id string, from Start, due, expires time.Time, local Local, extendAt time.Time) error {
	if err := checkTimes(id, due, expires); err != nil {
		return err
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	if from.Restarts >= MaxRestarts {
		return fmt.Errorf("ledger: restart series %q: %w", id, ErrTooManyRestarts)
	}
	s, ok := m.t.series[id]
	if !ok || s.Next != from.Next || !s.Item.DueAt.Equal(ms(from.DueAt)) || len(s.Starts) != from.Restarts || !s.CancelledAt.IsZero() || s.Unsettled {
		return fmt.Errorf("ledger: restart series %q: %w", id, ErrSeriesMoved)
	}
	s = copySeries(s)
	s.Starts = append(s.Starts, Start{DueAt: ms(from.DueAt), DueLocal: from.DueLocal, Next: from.Next, Restarts: len(s.Starts), LeftAt: ms(extendAt)})
	s.Item.DueAt, s.Item.ExpiresAt, s.Item.Local = ms(due), ms(expires), local
	s.Next, s.ExtendAt, s.Unsettled = 1, ms(extendAt), true
	m.t.series[id] = s
	return nil
}

// NoteEarly is Ledger.NoteEarly.
func (m *Memory) NoteEarly(_ context.Context, id, oid string) error {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	s, ok := m.t.series[id]
	if !ok {
		return fmt.Errorf("ledger: series %q: %w", id, ErrNotFound)
	}
	if slices.Contains(s.Early, oid) {
		return nil
	}
	if len(s.Early) >= MaxEarly {
		return fmt.Errorf("ledger: series %q: occurrence %s: %w", id, oid, ErrTooManyEarly)
	}
	s = copySeries(s)
	s.Early = append(s.Early, oid)
	slices.Sort(s.Early)
	m.t.series[id] = s
	return nil
}

// SettleRestart is Ledger.SettleRestart.
func (m *Memory) SettleRestart(_ context.Context, id string, starts int) error {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	s, ok := m.t.series[id]
	if !ok || len(s.Starts) == 0 || len(s.Starts) != starts {
		return fmt.Errorf("ledger: settle series %q: %w", id, ErrSeriesMoved)
	}
	s.Unsettled = false
	m.t.series[id] = s
	return nil
}

// CancelSeries is Ledger.CancelSeries.
func (m *Memory) CancelSeries(_ context.Context, id string) (Series, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	s, ok := m.t.series[id]
	if !ok {
		return Series{}, fmt.Errorf("ledger: cancel series %q: %w", id, ErrNotFound)
	}
	if s.CancelledAt.IsZero() {
		s.CancelledAt = ms(m.now())
	}
	s.ExtendAt = time.Time{}
	m.t.series[id] = s
	return copySeries(s), nil
}

// DueSeries is Ledger.DueSeries.
func (m *Memory) DueSeries(_ context.Context, shard int, by time.Time, limit int) ([]string, error) {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	shards, err := m.shardCount()
	if err != nil {
		return nil, err
	}
	var due []Series
	for id, s := range m.t.series {
		if !s.ExtendAt.IsZero() && !s.ExtendAt.After(ms(by)) && ShardOf(id, shards) == shard {
			due = append(due, s)
		}
	}
	slices.SortFunc(due, func(a, b Series) int {
		return strings.Compare(seriesSort(a.ExtendAt, a.Item.ID), seriesSort(b.ExtendAt, b.Item.ID))
	})
	var ids []string
	for _, s := range due[:min(limit, len(due))] {
		ids = append(ids, s.Item.ID)
	}
	return ids, nil
}
