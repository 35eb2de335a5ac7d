package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/internal/text"
)

// An address is shown unmasked to an operator (the support console) only
// with a reason, which the delivery's history records: who, when and why.

// Reveal is who is shown a delivery's address, and why.
type Reveal struct {
	// By names the operator. Required.
	By string
	// Reason says why. Required; kept in the history (no names or
	// addresses), clipped so that the note fits MaxNote.
	Reason string
}

// Note is the history note of the reveal: "address revealed to ana:
// ticket 4821", the reason clipped to fit MaxNote. It refuses an empty By
// or Reason.
func (r Reveal) Note() (string, error) {
	by, reason := strings.TrimSpace(r.By), strings.Join(strings.Fields(r.Reason), " ")
	switch {
	case by == "":
		return "", errors.New("ledger: a reveal names who is shown the address (By)")
	case reason == "":
		return "", errors.New("ledger: a reveal says why (Reason)")
	}
	return text.Clip(RevealPrefix(by)+reason, MaxNote), nil
}

// RevealPrefix is what a reveal's note says before its reason.
func RevealPrefix(by string) string { return "address revealed to " + strings.TrimSpace(by) + ": " }

// withReveal returns d with an entry of the reveal at now in its history:
// the status unchanged, Reveal set, the note r's; the history bounded to
// limit entries and the item to FeedbackItemBytes by dropping earlier
// reveals first, then as withFeedback bounds it (so a run of reveals
// costs the history one entry at most). Shared by the DynamoDB ledger and
// Memory.
func (d Delivery) withReveal(note string, now time.Time, limit int) Delivery {
	d.History = append(slices.Clone(d.History), Entry{At: Format(now), Status: d.Status, Reveal: true, Note: note})
	for len(d.History) > limit || itemBytes(d) > FeedbackItemBytes {
		// An earlier reveal goes first: reveals never push out the
		// transitions and feedback that answer "why", however many.
		i := slices.IndexFunc(d.History, func(e Entry) bool { return e.Reveal })
		if i == len(d.History)-1 {
			i = oldestDroppable(d.History)
		}
		if i < 0 {
			break
		}
		d.History = slices.Delete(d.History, i, i+1)
	}
	return d
}

// RecordReveal records in the history of the delivery key names that its
// address was shown to r.By, and why (see withReveal), and returns the
// delivery as written, address included. Nothing else changes: not the
// status, the lease, the attempts, updatedAt, the TTL or the due index;
// a delivery in any status takes it.
//
// It reads the delivery (strongly consistent), and writes with one
// conditional UpdateItem that holds only if the history is as read; a
// write refused because the history changed meanwhile is decided again
// from the item the refusal returns (ALL_OLD), up to four times (then
// ErrChanged). It refuses an unknown delivery with ErrNotFound, and one
// being sent (inFlight) with ErrInFlight, in a *RefusedError.
func (l *Ledger) RecordReveal(ctx context.Context, key message.DeliveryKey, r Reveal) (Delivery, error) {
	note, err := r.Note()
	if err != nil {
		return Delivery{}, fmt.Errorf("%w, for %s", err, key)
	}
	d, err := l.Get(ctx, key)
	if err != nil {
		var re *RefusedError
		if errors.As(err, &re) {
			re.Op = "reveal"
		}
		return Delivery{}, err
	}
	for range 4 {
		if inFlight(d, l.cfg.Clock.Now().Add(-l.cfg.ClockSkew)) {
			return Delivery{}, &RefusedError{Op: "reveal", Key: key, Reason: ErrInFlight, Current: d}
		}
		next := d.withReveal(note, l.cfg.Clock.Now(), l.cfg.HistoryLimit)
		u := &update{op: "reveal", key: key, values: map[string]types.AttributeValue{}}
		u.set("history", ":history", next.History)
		u.cond = "attribute_exists(PK) AND " + u.historyIs(d.History)
		out, err := l.write(ctx, u, func(Delivery) error { return ErrChanged })
		var re *RefusedError
		if !errors.As(err, &re) || !errors.Is(re.Reason, ErrChanged) {
			return out, err
		}
		d = re.Current
	}
	return Delivery{}, &RefusedError{Op: "reveal", Key: key, Reason: ErrChanged, Current: d}
}

// inFlight reports whether d is being sent under a lease that has not
// lapsed at now: its consumer's next write replaces the history from what
// it read at its claim, which would drop a reveal written meanwhile, so a
// reveal waits until the send is recorded (seconds).
func inFlight(d Delivery, now time.Time) bool {
	return d.Status == StatusSending && d.LeaseUntil.After(now)
}

// RecordReveal is Ledger.RecordReveal.
func (m *Memory) RecordReveal(_ context.Context, key message.DeliveryKey, r Reveal) (Delivery, error) {
	note, err := r.Note()
	if err != nil {
		return Delivery{}, fmt.Errorf("%w, for %s", err, key)
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	d, ok := m.t.items[key]
	if !ok {
		return Delivery{}, &RefusedError{Op: "reveal", Key: key, Reason: ErrNotFound}
	}
	if inFlight(d, m.now()) {
		return Delivery{}, &RefusedError{Op: "reveal", Key: key, Reason: ErrInFlight, Current: copyOf(d)}
	}
	next := d.withReveal(note, m.now(), m.cfg.HistoryLimit)
	m.t.items[key] = copyOf(next)
	return copyOf(next), nil
}
