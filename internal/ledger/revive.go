package ledger

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The operator's revive from the ledger (nudge ledger revive): a dead
// delivery whose DLQ copy may have aged out (the DLQ keeps a message 14
// days) goes back to the calendar, read from the ledger alone. Claim's
// Revive is another path: a DLQ copy's claim of a dead delivery.

// MaxDeadRead is the most items one ReadDead reads.
const MaxDeadRead = 1_000_000

// DeadQuery bounds one read of the dead deliveries.
type DeadQuery struct {
	// Read is the most items the read examines, of every kind and state
	// (a scan reads reminder items, cursors and live deliveries too, and
	// is priced by what it reads). Required, 1 to MaxDeadRead.
	Read int
	// After is an earlier page's Next, to read on from where it stopped;
	// "" reads from the start.
	After string
}

// DeadPage is what one ReadDead found.
type DeadPage struct {
	// Deliveries are the dead deliveries among the items read, as read,
	// in no order, without the recipient's address and template data
	// (personal data a revive does not need).
	Deliveries []Delivery
	// Scanned counts the items read, at most the query's Read.
	Scanned int
	// Next, when the read stopped at its bound, is where the next read
	// goes on (DeadQuery.After); "" once the table has been read to its
	// end. It means something to this ledger only.
	Next string
}

// deadToken is where a read of the dead deliveries stopped: the last key
// read.
type deadToken struct {
	PK string `json:"p"`
	SK string `json:"s"`
}

func (k deadToken) encode() string {
	b, _ := json.Marshal(k)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeDeadToken(s string) (deadToken, error) {
	var k deadToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 2048 || json.Unmarshal(b, &k) != nil || k.PK == "" || k.SK == "" {
		return k, fmt.Errorf("ledger: read the dead deliveries after %q: %w", s, ErrBadPageToken)
	}
	return k, nil
}

func (q DeadQuery) check() (*deadToken, error) {
	if q.Read < 1 || q.Read > MaxDeadRead {
		return nil, fmt.Errorf("ledger: read the dead deliveries: a read of %d items; read 1 to %d at a time", q.Read, MaxDeadRead)
	}
	if q.After == "" {
		return nil, nil
	}
	k, err := decodeDeadToken(q.After)
	return &k, err
}

// deadProjection is what ReadDead reads of a delivery item: all a revive
// and its review need, and nothing personal.
var deadProjection = []string{attrPK, attrSK, "reminderId", "channel", "provider", "status", "recipientRef", "templateRef",
	"dueAt", "expiresAt", "attempts", "budgetFrom", "unendedAttempt", "repairs", "lastErrorClass", "lastError", "updatedAt", "history", attrTTL,
	attrFallback, attrFallbackTaken}

// ReadDead reads up to q.Read items of the table, from the start or from
// where an earlier read stopped, and returns the dead deliveries among
// them. Dead deliveries are outside the due index (every terminal
// transition leaves it), so this is a scan, strongly consistent, bounded
// by q.Read and paged by Next: for the operator, never the functions.
func (l *Ledger) ReadDead(ctx context.Context, q DeadQuery) (DeadPage, error) {
	after, err := q.check()
	if err != nil {
		return DeadPage{}, err
	}
	in := l.deliveryScan(deadProjection, "#status = :dead", map[string]string{"#status": "status"},
		map[string]types.AttributeValue{":dead": sv(StatusDead)}, after)
	var page DeadPage
	page.Deliveries, page.Scanned, page.Next, err = l.scanDeliveries(ctx, in, q.Read, "the dead deliveries")
	return page, err
}

// deliveryScan is a strongly consistent scan of the table's delivery items
// that pass filter (with its names and values), projected to projection,
// from after (nil: the start): for scanDeliveries.
func (l *Ledger) deliveryScan(projection []string, filter string, names map[string]string, values map[string]types.AttributeValue,
	after *deadToken) *dynamodb.ScanInput {
	var proj []string
	for i, a := range projection {
		p := fmt.Sprintf("#a%d", i) // several are reserved words (status, ttl)
		names[p] = a
		proj = append(proj, p)
	}
	names["#sk"], values[":dlv"] = attrSK, sv("DLV#")
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(l.cfg.Table),
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("begins_with(#sk, :dlv) AND " + filter),
		ProjectionExpression:      aws.String(strings.Join(proj, ", ")),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}
	if after != nil {
		in.ExclusiveStartKey = map[string]types.AttributeValue{attrPK: sv(after.PK), attrSK: sv(after.SK)}
	}
	return in
}

