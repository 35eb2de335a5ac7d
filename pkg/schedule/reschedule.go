package schedule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/failure"
)

// Times are a reschedule's new times, as a user writes them: RFC 3339,
// or on the recipient's wall clock (Local's rules).
type Times struct {
	// DueAt is the new due time. Required unless DueLocal is given.
	DueAt string `json:"dueAt,omitempty"`
	// ExpiresAt is the new expiry. Default: the new dueAt plus the
	// reminder's window (its expiresAt − dueAt), which a move keeps.
	ExpiresAt string `json:"expiresAt,omitempty"`
	// DueLocal and ExpiresLocal are the new times on the recipient's wall
	// clock, in TimeZone, which defaults to the reminder's. A reschedule
	// keeps the reminder's zone and replaces its local times: one given
	// as dueAt alone has no dueLocal any more.
	DueLocal     string `json:"dueLocal,omitempty"`
	ExpiresLocal string `json:"expiresLocal,omitempty"`
	TimeZone     string `json:"timeZone,omitempty"`
}

// MoveResult is what Reschedule did to one delivery.
type MoveResult struct {
	Key message.DeliveryKey
	// Moved is true if this call moved it; Unchanged if it was already at
	// the new times and not yet sending.
	Moved, Unchanged bool
	// Status is the delivery's status after the call.
	Status Status
	// Refused says why it was not moved: ErrAlreadySent,
	// ErrFinished or ErrLeased (in flight; try again shortly).
	Refused error
	// At is, for a refused delivery, when it was sent or last changed, and
	// for one in flight, when its lease ends.
	At time.Time
}

// Rescheduled is what Reschedule did.
type Rescheduled struct {
	DueAt, ExpiresAt time.Time
	// Local is the reminder's zone and local times after the move.
	Local      Local
	Deliveries []MoveResult
}

// Refused reports whether any delivery was not moved.
func (r Rescheduled) Refused() bool {
	for _, d := range r.Deliveries {
		if d.Refused != nil {
			return true
		}
	}
	return false
}

// stands reports whether any delivery stands at the new times: moved, or
// already there.
func (r Rescheduled) stands() bool {
	for _, d := range r.Deliveries {
		if d.Moved || d.Unchanged {
			return true
		}
	}
	return false
}

// ErrIncomplete is Reschedule's answer for a reminder whose create has not
// written every delivery yet (it is still running, or was cut off).
var ErrIncomplete = errors.New("the reminder is not fully created yet")

// Reschedule moves every delivery of reminder id that has not started
// sending to new times, and records them on the reminder item, in one
// conditional transaction (ledger.MoveReminder) over the items as read: a
// delivery sent, ended or in flight is reported and never changed (an ended
// one is kept as long as the moved ones); if anything changed between the
// read and the write, it reads again. Once it has answered, no moved
// delivery can be sent before the new dueAt. Running the same reschedule
// again changes nothing more. When no delivery can move (each is sent,
// ended or in flight), nothing is written, the reminder item included. It returns a *ValidationError for bad times,
// an error wrapping ErrNoReminder for an unknown id, and one wrapping
// ErrIncomplete while a create of the reminder has not written every
// delivery. It is the operator's door, onto every reminder (RescheduleAs
// is the caller's).
func (s *Store) Reschedule(ctx context.Context, id string, to Times, note string) (Rescheduled, error) {
	return s.reschedule(ctx, operator, id, to, note)
}

