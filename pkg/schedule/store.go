package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/provider"
)

// Ledger is the part of the delivery ledger the store uses: the reminder
// items and their deliveries.
type Ledger interface {
	CreateReminder(ctx context.Context, r ledger.ReminderItem) (stored ledger.ReminderItem, exists bool, err error)
	ReadReminder(ctx context.Context, id string) (ledger.Stored, error)
	Create(ctx context.Context, d ledger.Delivery) error
	Cancel(ctx context.Context, key message.DeliveryKey, note string) (ledger.Delivery, error)
	MoveReminder(ctx context.Context, p ledger.MovePlan) error
	ListAccount(ctx context.Context, account string, limit int, next string) (ledger.AccountPage, error)
	ListAccountCreatedBy(ctx context.Context, account, creator string, limit int, next string) (ledger.AccountPage, error)
	GetMany(ctx context.Context, keys []message.DeliveryKey) (map[message.DeliveryKey]ledger.Delivery, error)
	HandedOff(ctx context.Context, d ledger.Delivery) (ledger.HandOff, error)
	Expiry(expiresAt time.Time) time.Time
	Lookahead() time.Duration
	GiveBack(ctx context.Context, key message.DeliveryKey, dueAt time.Time, note string) (ledger.Delivery, error)
	CreateSeries(ctx context.Context, s ledger.Series) (stored ledger.Series, exists bool, err error)
	AdvanceSeries(ctx context.Context, id string, from ledger.Start, next int, extendAt time.Time) error
	RestartSeries(ctx context.Context, id string, from ledger.Start, due, expires time.Time, local ledger.Local, extendAt time.Time) error
	SettleRestart(ctx context.Context, id string, starts int) error
	NoteEarly(ctx context.Context, id, oid string) error
	CreateOccurrence(ctx context.Context, r ledger.ReminderItem, at ledger.Start) (ledger.ReminderItem, bool, error)
	CancelSeries(ctx context.Context, id string) (ledger.Series, error)
}

// HandOff publishes deliveries due within the lookahead as soon as they
// are written (enqueue.HandOff): the short-notice path, so that a reminder
// created or moved to within the lookahead goes out at its due time, not at
// the enqueue's next tick.
type HandOff interface {
	// Publish sends each entry's message, delayed until due, and returns
	// the entries it could not send.
	Publish(ctx context.Context, entries []ledger.IndexEntry) (failed []ledger.IndexEntry)
}

var _ Ledger = (*ledger.Ledger)(nil)

// Config configures a Store.
type Config struct {
	// Ledger stores the reminder item and its deliveries (with their due
	// index entries). Required.
	Ledger Ledger
	// Channels are the known channels. Default DefaultChannels.
	Channels []string
	// Lateness is the default expiresAt − dueAt. Default 24h.
	Lateness time.Duration
	// MaxAhead is how far ahead dueAt and expiresAt may be. Default
	// DefaultMaxAhead (5 years).
	MaxAhead time.Duration
	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
	// Providers are the providers the stage runs (Validator.Providers).
	// Default DefaultProviders.
	Providers []string
	// Doors are the providers' checks of a delivery, by provider
	// (Validator.Doors; registry.Doors makes them from the stage's view).
	// A door that is a provider.TemplateDoor is also asked whether a
	// delivery's template is deployed, so that a missing one is refused at
	// intake rather than dead-lettered at its due time. Default: each
	// provider's door made from an empty environment, which checks no
	// template.
	Doors map[string]provider.Door
	// HandOff, if set, publishes the deliveries a create or a reschedule
	// writes due within the ledger's lookahead at once, after the write
	// (their due index entries are marked, so the enqueue's cursor passes
	// them). One it cannot publish is given back to the calendar (the
	// cursor's next tick hands it off); one lost between the write and the
	// publish is found by the enqueue's repair. Default none: every
	// delivery waits for the enqueue's cursor.
	HandOff HandOff
	// HandOffTimeout bounds the publish (three fifths) and the give-back
	// (two fifths) after a write: they run even if the caller has gone,
	// since the write stands. Default 5s.
	HandOffTimeout time.Duration
	// Logger receives hand-offs that failed. Default slog.Default().
	Logger *slog.Logger
	// SeriesAhead is how far ahead of its due time a series' occurrence
	// is created (Extend). Default DefaultSeriesAhead (35 days): a
	// monthly series has its next occurrence to see, cancel or move.
	SeriesAhead time.Duration
	// SeriesCount is the most occurrences of one series created and not
	// yet due. Default DefaultSeriesCount (10): a daily series has ten.
	SeriesCount int
	// Windows are the stage's default send windows by channel
	// (Validator.Windows). Default none.
	Windows map[string]DefaultWindow
}

