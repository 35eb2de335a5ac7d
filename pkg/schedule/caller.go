package schedule

import (
	"context"
	"errors"
	"fmt"

	"github.com/nudgehq/nudge/internal/ledger"
)

// A Store has two doors onto the same operations. The operator's (Create,
// Show, Cancel, Reschedule, List: the nudge CLI, with the operator's
// credentials) acts on every reminder and records no creator. A caller's
// (CreateAs, ShowAs, CancelAs, RescheduleAs, ListAs: the HTTP intake, for
// the principal that signed the request) records the caller as the
// creator of what it creates and acts only on what it created, unless the
// caller has full access: another caller's reminder is answered exactly as
// an absent one (ErrNoReminder), and a create of an id another's reminder
// holds is refused with ErrTaken, which says nothing of that reminder.
//
// A reminder with no recorded creator (the CLI's, and every reminder
// created before the intake recorded creators) is a full-access
// principal's alone through the caller's door: nobody can tell who created
// it, so no caller is presumed to have; the operator's door is unchanged.

// Caller is who acts through a store's caller door.
type Caller struct {
	// Principal identifies the caller, as the reminders it creates record
	// it (Reminder.CreatedBy): the intake's caller (intake.Caller), an IAM
	// role or user. Required unless FullAccess.
	Principal string
	// FullAccess lets the caller act on every reminder, whoever created it
	// (operators and support tools the stage names).
	FullAccess bool
}

// operator is the operator's door: every reminder; creates record no
// creator.
var operator = Caller{FullAccess: true}

// ErrTaken is a create's answer, through the caller's door, for an id
// whose reminder the caller may not see (another caller's, or one with no
// recorded creator): the id is the caller's idempotency key, so a create
// must refuse an id that is taken, but nothing else of that reminder is
// told, not even whether it matches.
var ErrTaken = errors.New("the id is taken")

func (c Caller) check() error {
	if !c.FullAccess && c.Principal == "" {
		return errors.New("schedule: a caller without full access needs a principal")
	}
	if len(c.Principal) > ledger.MaxCreatorLen {
		return fmt.Errorf("schedule: the caller's principal is over %d bytes", ledger.MaxCreatorLen)
	}
	return nil
}

// ErrUnattributed is the answer, through the caller's door, for a
// reminder with no recorded creator (created before the intake recorded
// creators, or by the CLI) to a caller without full access. It is not
// ErrNoReminder: a caller told "absent" when it cancels its own old
// reminder would believe nothing is scheduled, and it would be sent. The
// id's existence is all it tells, which a create of the id tells anyway.
var ErrUnattributed = errors.New("the reminder has no recorded creator")

// access says whether the caller may see and change the stored reminder:
// nil, ErrNoReminder (absent, or another caller's), or ErrUnattributed.
func (c Caller) access(stored ledger.Stored) error {
	item := stored.Reminder
	if item == nil && stored.Series != nil {
		item = &stored.Series.Item // a series: its item says who created it
	}
	switch {
	case stored.Empty():
		return ErrNoReminder
	case c.owns(item):
		return nil
	case item != nil && item.CreatedBy == "":
		return ErrUnattributed
	}
	return ErrNoReminder
}

// owns reports whether the caller may see and change the reminder whose
// item is r (nil: no reminder item, or an unreadable one).
func (c Caller) owns(r *ledger.ReminderItem) bool {
	if c.FullAccess {
		return true
	}
	return r != nil && r.CreatedBy != "" && r.CreatedBy == c.Principal
}

// CreateAs is Create for caller c: the reminder records c as its creator,
// and an id another's reminder holds is refused with an error wrapping
// ErrTaken (a full-access caller's create compares as Create's does).
func (s *Store) CreateAs(ctx context.Context, c Caller, r Reminder) (Outcome, error) {
	return s.create(ctx, c, r)
}

// ShowAs is Show for caller c: another's reminder is ErrNoReminder.
func (s *Store) ShowAs(ctx context.Context, c Caller, id string) (View, error) {
	return s.show(ctx, c, id)
}

// CancelAs is Cancel for caller c: another's reminder is ErrNoReminder,
// and nothing of it is changed.
func (s *Store) CancelAs(ctx context.Context, c Caller, id, note string) ([]CancelResult, error) {
	return s.cancel(ctx, c, id, note)
}

// RescheduleAs is Reschedule for caller c: another's reminder is
// ErrNoReminder, before its times are looked at, and nothing of it is
// changed.
func (s *Store) RescheduleAs(ctx context.Context, c Caller, id string, to Times, note string) (Rescheduled, error) {
	return s.reschedule(ctx, c, id, to, note)
}

// ListAs is List for caller c: without full access, the account's
// reminders c created (ledger.ListAccountCreatedBy: a page may be short,
// or empty with a next token, when others' reminders are interleaved).
func (s *Store) ListAs(ctx context.Context, c Caller, account string, limit int, next string) (ListPage, error) {
	return s.list(ctx, c, account, limit, next)
}