func (s *Store) reschedule(ctx context.Context, c Caller, id string, to Times, note string) (Rescheduled, error) {
	if err := c.check(); err != nil {
		return Rescheduled{}, err
	}
	if note != "" {
		note = ": " + note
	}
	var due, exp time.Time
	var local Local
	for attempt := 1; ; attempt++ {
		stored, err := s.cfg.Ledger.ReadReminder(ctx, id)
		if err != nil {
			return Rescheduled{}, fmt.Errorf("schedule: reschedule %q: %w", id, err)
		}
		if stored.Empty() && attempt == 1 {
			// An occurrence of a series not created yet: created now, to be
			// moved; its extension later finds it where it was moved.
			if sr, o, ok, err := s.occurrenceOf(ctx, id); err != nil {
				return Rescheduled{}, fmt.Errorf("schedule: reschedule %q: %w", id, err)
			} else if ok && c.owns(&sr.Item) {
				if err := s.materialize(ctx, sr, o); err != nil {
					return Rescheduled{}, fmt.Errorf("schedule: reschedule %q: %w", id, err)
				}
				if stored, err = s.cfg.Ledger.ReadReminder(ctx, id); err != nil {
					return Rescheduled{}, fmt.Errorf("schedule: reschedule %q: %w", id, err)
				}
			}
		}
		if err := c.access(stored); errors.Is(err, ErrUnattributed) {
			return Rescheduled{}, fmt.Errorf("schedule: reschedule %q: %w", id, err)
		} else if err != nil {
			return Rescheduled{}, fmt.Errorf("schedule: reschedule %q: %w; check the id (reminder ids are case-sensitive)", id, ErrNoReminder)
		}
		if stored.ReminderErr != nil {
			return Rescheduled{}, fmt.Errorf("schedule: reschedule %q: %w; nothing was moved", id, stored.ReminderErr)
		}
		if stored.Series != nil {
			out, err := s.rescheduleSeries(ctx, c, *stored.Series, to, note)
			if errors.Is(err, ledger.ErrChanged) && attempt < 5 {
				continue // extended since the read: read again
			}
			return out, err
		}
		if attempt == 1 {
			window, name := s.validator.Lateness, "the default lateness"
			in := localIn{to.DueAt, to.ExpiresAt, to.DueLocal, to.ExpiresLocal, to.TimeZone}
			if r := stored.Reminder; r != nil {
				window, name = r.ExpiresAt.Sub(r.DueAt), "the reminder's window"
				if in.timeZone == "" {
					in.timeZone = r.Local.TimeZone
				}
			}
			dueAt, expiresAt, l, err := resolveLocal(id, in)
			if err != nil {
				return Rescheduled{}, err
			}
			if due, exp, err = s.validator.times(id, dueAt, expiresAt, window, name, "give an expiresAt"); err != nil {
				return Rescheduled{}, localField(err, to.DueAt, to.ExpiresAt, to.ExpiresLocal)
			}
			local = l
		}
		if gone := missing(stored); len(gone) > 0 {
			return Rescheduled{}, fmt.Errorf("schedule: reschedule %q: %w (%d of its %d deliveries and fallbacks are not written); "+
				"send its create again with the same content to finish it, then reschedule",
				id, ErrIncomplete, len(gone), len(stored.Reminder.Keys()))
		}
		out := Rescheduled{DueAt: due, ExpiresAt: exp, Local: local}
		var again []ledger.Delivery
		plan := ledger.MovePlan{ID: id, Reminder: stored.Reminder, To: ledger.Move{DueAt: due, ExpiresAt: exp, Local: localItem(local),
			Note: "rescheduled to " + FormatTime(due) + note}}
		for _, d := range stored.Deliveries {
			res := MoveResult{Key: d.Key(), Status: statusOf(d.Status)}
			switch {
			case d.Status == ledger.StatusSending:
				res.Refused, res.At = ledger.ErrLeased, d.LeaseUntil
			case d.Status == ledger.StatusRetrying && d.LastErrorClass == failure.ClassAmbiguous:
				// Waiting for the provider's record of an attempt that may
				// have gone out (SES's record policy): as good as in flight.
				// Moved, its next claim would not know to wait, and could
				// send it twice.
				res.Refused, res.At = ledger.ErrLeased, d.NextAttemptAt
			case d.Status == ledger.StatusSent:
				res.Refused, res.At = ledger.ErrAlreadySent, d.SentAt
			case d.Status == ledger.StatusDead:
				// A redrive would send it at its old time: it is the
				// operator's to review first.
				res.Refused, res.At = ErrDeadLettered, d.UpdatedAt
			case d.Status.Terminal():
				res.Refused, res.At = ledger.ErrFinished, d.UpdatedAt
			case d.DueAt.Equal(plan.DeliveryDue(d)) && d.ExpiresAt.Equal(deliveryExpiry(plan, d)):
				res.Unchanged = true
				if unclaimedHandOff(d) {
					// Moved and marked by an earlier attempt whose writer
					// may have died before publishing: published again.
					again = append(again, d)
				}
			case d.Status == ledger.StatusHeld:
				// A fallback not taken moves with the reminder, and stays
				// held.
				res.Moved = true
				plan.Live = append(plan.Live, d)
			default:
				res.Moved, res.Status = true, StatusPending
				plan.Live = append(plan.Live, d)
			}
			if !res.Moved {
				plan.Kept = append(plan.Kept, d)
			}
			out.Deliveries = append(out.Deliveries, res)
		}
		for _, d := range plan.Live {
			if d.Window != "" && d.Status != ledger.StatusHeld && !plan.DeliveryDue(d).Before(deliveryExpiry(plan, d)) {
				return Rescheduled{}, &ValidationError{ID: id, Field: "dueAt", Problem: fmt.Sprintf(
					"puts %s where its send window (%s) first opens at %s, when it has expired (%s), so it could never be sent",
					d.Key(), d.Window, FormatTime(plan.DeliveryDue(d)), FormatTime(deliveryExpiry(plan, d))),
					Fix: "move it to a time the window opens before its expiry, or give a later expiresAt"}
			}
		}
		if !out.stands() {
			// Every delivery was sent, ended or is being sent: a refused
			// reschedule changes nothing, the reminder item's times
			// included (its creator's PUT retry still matches them).
			return out, nil
		}
		plan.To.HandOff = s.handsOff(due)
		for _, d := range plan.Live {
			plan.To.HandOff = plan.To.HandOff && s.handsOff(plan.DeliveryDue(d)) // each due soon, its window open
		}
		err = s.cfg.Ledger.MoveReminder(ctx, plan)
		if err == nil && plan.To.HandOff {
			moved := again
			for _, d := range plan.Live {
				if d.Status != ledger.StatusHeld {
					d.DueAt, d.ExpiresAt = plan.DeliveryDue(d), deliveryExpiry(plan, d)
					moved = append(moved, d)
				}
			}
			s.handOff(ctx, moved)
		}
		switch {
		case errors.Is(err, ledger.ErrChanged) && attempt < 5:
			// A claim, a cancel or another reschedule came between: read
			// again, after a pause that spreads out concurrent ones.
			select {
			case <-time.After(time.Duration(attempt)*20*time.Millisecond + time.Duration(rand.IntN(20))*time.Millisecond): // wall clock: a pause between two writers, which must pass under a stopped test clock too
			case <-ctx.Done():
				return Rescheduled{}, fmt.Errorf("schedule: reschedule %q: %w", id, ctx.Err())
			}
			continue
		case err != nil:
			return Rescheduled{}, fmt.Errorf("schedule: reschedule %q: %w; send the same reschedule again", id, err)
		}
		return out, nil
	}
}