// Store creates and cancels reminders. It is safe for concurrent use.
type Store struct {
	cfg       Config
	validator Validator
}

// New validates cfg and returns a Store.
func New(cfg Config) (*Store, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("schedule: Ledger is required")
	}
	if cfg.MaxAhead < 0 || cfg.MaxAhead > 50*365*24*time.Hour {
		return nil, fmt.Errorf("schedule: MaxAhead %v is outside 0 to 50 years", cfg.MaxAhead)
	}
	if cfg.Lateness < 0 {
		return nil, fmt.Errorf("schedule: lateness %v is negative; it is how long after dueAt a reminder is still worth sending", cfg.Lateness)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.HandOffTimeout <= 0 {
		cfg.HandOffTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	switch {
	case cfg.SeriesAhead == 0:
		cfg.SeriesAhead = DefaultSeriesAhead
	case cfg.SeriesAhead < time.Hour || cfg.SeriesAhead > 366*24*time.Hour:
		return nil, fmt.Errorf("schedule: SeriesAhead %v is outside 1h to 366 days", cfg.SeriesAhead)
	}
	switch {
	case cfg.SeriesCount == 0:
		cfg.SeriesCount = DefaultSeriesCount
	case cfg.SeriesCount < 1 || cfg.SeriesCount > 100:
		return nil, fmt.Errorf("schedule: SeriesCount %d is outside 1 to 100", cfg.SeriesCount)
	}
	v := Validator{Channels: cfg.Channels, Lateness: cfg.Lateness, MaxAhead: cfg.MaxAhead, Now: cfg.Clock.Now,
		Providers: cfg.Providers, Doors: cfg.Doors, Windows: cfg.Windows}.withDefaults()
	return &Store{cfg: cfg, validator: v}, nil
}

// Validator returns the store's validator.
func (s *Store) Validator() Validator { return s.validator }

// Now returns the time on the store's clock (Config.Clock).
func (s *Store) Now() time.Time { return s.cfg.Clock.Now() }

// Outcome is what Create did.
type Outcome string

// Create outcomes.
const (
	// Created: this call wrote the reminder (its item, and its
	// deliveries).
	Created Outcome = "created"
	// Completed: the reminder's item was there (an earlier create stopped
	// half-way, or another is running), and this call wrote deliveries it
	// lacked.
	Completed Outcome = "completed"
	// Unchanged: the same reminder was already there, in full.
	Unchanged Outcome = "unchanged"
)

// ConflictError is a Create refused because a different reminder already
// has the id.
type ConflictError struct {
	ID     string
	Field  string
	Stored string
	Given  string
	// Holder is set where the id is the other kind's: KindSeries (a
	// reminder was given) or KindReminder (a series was given); Field is
	// then "recur". An id is a reminder's or a series', never both, and a
	// cancel does not free it: the fix is another id.
	Holder string
}

// The kinds of what an id can hold (ConflictError.Holder).
const (
	KindReminder = "reminder"
	KindSeries   = "series"
)

func (e *ConflictError) Error() string {
	if e.Holder != "" {
		return fmt.Sprintf("id %q belongs to %s, and an id is a reminder's or a series', never both: %s", e.ID, e.Stored, e.Fix())
	}
	return fmt.Sprintf("reminder %q already exists with %s %s, not %s; give the changed reminder a new id, or cancel the old one first (nudge cancel %s)",
		e.ID, e.Field, e.Stored, e.Given, e.ID)
}

// Fix says what to do about a conflict of kinds (Holder set): choose
// another id. Empty for other conflicts, whose fix depends on the door.
func (e *ConflictError) Fix() string {
	switch e.Holder {
	case KindSeries:
		return fmt.Sprintf("choose another id for the reminder (%q stays a series, cancelled too, until it is purged)", e.ID)
	case KindReminder:
		return fmt.Sprintf("choose another id for the series (%q stays a reminder, cancelled too, until it is purged)", e.ID)
	}
	return ""
}

// Create writes r (validated) idempotently: the reminder item first, then
// one ledger delivery per delivery, each with a conditional put, before
// anything can be published. The same reminder again is Unchanged; a
// different one under the same id is a *ConflictError. If an earlier
// Create stopped half-way (or another is running), this one writes what is
// missing and says Completed: of concurrent creates of one reminder, one
// says Created. It is the operator's door: it records no creator, and
// compares with whatever reminder holds the id (CreateAs is the caller's).
func (s *Store) Create(ctx context.Context, r Reminder) (Outcome, error) {
	return s.create(ctx, operator, r)
}

func (s *Store) create(ctx context.Context, c Caller, r Reminder) (Outcome, error) {
	return s.createWith(ctx, c, r, nil)
}

// createWith is create; with guard, r is an occurrence its series'
// extension creates from start guard, created only while the series is
// there (ledger.CreateOccurrence: ErrSeriesMoved otherwise).
func (s *Store) createWith(ctx context.Context, c Caller, r Reminder, guard *ledger.Start) (Outcome, error) {
	if err := c.check(); err != nil {
		return "", err
	}
	if r.Series != "" && guard == nil {
		// Only a series' extension creates its occurrences, on condition
		// of its start.
		return "", &ValidationError{ID: r.ID, Field: "series", Problem: "is set: an occurrence is created by its series alone",
			Fix: "leave series out; to change one occurrence, cancel or reschedule it by its id"}
	}
	if r.Recur != "" {
		return s.createSeries(ctx, c, r)
	}
	r.CreatedBy = c.Principal
	if err := s.checkTemplates(ctx, r); err != nil {
		return "", err
	}
	outcome := Created
	var stored ledger.ReminderItem
	var exists bool
	var err error
	if guard != nil {
		stored, exists, err = s.cfg.Ledger.CreateOccurrence(ctx, reminderItem(r), *guard)
	} else {
		stored, exists, err = s.cfg.Ledger.CreateReminder(ctx, reminderItem(r))
	}
	switch {
	case errors.Is(err, ledger.ErrSeriesMoved):
		return "", fmt.Errorf("schedule: %w", err)
	case errors.Is(err, ledger.ErrSeriesID):
		return "", s.seriesHolds(ctx, c, r)
	case err != nil:
		return "", fmt.Errorf("schedule: %w", err)
	case exists && !c.owns(&stored):
		// Nothing of it is compared or written: the answer is the same
		// whatever it holds.
		return "", fmt.Errorf("schedule: reminder %q: %w by a reminder this caller cannot see; give this reminder another id", r.ID, ErrTaken)
	case exists:
		if c := conflict(reminderOf(stored), r); c != nil {
			return "", c
		}
		outcome = Unchanged
	}
	var written []ledger.Delivery
	defer func() { s.handOff(ctx, written) }()
	for _, it := range s.items(r) {
		it.HandOff = s.handsOff(it.DueAt) && it.Status == "" // a primary due soon (its window's opening), not a held fallback
		err := s.cfg.Ledger.Create(ctx, it)
		if err == nil && it.HandOff {
			written = append(written, it)
		}
		var re *ledger.RefusedError
		switch {
		case errors.As(err, &re) && errors.Is(err, ledger.ErrExists):
			// Written by an earlier attempt; the reminder item matched,
			// and the address, kept on the delivery alone, must too.
			if re.Current.Address != it.Address && !tombstone(re.Current) {
				what := "deliveries (" + it.Channel + "/" + it.Provider + ") address"
				if !it.FallbackOf.IsZero() {
					what = "deliveries (" + it.FallbackOf.Channel + "/" + it.FallbackOf.Provider + ") fallback address"
				}
				return "", &ConflictError{ID: r.ID, Field: what, Stored: MaskAddress(re.Current.Address), Given: MaskAddress(it.Address)}
			}
			if it.HandOff && unclaimedHandOff(re.Current) {
				// Its writer may have died before publishing: the
				// caller's retry publishes it again (a second message is
				// a duplicate the claim refuses), sooner than the repair.
				written = append(written, it)
			}
		case err != nil:
			return "", fmt.Errorf("schedule: reminder %q: %w; run the same create again to finish it", r.ID, err)
		case exists:
			outcome = Completed // this call wrote what the item's creator had not yet
		}
	}
	return outcome, nil
}

// seriesHolds is the refusal of reminder r, whose id a series holds: the
// conflict, or, to a caller who cannot see that series, the id taken.
func (s *Store) seriesHolds(ctx context.Context, c Caller, r Reminder) error {
	st, err := s.cfg.Ledger.ReadReminder(ctx, r.ID)
	switch {
	case err != nil:
		return fmt.Errorf("schedule: reminder %q: its id is a series', which could not be read: %w", r.ID, err)
	case st.Series == nil || !c.owns(&st.Series.Item):
		return fmt.Errorf("schedule: reminder %q: %w by a series this caller cannot see; give this reminder another id", r.ID, ErrTaken)
	}
	return &ConflictError{ID: r.ID, Field: "recur", Stored: "a series (" + st.Series.Item.Recur + ")", Given: "a reminder (no recur)", Holder: KindSeries}
}

// unclaimedHandOff reports whether d is a delivery its writer marked as
// handed off and that no consumer has claimed yet.
func unclaimedHandOff(d ledger.Delivery) bool {
	return d.Status == ledger.StatusPending && d.Attempts == 0 && d.Index != nil && d.Index.HandedOff
}

// handsOff reports whether a delivery due at dueAt and written now is
// handed off by its writer: if a hand-off is configured and dueAt is
// within the lookahead. Decided before the write, on the store's clock:
// the ledger's clock reads later, so the entry it writes is published now
// either way.
func (s *Store) handsOff(dueAt time.Time) bool {
	return s.cfg.HandOff != nil && !dueAt.Add(-s.cfg.Ledger.Lookahead()).After(s.cfg.Clock.Now())
}

// handOff publishes the deliveries a write marked as handed off, and gives
// those it cannot publish back to the calendar. Neither fails the write:
// what is neither published nor given back is found by the enqueue's
// repair.
func (s *Store) handOff(ctx context.Context, written []ledger.Delivery) {
	if len(written) == 0 {
		return
	}
	// wall clock: bounds on the requests to SQS, then DynamoDB, which run
	// on even if the caller has gone (the write stands). The give-back has
	// its own: it is needed most when SQS used up the publish's.
	pubCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.HandOffTimeout*3/5)
	defer cancel()
	now := s.cfg.Clock.Now()
	entries := make([]ledger.IndexEntry, len(written))
	for i, d := range written {
		entries[i] = ledger.IndexEntry{Key: d.Key(), PublishAt: now, DueAt: d.DueAt, ExpiresAt: d.ExpiresAt, HandedOff: true}
	}
	failed := s.cfg.HandOff.Publish(pubCtx, entries)
	if len(failed) == 0 {
		return
	}
	backCtx, cancelBack := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.HandOffTimeout*2/5) // wall clock: as above
	defer cancelBack()
	for _, e := range failed {
		// Only if still unclaimed: a publish that failed after SQS took
		// the message may have been claimed already.
		_, err := s.cfg.Ledger.GiveBack(backCtx, e.Key, e.DueAt, "hand-off failed; the enqueue hands it off")
		if err != nil && !errors.As(err, new(*ledger.RefusedError)) {
			s.cfg.Logger.Warn("short-notice hand-off failed and the delivery could not be given back; the enqueue's repair will publish it",
				"deliveryKey", e.Key.String(), "error", err.Error())
		}
	}
}

