package schedule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nudgehq/nudge/pkg/ledger"
	"github.com/nudgehq/nudge/pkg/message"
)

// Times are a reschedule's new times, as a user writes them (RFC 3339).
type Times struct {
	// DueAt is the new due time. Required.
	DueAt string `json:"dueAt"`
	// ExpiresAt is the new expiry. Default: the new dueAt plus the
	// reminder's window (its expiresAt − dueAt), which a move keeps.
	ExpiresAt string `json:"expiresAt,omitempty"`
}

// MoveResult is what Reschedule did to one delivery.
type MoveResult struct {
	Key message.DeliveryKey
	// Moved is true if this call moved it; Unchanged if it was already at
	// the new times and not yet sending.
	Moved, Unchanged bool
	// Status is the delivery's status after the call.
	Status ledger.Status
	// Refused says why it was not moved: ledger.ErrAlreadySent,
	// ErrFinished or ErrLeased (in flight; try again shortly).
	Refused error
	// At is, for a refused delivery, when it was sent or last changed, and
	// for one in flight, when its lease ends.
	At time.Time
}

// Rescheduled is what Reschedule did.
type Rescheduled struct {
	DueAt, ExpiresAt time.Time
	Deliveries       []MoveResult
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

// Reschedule moves every delivery of reminder id that has not started
// sending to new times, each with a conditional write (ledger.Reschedule):
// one sent, ended or in flight is refused and reported, never changed.
// Once a delivery is moved, it cannot be sent before the new dueAt. The
// reminder item records the new times once any delivery stands at them,
// so that a create of the reminder with its old times is a conflict.
// Running the same reschedule again finishes one that stopped half-way.
// It returns a *ValidationError for bad times and an error wrapping
// ErrNoReminder for an unknown id.
func (s *Store) Reschedule(ctx context.Context, id string, to Times, note string) (Rescheduled, error) {
	stored, err := s.cfg.Ledger.ReadReminder(ctx, id)
	if err != nil {
		return Rescheduled{}, fmt.Errorf("schedule: reschedule %q: %w", id, err)
	}
	if len(stored.Deliveries) == 0 {
		return Rescheduled{}, fmt.Errorf("schedule: reschedule %q: %w; check the id (reminder ids are case-sensitive)", id, ErrNoReminder)
	}
	window, name := s.validator.Lateness, "the default lateness"
	if r := stored.Reminder; r != nil {
		window, name = r.ExpiresAt.Sub(r.DueAt), "the reminder's window"
	}
	due, exp, err := s.validator.times(id, to.DueAt, to.ExpiresAt, window, name, "give an expiresAt")
	if err != nil {
		return Rescheduled{}, err
	}
	if note != "" {
		note = ": " + note
	}
	mv := ledger.Move{DueAt: due, ExpiresAt: exp, Note: "rescheduled to " + ledger.Format(due) + note}
	out := Rescheduled{DueAt: due, ExpiresAt: exp}
	atNewTimes := false
	for _, d := range stored.Deliveries {
		res := MoveResult{Key: d.Key(), Status: d.Status}
		live := d.Status == ledger.StatusPending || d.Status == ledger.StatusQueued || d.Status == ledger.StatusRetrying
		if live && d.DueAt.Equal(due) && d.ExpiresAt.Equal(exp) {
			res.Unchanged, atNewTimes = true, true
			out.Deliveries = append(out.Deliveries, res)
			continue
		}
		moved, err := s.cfg.Ledger.Reschedule(ctx, d.Key(), mv)
		var re *ledger.RefusedError
		switch {
		case err == nil:
			res.Moved, res.Status, atNewTimes = true, moved.Status, true
		case errors.As(err, &re):
			res.Refused, res.Status, res.At = re.Reason, re.Current.Status, re.Current.UpdatedAt
			if re.Current.Status == ledger.StatusSent {
				res.At = re.Current.SentAt
			}
			if errors.Is(err, ledger.ErrLeased) {
				res.At = re.Current.LeaseUntil
			}
		default:
			return out, fmt.Errorf("schedule: reschedule %s: %w; run the same reschedule again to finish it", d.Key(), err)
		}
		out.Deliveries = append(out.Deliveries, res)
	}
	if atNewTimes && stored.Reminder != nil && (!stored.Reminder.DueAt.Equal(due) || !stored.Reminder.ExpiresAt.Equal(exp)) {
		if err := s.cfg.Ledger.RescheduleReminder(ctx, id, mv); err != nil {
			return out, fmt.Errorf("schedule: reschedule %q: %w; run the same reschedule again to finish it", id, err)
		}
	}
	return out, nil
}

// ParseTimes decodes a reschedule's times from JSON, refusing unknown
// fields, with the same errors as a reminder's.
func ParseTimes(data []byte) (Times, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var to Times
	if err := dec.Decode(&to); err != nil {
		if ve, ok := jsonError(err).(*ValidationError); ok && strings.HasSuffix(ve.Problem, "is not a reminder field") {
			ve.Problem, ve.Fix = "is not a reschedule field", "give dueAt and, if you want, expiresAt"
			return Times{}, ve
		}
		return Times{}, jsonError(err)
	}
	if dec.More() {
		return Times{}, &ValidationError{Problem: "has more than one JSON value", Fix: `give one object: {"dueAt": "…"}`}
	}
	return to, nil
}