// deliveryExpiry is where plan puts d's expiresAt (the reminder's new one,
// under its late policy).
func deliveryExpiry(plan ledger.MovePlan, d ledger.Delivery) time.Time {
	exp, _ := plan.DeliveryTimes(d)
	return exp
}

// ErrDeadLettered is a reschedule's reason for not moving a dead-lettered
// delivery: a redrive would send it at its old time, so the operator
// reviews it first (redrive, or cancel).
var ErrDeadLettered = errors.New("dead-lettered; an operator reviews it first (nudge dlq list): redrive, or cancel")

// ParseTimes decodes a reschedule's times from JSON, refusing unknown
// fields, with the same errors as a reminder's.
func ParseTimes(data []byte) (Times, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var to Times
	if err := dec.Decode(&to); err != nil {
		if ve, ok := jsonError(err).(*ValidationError); ok && strings.HasSuffix(ve.Problem, "is not a reminder field") {
			ve.Problem, ve.Fix = "is not a reschedule field", "give dueAt (or dueLocal, with timeZone if the reminder has none) and, if you want, expiresAt (or expiresLocal)"
			return Times{}, ve
		}
		return Times{}, jsonError(err)
	}
	if dec.More() {
		return Times{}, &ValidationError{Problem: "has more than one JSON value", Fix: `give one object: {"dueAt": "…"}`}
	}
	return to, nil
}