// items are the delivery items a create of r writes, in order: for each
// delivery, its held fallback's (kept as long as its primary) before its
// own, so that a create cut off half-way never leaves a primary that may
// fail without the fallback it would take (a fallback without its primary
// is held, and never sent, until the create is sent again or cancelled).
func (s *Store) items(r Reminder) []ledger.Delivery {
	var out []ledger.Delivery
	for _, d := range r.Deliveries {
		primary := deliveryItem(r, d)
		if d.Fallback != nil {
			fb := fallbackItem(r, d)
			fb.TTL = s.cfg.Ledger.Expiry(primary.ExpiresAt)
			out = append(out, fb)
		}
		out = append(out, primary)
	}
	return out
}

// tombstone reports whether d is what Cancel writes for a delivery its
// reminder lists but no create had written yet: cancelled, with nothing
// to send to. A create arriving after it finds it, and sends nothing.
func tombstone(d ledger.Delivery) bool {
	return d.Status == ledger.StatusCancelled && d.Address == "" && d.Attempts == 0 && len(d.History) == 1
}

// checkTemplates refuses a delivery whose template its provider's door
// does not know as deployed, or whose reminder lacks data the template
// renders: the provider would accept such a send and fail it afterwards,
// when nobody is told.
func (s *Store) checkTemplates(ctx context.Context, r Reminder) error {
	for i, d := range r.Deliveries {
		if err := s.checkTemplate(ctx, r, fmt.Sprintf("deliveries[%d].", i), d.Provider, d.TemplateRef); err != nil {
			return err
		}
		if f := d.Fallback; f != nil {
			if err := s.checkTemplate(ctx, r, fmt.Sprintf("deliveries[%d].fallback.", i), f.Provider, f.TemplateRef); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTemplate is checkTemplates for one delivery or fallback, whose
// fields start with prefix.
func (s *Store) checkTemplate(ctx context.Context, r Reminder, prefix, prov, templateRef string) error {
	door, ok := s.validator.Doors[prov].(provider.TemplateDoor)
	if !ok {
		return nil
	}
	p, err := door.CheckTemplate(ctx, templateRef, r.Metadata)
	if err != nil {
		return fmt.Errorf("schedule: reminder %q: %w", r.ID, err)
	}
	if p != nil {
		field := p.Field
		if !strings.HasPrefix(field, "metadata") {
			field = prefix + field
		}
		return &ValidationError{ID: r.ID, Field: field, Problem: p.Problem, Fix: p.Fix}
	}
	return nil
}

// conflict names the first field in which given differs from stored.
func conflict(stored, given Reminder) *ConflictError {
	c := func(field, a, b string) *ConflictError {
		return &ConflictError{ID: given.ID, Field: field, Stored: a, Given: b}
	}
	switch {
	case !stored.DueAt.Equal(given.DueAt):
		return c("dueAt", FormatTime(stored.DueAt), FormatTime(given.DueAt))
	case !stored.ExpiresAt.Equal(given.ExpiresAt):
		return c("expiresAt", FormatTime(stored.ExpiresAt), FormatTime(given.ExpiresAt))
	case stored.AccountRef != given.AccountRef:
		return c("accountRef", fmt.Sprintf("%q", stored.AccountRef), fmt.Sprintf("%q", given.AccountRef))
	case !sameDeliveries(stored.Deliveries, given.Deliveries):
		return c("deliveries", describeDeliveries(stored.Deliveries), describeDeliveries(given.Deliveries))
	case !maps.Equal(stored.Metadata, given.Metadata):
		return c("metadata", fmt.Sprint(stored.Metadata), fmt.Sprint(given.Metadata))
	case stored.Late != given.Late:
		return c("late", describeLate(stored.Late), describeLate(given.Late))
	case stored.Local != given.Local:
		return c("local times", describeLocal(stored.Local), describeLocal(given.Local))
	case stored.Recur != given.Recur:
		return c("recur", fmt.Sprintf("%q", stored.Recur), fmt.Sprintf("%q", given.Recur))
	}
	return nil
}

// describeLocal tells a reminder's local times for a conflict.
func describeLocal(l Local) string {
	if l.IsZero() {
		return "none"
	}
	return fmt.Sprintf("timeZone %q, dueLocal %q, expiresLocal %q", l.TimeZone, l.DueLocal, l.ExpiresLocal)
}

func sameDeliveries(a, b []Delivery) bool {
	// A delivery compared: its fields and its fallback's, by value, with
	// no address (not on the reminder item; compared on the delivery).
	type compared struct {
		d        Delivery
		fallback Fallback
	}
	strip := func(ds []Delivery) []compared {
		out := make([]compared, len(ds))
		for i, d := range ds {
			d.Address = ""
			if d.Fallback != nil {
				out[i].fallback = *d.Fallback
				out[i].fallback.Address = ""
				d.Fallback = &Fallback{} // present; its fields are compared above
			}
			out[i].d = d
		}
		return out
	}
	cmp := func(x, y compared) int {
		if x.d.Channel != y.d.Channel {
			return compare(x.d.Channel, y.d.Channel)
		}
		return compare(x.d.Provider, y.d.Provider)
	}
	sa, sb := slices.SortedFunc(slices.Values(strip(a)), cmp), slices.SortedFunc(slices.Values(strip(b)), cmp)
	return slices.EqualFunc(sa, sb, func(x, y compared) bool {
		return x.fallback == y.fallback && (x.d.Fallback == nil) == (y.d.Fallback == nil) &&
			x.d.Channel == y.d.Channel && x.d.Provider == y.d.Provider && x.d.RecipientRef == y.d.RecipientRef && x.d.TemplateRef == y.d.TemplateRef &&
			x.d.Window == y.d.Window
	})
}

// describeLate says a late policy in a conflict: "expire", "send-late
// within 2h".
func describeLate(p LatePolicy) string {
	switch {
	case p.Policy == "":
		return LateExpire
	case p.Within > 0:
		return p.Policy + " within " + FormatSpan(p.Within)
	}
	return p.Policy
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func describeDeliveries(ds []Delivery) string {
	s := "["
	for i, d := range ds {
		if i > 0 {
			s += ", "
		}
		s += d.Channel + "/" + d.Provider + " to " + d.RecipientRef + " with " + d.TemplateRef
		if f := d.Fallback; f != nil {
			s += " (fallback " + f.Channel + "/" + f.Provider + " to " + f.RecipientRef + " with " + f.TemplateRef + " within " + FormatSpan(f.Within) + ")"
		}
	}
	return s + "]"
}

// CancelResult is what Cancel did to one delivery.
type CancelResult struct {
	Key message.DeliveryKey
	// Cancelled is true if this call cancelled it.
	Cancelled bool
	// Status is the delivery's status after the call.
	Status Status
	// Refused says why it was not cancelled: ErrAlreadySent,
	// ErrFinished or ErrLeased (in flight; try again shortly).
	Refused error
	// At is, for a refused delivery, when it was sent or last changed, and
	// for one in flight, when its lease ends.
	At time.Time
	// Unended, if above 0, is an attempt of the cancelled delivery that
	// started and never recorded its end (its consumer died, maybe after
	// the provider accepted): it may have been sent, and an operator
	// checks the provider's record. The ledger's history says so too.
	Unended int
}

// ErrNoReminder is Cancel's answer for an id with no deliveries.
var ErrNoReminder = errors.New("no such reminder")

// Cancel cancels every delivery of reminder id that has not been sent.
// Each delivery is a conditional write: one already sent, finished, or in
// flight is refused and reported, never changed. A delivery the reminder
// lists that no create has written yet (a create still running, or cut
// off) is written cancelled, so that a create finishing later sends
// nothing. It is the operator's door, onto every reminder (CancelAs is
// the caller's).
func (s *Store) Cancel(ctx context.Context, id, note string) ([]CancelResult, error) {
	return s.cancel(ctx, operator, id, note)
}

func (s *Store) cancel(ctx context.Context, c Caller, id, note string) ([]CancelResult, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	stored, err := s.cfg.Ledger.ReadReminder(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	if stored.Empty() {
		// An occurrence of a series not created yet: created now, to be
		// cancelled, so that its extension later finds it cancelled.
		if sr, o, ok, err := s.occurrenceOf(ctx, id); err != nil {
			return nil, fmt.Errorf("schedule: cancel %q: %w", id, err)
		} else if ok && c.owns(&sr.Item) {
			if err := s.materialize(ctx, sr, o); err != nil {
				return nil, fmt.Errorf("schedule: cancel %q: %w", id, err)
			}
			if stored, err = s.cfg.Ledger.ReadReminder(ctx, id); err != nil {
				return nil, fmt.Errorf("schedule: %w", err)
			}
		}
	}
	if err := c.access(stored); errors.Is(err, ErrUnattributed) {
		return nil, fmt.Errorf("schedule: cancel %q: %w", id, err)
	} else if err != nil {
		return nil, fmt.Errorf("schedule: cancel %q: %w; check the id (nudge reminder ids are case-sensitive)", id, ErrNoReminder)
	}
	if stored.Series != nil {
		return s.cancelSeries(ctx, c, *stored.Series, note)
	}
	var out []CancelResult
	for _, k := range missing(stored) {
		d := *k
		due, exp := stored.Reminder.DueAt, stored.Reminder.ExpiresAt
		if due.Before(ledger.Earliest) || !exp.After(due) {
			// A reminder item with times no delivery can have (written
			// before they were refused): its tombstone is dated now, so
			// that the cancel still finishes it.
			due = s.cfg.Clock.Now()
			exp = due.Add(time.Millisecond)
		}
		err := s.cfg.Ledger.Create(ctx, ledger.Delivery{ReminderID: id, Channel: d.Channel, Provider: d.Provider, RecipientRef: d.RecipientRef,
			TemplateRef: d.TemplateRef, DueAt: due, ExpiresAt: exp, Status: ledger.StatusCancelled})
		key := stored.Reminder.Key(d)
		switch {
		case err == nil:
			out = append(out, CancelResult{Key: key, Cancelled: true, Status: StatusCancelled})
		case errors.Is(err, ledger.ErrExists):
			// Written meanwhile: cancelled with the others below.
			stored.Deliveries = append(stored.Deliveries, ledger.Delivery{ReminderID: id, Channel: d.Channel, Provider: d.Provider})
		default:
			return out, fmt.Errorf("schedule: cancel %s: %w", key, err)
		}
	}
	for _, dd := range stored.Deliveries {
		k := dd.Key()
		d, err := s.cfg.Ledger.Cancel(ctx, k, note)
		res := CancelResult{Key: k, Cancelled: err == nil, Status: statusOf(d.Status), Unended: d.EndedUnended()}
		var re *ledger.RefusedError
		switch {
		case err == nil:
		case errors.Is(err, ledger.ErrChanged):
			// It kept changing under the cancel: not cancelled, and not
			// ended either; the caller sends the cancel again.
			return out, fmt.Errorf("schedule: cancel %s: %w", k, err)
		case errors.As(err, &re):
			res.Refused, res.Status, res.At, res.Unended = re.Reason, statusOf(re.Current.Status), re.Current.UpdatedAt, re.Current.EndedUnended()
			if re.Current.Status == ledger.StatusSent {
				res.At = re.Current.SentAt
			}
			if errors.Is(err, ledger.ErrLeased) {
				res.At = re.Current.LeaseUntil
			}
		default:
			return out, fmt.Errorf("schedule: cancel %s: %w", k, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// missing lists the deliveries and fallbacks the reminder item names that
// have no item, each as a ReminderDelivery (a fallback's fields, no
// fallback of its own).
func missing(stored ledger.Stored) []*ledger.ReminderDelivery {
	if stored.Reminder == nil {
		return nil
	}
	have := map[message.DeliveryKey]bool{}
	for _, d := range stored.Deliveries {
		have[d.Key()] = true
	}
	var out []*ledger.ReminderDelivery
	for i, d := range stored.Reminder.Deliveries {
		if !have[stored.Reminder.Key(d)] {
			out = append(out, &stored.Reminder.Deliveries[i])
		}
		if f := d.Fallback; f != nil && !have[f.Ref().Key(stored.Reminder.ID)] {
			out = append(out, &ledger.ReminderDelivery{Channel: f.Channel, Provider: f.Provider, RecipientRef: f.RecipientRef, TemplateRef: f.TemplateRef})
		}
	}
	return out
}