// scanDeliveries runs in, a scan of the table's delivery items, until it
// has read read items (next then says where a read goes on) or the end of
// the table; what names the read in its errors.
func (l *Ledger) scanDeliveries(ctx context.Context, in *dynamodb.ScanInput, read int, what string) (ds []Delivery, scanned int, next string, err error) {
	for {
		in.Limit = aws.Int32(int32(read - scanned))
		out, err := l.api.Scan(ctx, in)
		if err != nil {
			return ds, scanned, "", fmt.Errorf("ledger: read %s of %s: %w", what, l.cfg.Table, err)
		}
		scanned += int(out.ScannedCount)
		for _, it := range out.Items {
			d, err := fromItem(it)
			if err != nil {
				return ds, scanned, "", err
			}
			ds = append(ds, d)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return ds, scanned, "", nil
		}
		if scanned >= read {
			pk, _ := out.LastEvaluatedKey[attrPK].(*types.AttributeValueMemberS)
			sk, _ := out.LastEvaluatedKey[attrSK].(*types.AttributeValueMemberS)
			if pk == nil || sk == nil {
				return ds, scanned, "", fmt.Errorf("ledger: read %s of %s: the scan stopped at a key without PK and SK", what, l.cfg.Table)
			}
			return ds, scanned, deadToken{PK: pk.Value, SK: sk.Value}.encode(), nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// Revival is who revives a dead delivery, and why: both are kept in its
// history.
type Revival struct {
	// By names the operator (nudge: --by, $NUDGE_OPERATOR or user@host).
	By string
	// Reason says why. Kept in the history: no names or addresses.
	Reason string
}

// MaxNote is the most of a note a history entry keeps, in bytes.
const MaxNote = 120

// Note is the history note of the revive: who, and why. It refuses an
// empty By or Reason, and a note longer than MaxNote, rather than clip who
// or why.
func (r Revival) Note() (string, error) {
	by, reason := strings.TrimSpace(r.By), strings.TrimSpace(r.Reason)
	switch {
	case by == "":
		return "", fmt.Errorf("ledger: a revive names who revives (By)")
	case reason == "":
		return "", fmt.Errorf("ledger: a revive says why (Reason)")
	}
	note := "revived by " + by + ": " + reason
	if len(note) > MaxNote {
		return "", fmt.Errorf("ledger: the revive's note %q is %d bytes; a history entry keeps %d: shorten the reason to %d bytes",
			note, len(note), MaxNote, max(0, len(reason)-(len(note)-MaxNote)))
	}
	return note, nil
}

// Revive hands a dead delivery back to the calendar, as its caller read
// it (ReadDead, Get): it becomes pending and enters the due index again at
// publish time max(dueAt − Lookahead, now + ClockSkew), ahead of every
// enqueue cursor, so the enqueue hands it to the queue on its next run,
// and the overdue scan watches it again; its attempt budget restarts
// (budgetFrom = attempts), its TTL is set from its expiresAt and never
// lowered (as a redrive's), and its history, bounded, records who revived
// it and why (Revival.Note). The write holds only if the delivery is still
// dead as read (status, updatedAt, dueAt), so two operators never revive
// it twice, and only if it has not expired (expiresAt after now +
// ClockSkew): a delivery past its expiresAt is never revived. It refuses
// with ErrNotDead (not dead: revived, redriven, cancelled, or claimed by a
// DLQ copy meanwhile), ErrAlreadySent, ErrFallbackTaken (its fallback was
// taken: the fallback stands in for it, FallbackTakenNote says which and
// when), ErrChanged (dead, but dead-lettered again since the read),
// ErrExpired or ErrNotFound.
//
// A DLQ copy of the delivery's message, redriven afterwards by the CLI or
// the console, finds it live: the consumer claims it as it claims any copy
// (pending, queued, retrying → sending, one claim at a time), and once it
// is sent every other copy is a duplicate. A copy of its dead-lettering
// redriven after it died again carries the older attempt count and is
// refused (Claim.ReviveAttempts). So it is sent once.
func (l *Ledger) Revive(ctx context.Context, d Delivery, r Revival) (Delivery, error) {
	note, err := r.Note()
	if err != nil {
		return Delivery{}, err
	}
	if d.Status != StatusDead {
		return Delivery{}, &RefusedError{Op: "revive", Key: d.Key(), Reason: ErrNotDead, Current: d}
	}
	if !d.FallbackTaken.IsZero() {
		return Delivery{}, &RefusedError{Op: "revive", Key: d.Key(), Reason: ErrFallbackTaken, Current: d}
	}
	shards, err := l.shardCount(ctx)
	if err != nil {
		return Delivery{}, err
	}
	now := l.cfg.Clock.Now()
	live := now.Add(l.cfg.ClockSkew)
	u := l.newUpdate("revive", d.Key(), now)
	u.set("#status", ":pending", StatusPending)
	u.set(attrDueShard, ":shard", ShardKey(ShardOf(d.ReminderID, shards)))
	u.set(attrDueSort, ":sort", IndexSort(l.publishAt(d.DueAt, now), d.Key()))
	u.names["#ttl"] = attrTTL
	if d.ExpiresAt.IsZero() { // not as read: keep it rather than guess
		u.remove("#ttl")
	} else {
		u.set("#ttl", ":ttl", later(l.Expiry(d.ExpiresAt), d.TTL).Unix())
	}
	u.remove("claimToken", "leaseUntil", "nextAttemptAt", "repairs")
	u.sets = append(u.sets, "budgetFrom = if_not_exists(attempts, :zero)") // the attempt budget restarts
	// The history as read, with the revive's entry, bounded: the condition
	// guarantees nobody changed it meanwhile.
	u.set("history", ":history", boundHistory(d.History, Entry{At: Format(now), Status: StatusPending, Attempt: d.Attempts, Note: note}, l.cfg.HistoryLimit))
	u.values[":dead"], u.values[":zero"] = sv(StatusDead), av(0)
	u.values[":was"], u.values[":dueAt"], u.values[":live"] = sv(formatOpt(d.UpdatedAt)), sv(Format(d.DueAt)), sv(Format(live))
	u.cond = "attribute_exists(PK) AND #status = :dead AND updatedAt = :was AND dueAt = :dueAt AND expiresAt > :live" +
		" AND attribute_not_exists(" + attrFallbackTaken + ")"
	return l.write(ctx, u, func(old Delivery) error { return reviveRefusal(old, d, ms(live)) })
}

// reviveRefusal says why a Revive of read was refused, with deliveries
// expiring by live counted as expired.
func reviveRefusal(old, read Delivery, live time.Time) error {
	switch {
	case old.Status == StatusSent:
		return ErrAlreadySent
	case old.Status != StatusDead:
		return ErrNotDead
	case !old.FallbackTaken.IsZero():
		return ErrFallbackTaken
	case !old.UpdatedAt.Equal(ms(read.UpdatedAt)) || !old.DueAt.Equal(ms(read.DueAt)):
		return ErrChanged
	case !old.ExpiresAt.After(live):
		return ErrExpired
	}
	return fmt.Errorf("unexpected state %q", old.Status)
}
