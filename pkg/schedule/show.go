package schedule

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/failure"
)

// View is everything stored about one reminder.
type View struct {
	// Reminder is the reminder as created; nil if its item is missing
	// (a delivery created without the intake).
	Reminder *Reminder
	// Deliveries are its deliveries as they are now, by key.
	Deliveries []ledger.Delivery
	// Series is set when the id is a series': Reminder is then the series
	// (its Recur, its first occurrence's times), with no deliveries of
	// its own.
	Series *SeriesView
}

// SeriesView is what a series' view adds: its next occurrence after now
// (nil once it has none, or it was cancelled), how many it has created,
// and when it was cancelled.
type SeriesView struct {
	Next        *NextOccurrence `json:"next,omitempty"`
	Created     int             `json:"created"`
	CancelledAt string          `json:"cancelledAt,omitempty"`
}

// Event is one transition of one delivery, for a reminder's timeline (a
// ledger.Entry, with its delivery's key).
type Event struct {
	// At is when the transition happened (FormatTime'd).
	At string `json:"at"`
	// Status is the state entered.
	Status Status `json:"status"`
	// Attempt is the attempt number, where there is one.
	Attempt int `json:"attempt,omitempty"`
	// Class is the error class, for failures.
	Class failure.Class `json:"class,omitempty"`
	// Note is a short free text: a reason, a retry time, a receipt; for
	// the provider's feedback, which ("bounced Permanent/General").
	Note string `json:"note,omitempty"`
	// Feedback is set on an entry that records the provider's feedback on
	// the message (a bounce, a complaint, a delivery) rather than a
	// transition: Status is then the delivery's, unchanged.
	Feedback bool `json:"feedback,omitempty"`
	// Reveal is set on an entry that records the delivery's address shown
	// unmasked to an operator (the console; the note says to whom and
	// why) rather than a transition: Status is then the delivery's,
	// unchanged.
	Reveal bool `json:"reveal,omitempty"`
	// Delivery is the delivery's key.
	Delivery string `json:"delivery"`
}

// Timeline returns every delivery's history entries in time order. Each
// delivery keeps its last entries only (the ledger's history limit); the
// complete stream is in the functions' logs.
func (v View) Timeline() []Event {
	var out []Event
	for _, d := range v.Deliveries {
		for _, e := range d.History {
			out = append(out, eventOf(e, d.Key().String()))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// Show reads a reminder and its deliveries with a strongly consistent
// query. It returns an error wrapping ErrNoReminder if nothing is stored
// under id. It is the operator's door, onto every reminder (ShowAs is the
// caller's).
func (s *Store) Show(ctx context.Context, id string) (View, error) {
	return s.show(ctx, operator, id)
}

func (s *Store) show(ctx context.Context, c Caller, id string) (View, error) {
	if err := c.check(); err != nil {
		return View{}, err
	}
	stored, err := s.cfg.Ledger.ReadReminder(ctx, id)
	if err != nil {
		return View{}, fmt.Errorf("schedule: show %q: %w", id, err)
	}
	if err := c.access(stored); errors.Is(err, ErrUnattributed) {
		return View{}, fmt.Errorf("schedule: show %q: %w", id, err)
	} else if err != nil {
		stored = ledger.Stored{} // another's: as if absent
	}
	if stored.ReminderErr != nil {
		return View{}, fmt.Errorf("schedule: show %q: %w", id, stored.ReminderErr)
	}
	if stored.Empty() {
		return View{}, fmt.Errorf("schedule: show %q: %w; check the id (reminder ids are case-sensitive) and the table", id, ErrNoReminder)
	}
	if sr := stored.Series; sr != nil {
		r := reminderOf(sr.Item)
		sv := &SeriesView{Created: sr.Next - 1, CancelledAt: FormatOpt(sr.CancelledAt)}
		l := Listed{Reminder: r, IsSeries: true}
		if err := s.listSeries(ctx, &l); err != nil {
			return View{}, fmt.Errorf("schedule: show %q: %w", id, err)
		}
		sv.Next = l.Next
		return View{Reminder: &r, Series: sv}, nil
	}
	return View{Reminder: reminderRead(stored.Reminder), Deliveries: stored.Deliveries}, nil
}
