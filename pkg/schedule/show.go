package schedule

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/nudgehq/nudge/pkg/ledger"
)

// View is everything stored about one reminder.
type View struct {
	// Reminder is the reminder as created; nil if its item is missing
	// (a delivery created without the intake).
	Reminder *Reminder
	// Deliveries are its deliveries as they are now, by key.
	Deliveries []ledger.Delivery
}

// Event is one transition of one delivery, for a reminder's timeline.
type Event struct {
	ledger.Entry
	Delivery string `json:"delivery"`
}

// Timeline returns every delivery's history entries in time order. Each
// delivery keeps its last entries only (the ledger's history limit); the
// complete stream is in the functions' logs.
func (v View) Timeline() []Event {
	var out []Event
	for _, d := range v.Deliveries {
		for _, e := range d.History {
			out = append(out, Event{Entry: e, Delivery: d.Key().String()})
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
	return View{Reminder: stored.Reminder, Deliveries: stored.Deliveries}, nil
}
