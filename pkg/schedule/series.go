package schedule

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/pkg/localtime"
	"github.com/nudgehq/nudge/pkg/recur"
)

// A series' bounds: how far ahead, and how many ahead, its occurrences
// are created (Config.SeriesAhead, Config.SeriesCount), and the longest
// series id (its occurrences' ids add a dot and up to 15 characters).
const (
	DefaultSeriesAhead = 35 * 24 * time.Hour
	DefaultSeriesCount = 10
	MaxSeriesIDLen     = 128 - 16
)

// checkRecur checks a series' rule against its first occurrence: the
// zone is required, the rule must parse and give occurrences, and the
// first of them must be the reminder's due time (dueLocal, or dueAt in
// the zone), so that what the caller wrote is what is sent first. On a
// series it sets r.Recur to the rule's canonical text and r.DueLocal to
// the start.
func (v Validator) checkRecur(in Input, r *Reminder) *fieldProblem {
	if len(in.ID) > MaxSeriesIDLen {
		return &fieldProblem{"id", fmt.Sprintf("is %d bytes long; a series' id is at most %d", len(in.ID), MaxSeriesIDLen),
			"shorten it: each occurrence's id is the series' id, a dot and its local date and time"}
	}
	if r.TimeZone == "" {
		return &fieldProblem{"timeZone", "is missing, and recur needs it",
			"name the zone whose wall clock the series follows, like \"timeZone\": \"Europe/Berlin\" (or UTC), and give dueLocal"}
	}
	rule, err := recur.Parse(in.Recur)
	if err != nil {
		return &fieldProblem{"recur", problemOfRecur(err), fixOfRecur(err)}
	}
	loc, err := localtime.LoadZone(r.TimeZone)
	if err != nil {
		return &fieldProblem{"timeZone", problemOf(err), fixOf(err)}
	}
	start := localtime.WallOf(r.DueAt, loc)
	if r.DueLocal != "" {
		start, _ = localtime.ParseWall(r.DueLocal) // checked by resolveLocal
	}
	s := recur.Series{Rule: rule, Start: start, Zone: loc}
	if err := s.Check(); err != nil {
		return &fieldProblem{"recur", problemOfRecur(err), fixOfRecur(err)}
	}
	first, ok := s.First()
	if !ok {
		return &fieldProblem{"recur", "gives no occurrence", "check BYMONTH, BYMONTHDAY and BYDAY against each other, and UNTIL"}
	}
	if first.Wall != start {
		return &fieldProblem{"dueLocal", fmt.Sprintf("%s is not an occurrence of %s; its first is %s", start, rule, first.Wall),
			fmt.Sprintf("give dueLocal %q, the series' first occurrence", first.Wall.String())}
	}
	r.Recur, r.DueLocal = rule.String(), start.String()
	return nil
}

func problemOfRecur(err error) string {
	var re *recur.Error
	if errors.As(err, &re) {
		return re.Problem
	}
	return err.Error()
}

func fixOfRecur(err error) string {
	var re *recur.Error
	if errors.As(err, &re) {
		return re.Fix
	}
	return ""
}

// seriesOf is the recur.Series a series item holds.
func seriesOf(it ledger.ReminderItem) (recur.Series, error) {
	rule, err := recur.Parse(it.Recur)
	if err != nil {
		return recur.Series{}, fmt.Errorf("series %q: its rule: %w", it.ID, err)
	}
	loc, err := localtime.LoadZone(it.Local.TimeZone)
	if err != nil {
		return recur.Series{}, fmt.Errorf("series %q: its zone: %w", it.ID, err)
	}
	start, err := localtime.ParseWall(it.Local.DueLocal)
	if err != nil {
		return recur.Series{}, fmt.Errorf("series %q: its start: %w", it.ID, err)
	}
	return recur.Series{Rule: rule, Start: start, Zone: loc}, nil
}

// addressKey names a delivery's (or, with "fb:", a fallback's) address in
// a series item.
func addressKey(channel, provider string) string { return channel + "#" + provider }

// seriesAddresses are r's deliveries' and fallbacks' addresses, which the
// series item keeps for the occurrences it creates.
func seriesAddresses(r Reminder) map[string]string {
	out := map[string]string{}
	for _, d := range r.Deliveries {
		if d.Address != "" {
			out[addressKey(d.Channel, d.Provider)] = d.Address
		}
		if f := d.Fallback; f != nil && f.Address != "" {
			out[addressKey(f.Channel, f.Provider)] = f.Address
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// occurrence is occurrence o of series item sr, as the reminder its
// extension creates: the series' deliveries, addresses, metadata and
// policies, due at o, expiring as long after as the series' first
// occurrence did, in the series' zone.
func occurrence(sr ledger.Series, o recur.Occurrence) Reminder {
	r := reminderOf(sr.Item)
	r.ID, r.Recur, r.Series = recur.OccurrenceID(sr.Item.ID, o), "", sr.Item.ID
	r.DueAt, r.ExpiresAt = o.At, o.At.Add(sr.Item.ExpiresAt.Sub(sr.Item.DueAt))
	r.Local = Local{TimeZone: sr.Item.Local.TimeZone, DueLocal: o.Wall.String()}
	r.Metadata = maps.Clone(r.Metadata)
	for i := range r.Deliveries {
		d := &r.Deliveries[i]
		d.Address = sr.Addresses[addressKey(d.Channel, d.Provider)]
		if f := d.Fallback; f != nil {
			fb := *f
			fb.Address = sr.Addresses[addressKey(f.Channel, f.Provider)]
			d.Fallback = &fb
		}
	}
	return r
}

// createSeries creates series r: its item, then its first occurrences
// (Extend). The same series again is Unchanged; another reminder or series
// under the id is a conflict.
func (s *Store) createSeries(ctx context.Context, c Caller, r Reminder) (Outcome, error) {
	r.CreatedBy = c.Principal
	if err := s.checkTemplates(ctx, r); err != nil {
		return "", err
	}
	stored, err := s.cfg.Ledger.ReadReminder(ctx, r.ID)
	if err != nil {
		return "", fmt.Errorf("schedule: %w", err)
	}
	if stored.Reminder != nil || len(stored.Deliveries) > 0 {
		if !c.owns(stored.Reminder) {
			return "", fmt.Errorf("schedule: series %q: %w by a reminder this caller cannot see; give this series another id", r.ID, ErrTaken)
		}
		return "", &ConflictError{ID: r.ID, Field: "recur", Stored: "a reminder (no recur)", Given: "a series (" + r.Recur + ")", Holder: KindReminder}
	}
	outcome := Created
	sr, exists, err := s.cfg.Ledger.CreateSeries(ctx, ledger.Series{Item: reminderItem(r), Addresses: seriesAddresses(r), Next: 1,
		ExtendAt: s.cfg.Clock.Now()})
	switch {
	case errors.Is(err, ledger.ErrReminderID):
		// A reminder created under the id since the read above.
		again, rerr := s.cfg.Ledger.ReadReminder(ctx, r.ID)
		if rerr != nil || again.Reminder == nil || !c.owns(again.Reminder) {
			return "", fmt.Errorf("schedule: series %q: %w by a reminder this caller cannot see; give this series another id", r.ID, ErrTaken)
		}
		return "", &ConflictError{ID: r.ID, Field: "recur", Stored: "a reminder (no recur)", Given: "a series (" + r.Recur + ")", Holder: KindReminder}
	case err != nil:
		return "", fmt.Errorf("schedule: %w", err)
	case exists && !c.owns(&sr.Item):
		return "", fmt.Errorf("schedule: series %q: %w by a series this caller cannot see; give this series another id", r.ID, ErrTaken)
	case exists:
		if cf := conflict(reminderOf(sr.Item), r); cf != nil {
			return "", cf
		}
		if !maps.Equal(sr.Addresses, seriesAddresses(r)) {
			return "", &ConflictError{ID: r.ID, Field: "deliveries address", Stored: "other addresses", Given: "these"}
		}
		outcome = Unchanged
	}
	if _, err := s.Extend(ctx, r.ID); err != nil {
		// The series stands: the enqueue's next extension creates what
		// this one could not.
		s.cfg.Logger.Warn("series created; its first occurrences were not, and the enqueue's extension creates them", "series", r.ID,
			"error", err.Error())
	}
	return outcome, nil
}

// Extended is what one Extend did.
type Extended struct {
	// Created are the ids of the occurrences it created (or found
	// created), in order.
	Created []string
	// Missed counts occurrences it passed that had expired before they
	// could be created (the system was down, or the series was
	// extended late).
	Missed int
	// Next is when the series is next extended; zero once every
	// occurrence is created, or the series was cancelled.
	Next time.Time
}

// Extend creates series id's occurrences that are due within SeriesAhead
// of now, keeping at most SeriesCount of them created and not yet due,
// each a reminder of its own with a deterministic id
// (recur.OccurrenceID), so that two extensions, or one run again after a
// crash, create each once; then records how far the series is created and
// when it is next extended. The enqueue extends every series whose time
// has come (ledger.DueSeries), each run. A cancelled series is not
// extended.
func (s *Store) Extend(ctx context.Context, id string) (Extended, error) {
	// Taken before the read: a restart after it leaves the start no
	// earlier than this, so this extension's reach is within what a
	// later settle looks for (Start.LeftAt plus the reach).
	now := s.cfg.Clock.Now()
	stored, err := s.cfg.Ledger.ReadReminder(ctx, id)
	if err != nil {
		return Extended{}, fmt.Errorf("schedule: extend %q: %w", id, err)
	}
	sr := stored.Series
	if sr == nil {
		return Extended{}, fmt.Errorf("schedule: extend %q: %w", id, ErrNoReminder)
	}
	if !sr.CancelledAt.IsZero() {
		return Extended{}, nil
	}
	if sr.Unsettled {
		// A reschedule stopped before it cancelled what its old start
		// created: done here, before any occurrence of the new one.
		if _, _, err := s.settleRestart(ctx, operator, *sr, "its series was rescheduled to "+FormatTime(sr.Item.DueAt)); err != nil {
			return Extended{}, fmt.Errorf("schedule: extend %q: %w", id, err)
		}
	}
	series, err := seriesOf(sr.Item)
	if err != nil {
		return Extended{}, fmt.Errorf("schedule: extend: %w", err)
	}
	caller := operator
	if sr.Item.CreatedBy != "" {
		caller = Caller{Principal: sr.Item.CreatedBy}
	}
	horizon := now.Add(s.cfg.SeriesAhead)
	start := sr.CurrentStart() // what each create, and the record, hold to
	var out Extended
	var next int             // set as the loop ends: the first occurrence left for a later extension
	moved := false           // the series moved on (restarted, cancelled) while this one created
	ahead := 0               // created, not yet due
	var firstAhead time.Time // the earliest of them
	last := 0                // the last occurrence's index, once the rule has no more
	it := series.Iter()
	for {
		o, ok := it.Next()
		if !ok {
			next, out.Next = max(last+1, sr.Next), time.Time{} // every occurrence is created
			break
		}
		last = o.N
		if o.N < sr.Next {
			if o.At.After(now) {
				if ahead == 0 {
					firstAhead = o.At
				}
				ahead++
			}
			continue
		}
		if o.At.After(horizon) {
			next, out.Next = o.N, o.At.Add(-s.cfg.SeriesAhead)
			break
		}
		if ahead >= s.cfg.SeriesCount {
			// As many ahead as a series keeps: the next is created once
			// the earliest of them is due.
			next, out.Next = o.N, firstAhead
			break
		}
		r, sendable := occurrence(*sr, o), false
		r.Deliveries, sendable = sendableDeliveries(r, now)
		if !sendable {
			// Expired before it could be created, or every delivery's
			// window opens only after its expiry: it could never be sent.
			out.Missed++
			continue
		}
		if _, err := s.createWith(ctx, caller, r, &start); err != nil {
			var cf *ConflictError
			switch {
			case errors.Is(err, ledger.ErrSeriesMoved):
				// Restarted or cancelled since the read: this one creates
				// nothing more, and what it created before, the restart's
				// settle or the cancel finds (within its reach); below, it
				// cancels them itself too.
				moved = true
			case errors.As(err, &cf) && cf.Holder == KindSeries:
				// A series holds its id: not this series' to send.
				out.Missed++
				s.cfg.Logger.Warn("a series' occurrence id is another series' id; the occurrence is skipped", "series", id, "occurrence", r.ID)
				continue
			case errors.As(err, &cf):
				// Another reminder holds its id (the occurrence rescheduled,
				// or created by hand): it stands as it is.
			case errors.Is(err, ErrTaken):
				// Another caller's reminder holds its id: not this series'
				// to send.
				out.Missed++
				s.cfg.Logger.Warn("a series' occurrence id is taken by another caller's reminder; the occurrence is skipped",
					"series", id, "occurrence", r.ID)
				continue
			default:
				// Not advanced: the next extension creates it.
				return out, fmt.Errorf("schedule: extend %q: occurrence %s: %w", id, r.ID, err)
			}
		}
		if moved {
			break
		}
		out.Created = append(out.Created, r.ID)
		if o.At.After(now) {
			if ahead == 0 {
				firstAhead = o.At
			}
			ahead++
		}
	}
	if moved {
		err = ledger.ErrSeriesMoved
	} else {
		if out.Next.Before(now) && !out.Next.IsZero() {
			out.Next = now
		}
		if next == sr.Next && out.Next.Equal(sr.ExtendAt) {
			return out, nil
		}
		err = s.cfg.Ledger.AdvanceSeries(ctx, id, start, next, out.Next)
	}
	switch {
	case errors.Is(err, ledger.ErrSeriesMoved):
		// Another extension advanced it (and created the same
		// occurrences); or, while this one created, it was cancelled
		// (or purged): then what this one created is cancelled too; or
		// it was rescheduled: then what this one created at the old
		// times is cancelled, but for what the new start gives too (the
		// reschedule cancelled only what it read as created).
		again, rerr := s.cfg.Ledger.ReadReminder(ctx, id)
		if rerr != nil {
			return out, fmt.Errorf("schedule: extend %q: %w", id, rerr)
		}
		latest := again.Series
		var gives map[string]bool
		note := "its series was cancelled"
		switch {
		case latest == nil || !latest.CancelledAt.IsZero():
		case !latest.Item.DueAt.Equal(sr.Item.DueAt) || len(latest.Starts) != len(sr.Starts):
			cur, err := seriesOf(latest.Item)
			if err != nil {
				return out, fmt.Errorf("schedule: extend %q: %w", id, err)
			}
			gives, note = givenBy(cur, id, horizon), "its series was rescheduled to "+FormatTime(latest.Item.DueAt)
		default:
			return out, nil
		}
		for _, occ := range out.Created {
			if gives[occ] {
				continue
			}
			if _, err := s.cancelOccurrence(ctx, operator, id, occ, note); err != nil && !errors.Is(err, ErrNoReminder) {
				return out, fmt.Errorf("schedule: extend %q: cancel %s: %w", id, occ, err)
			}
		}
	case err != nil:
		return out, fmt.Errorf("schedule: extend %q: %w", id, err)
	}
	return out, nil
}

// sendableDeliveries are r's deliveries that can still be sent at now:
// not expired (under r's late policy), and with no window that first opens
// only after their expiry. ok is false if none can.
func sendableDeliveries(r Reminder, now time.Time) ([]Delivery, bool) {
	last, _ := lateRule(r.Late).DeliveryTimes(r.ExpiresAt)
	if !last.After(now) {
		return nil, false
	}
	var out []Delivery
	for _, d := range r.Deliveries {
		if !d.Window.IsZero() && !d.Window.Next(r.DueAt).Before(last) {
			continue
		}
		out = append(out, d)
	}
	return out, len(out) > 0
}

// occurrencesToEnd are the occurrences of series sr that may have been
// created and may still be live at now (madeOccurrences' live ones): due
// after now less their reminder's window, late bound and a year (one
// rescheduled later than it was due; a move by more than a year is not
// looked for); the current start's first.
func occurrencesToEnd(sr ledger.Series, b seriesBounds, now time.Time) ([]string, error) {
	span := sr.Item.ExpiresAt.Sub(sr.Item.DueAt) + sr.Item.Late.Within + 366*24*time.Hour
	occ, err := madeOccurrences(sr, b, true, true)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, o := range occ {
		if o.Early || o.At.Add(span).After(now) {
			ids = append(ids, o.ID)
		}
	}
	return ids, nil
}

// madeOccurrence is an occurrence a series may have created: its id, and
// its due time at the start that gave it.
type madeOccurrence struct {
	ID string
	At time.Time
	// Early: created ahead of the extension (Series.Early), by a cancel
	// or a reschedule of it alone, at a time At does not tell.
	Early bool
}

// seriesBounds are an extension's: how far ahead (Config.SeriesAhead) and
// how many ahead (Config.SeriesCount) it creates.
type seriesBounds struct {
	Ahead time.Duration
	Count int
}

// madeOccurrences are the occurrences series sr may have created, each
// once: of each start, those before its Next and those an extension that
// read it may have created past its Next until it was left (a restart,
// Start.LeftAt) or, for the current start with current, until the series
// was cancelled: due within the extension's reach of then, at most twice
// its count (room for occurrences it skipped as missed). With current, the
// current start's come first, then the earlier starts' from the latest.
// With live, an earlier start's occurrence is left out unless every later
// start gives it too: each restart cancelled (settleRestart) those its new
// start does not give, so only those kept may still be live. Whether each
// was created, and is still the series' (not purged, not a reminder made
// by hand under the id), is for the caller to read. With current, those
// created ahead of the extension (Series.Early) come last.
func madeOccurrences(sr ledger.Series, b seriesBounds, current, live bool) ([]madeOccurrence, error) {
	starts := slices.Clone(sr.Starts)
	if current {
		st := sr.CurrentStart()
		st.LeftAt = sr.CancelledAt
		starts = append(starts, st)
	}
	slices.Reverse(starts) // the latest first
	var until time.Time    // the latest an extension of any start reached
	series := make([]recur.Series, len(starts))
	for i, st := range starts {
		sj, err := seriesOf(startItem(sr.Item, st))
		if err != nil {
			return nil, err
		}
		series[i], until = sj, maxTime(until, st.LeftAt.Add(b.Ahead))
	}
	gives := make([]map[string]bool, len(starts))
	seen := map[string]bool{}
	var out []madeOccurrence
	for i, st := range starts {
		if live && i > 0 && gives[i-1] == nil {
			gives[i-1] = givenBy(series[i-1], sr.Item.ID, until)
		}
		past := 0 // occurrences looked for past Next
		for it := series[i].Iter(); ; {
			o, ok := it.Next()
			if !ok {
				break
			}
			if o.N >= st.Next {
				if st.LeftAt.IsZero() || o.At.After(st.LeftAt.Add(b.Ahead)) || past >= 2*b.Count {
					break
				}
				past++
			}
			oid := recur.OccurrenceID(sr.Item.ID, o)
			if seen[oid] || live && !keptBy(gives[:i], oid) {
				continue
			}
			seen[oid] = true
			out = append(out, madeOccurrence{ID: oid, At: o.At})
		}
	}
	if current {
		for _, oid := range sr.Early {
			if !seen[oid] {
				seen[oid] = true
				out = append(out, madeOccurrence{ID: oid, Early: true})
			}
		}
	}
	return out, nil
}

// keptBy reports whether every one of gives (the later starts' ids) holds
// id.
func keptBy(gives []map[string]bool, id string) bool {
	for _, g := range gives {
		if !g[id] {
			return false
		}
	}
	return true
}

// cancelSeries cancels series sr: no occurrence is created any more, and
// each created one that may still be sent is cancelled as Cancel cancels
// a reminder (its results are theirs, keyed by the occurrences' ids).
func (s *Store) cancelSeries(ctx context.Context, c Caller, read ledger.Series, note string) ([]CancelResult, error) {
	sr, err := s.cfg.Ledger.CancelSeries(ctx, read.Item.ID)
	if err != nil {
		return nil, fmt.Errorf("schedule: cancel series %q: %w", read.Item.ID, err)
	}
	var out []CancelResult
	if sr.Unsettled {
		// Its last reschedule stopped before it cancelled what the old
		// start created.
		if out, _, err = s.settleRestart(ctx, c, sr, note); err != nil {
			return out, fmt.Errorf("schedule: cancel: %w", err)
		}
	}
	ids, err := occurrencesToEnd(sr, s.bounds(), s.cfg.Clock.Now())
	if err != nil {
		return nil, fmt.Errorf("schedule: cancel: %w", err)
	}
	for _, id := range ids {
		res, err := s.cancelOccurrence(ctx, c, sr.Item.ID, id, note)
		if errors.Is(err, ErrNoReminder) {
			continue // never created (missed), or purged
		}
		out = append(out, cancelledNow(res)...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// occurrenceOf finds the series an id not stored under names an
// occurrence of ("<series>.<local date and time>"), for a cancel or a
// reschedule of an occurrence not created yet; ok false if it names none.
func (s *Store) occurrenceOf(ctx context.Context, id string) (ledger.Series, recur.Occurrence, bool, error) {
	for i := len(id) - 1; i > 0; i-- {
		if id[i] != '.' {
			continue
		}
		stored, err := s.cfg.Ledger.ReadReminder(ctx, id[:i])
		if err != nil {
			return ledger.Series{}, recur.Occurrence{}, false, err
		}
		if stored.Series == nil {
			return ledger.Series{}, recur.Occurrence{}, false, nil
		}
		series, err := seriesOf(stored.Series.Item)
		if err != nil {
			return ledger.Series{}, recur.Occurrence{}, false, err
		}
		limit := s.cfg.Clock.Now().Add(s.validator.MaxAhead)
		for it := series.Iter(); ; {
			o, ok := it.Next()
			if !ok || o.At.After(limit) {
				return ledger.Series{}, recur.Occurrence{}, false, nil
			}
			if recur.OccurrenceID(stored.Series.Item.ID, o) == id {
				return *stored.Series, o, true, nil
			}
		}
	}
	return ledger.Series{}, recur.Occurrence{}, false, nil
}

// materialize creates occurrence o of series sr now, ahead of its
// extension, so that a cancel or a reschedule of it has a reminder to act
// on (and its extension later finds it, as it is).
func (s *Store) materialize(ctx context.Context, sr ledger.Series, o recur.Occurrence) error {
	if !sr.CancelledAt.IsZero() {
		return fmt.Errorf("schedule: occurrence %s: the series was cancelled: %w", recur.OccurrenceID(sr.Item.ID, o), ErrNoReminder)
	}
	caller := operator
	if sr.Item.CreatedBy != "" {
		caller = Caller{Principal: sr.Item.CreatedBy}
	}
	// Noted on the series first: however far ahead, a cancel of the
	// series and a purge find it.
	oid := recur.OccurrenceID(sr.Item.ID, o)
	if err := s.cfg.Ledger.NoteEarly(ctx, sr.Item.ID, oid); errors.Is(err, ledger.ErrTooManyEarly) {
		return &ValidationError{ID: oid, Problem: fmt.Sprintf("is not created yet, and its series has %d created ahead of their time, the most it keeps", ledger.MaxEarly),
			Fix: fmt.Sprintf("cancel or reschedule it once it is created, %d days before its time", int(s.cfg.SeriesAhead.Hours()/24))}
	} else if err != nil {
		return err
	}
	// From the start read: a reschedule or a cancel of the series since
	// refuses it, and the series is read again (the id may name no
	// occurrence of it any more).
	for attempt := 1; ; attempt++ {
		start := sr.CurrentStart()
		_, err := s.createWith(ctx, caller, occurrence(sr, o), &start)
		if !errors.Is(err, ledger.ErrSeriesMoved) {
			return err
		}
		if attempt == 3 {
			return fmt.Errorf("schedule: occurrence %s: its series kept changing while it was created: %w; send the same request again", oid, ledger.ErrChanged)
		}
		again, o2, ok, err := s.occurrenceOf(ctx, oid)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("schedule: occurrence %s: its series no longer gives it (rescheduled since): %w", oid, ErrNoReminder)
		case !again.CancelledAt.IsZero():
			return fmt.Errorf("schedule: occurrence %s: the series was cancelled: %w", oid, ErrNoReminder)
		}
		sr, o = again, o2
	}
}

// rescheduleSeries restarts series read from a new first occurrence (to:
// dueLocal, or dueAt, on the series' wall clock; its zone stays): its rule
// gives the occurrences from there, counting COUNT afresh. The series item
// moves first (ledger.RestartSeries, on condition that no extension or
// other restart came between: else it reads again), keeping the start it
// leaves and marked unsettled; then each occurrence the old start created
// and not yet due that the new start does not give is cancelled (one it
// gives too, the same id, is the same instant, and stands; those already
// due stand), and the restart is settled (settleRestart). Should this stop
// between the two, the series' next extension, or a retry, finishes the
// cancels before anything else. Then its extension creates the new
// occurrences. The same reschedule again changes nothing. Its results are
// the cancelled occurrences' deliveries, moved (to the rule's new times)
// or refused (sent, in flight: they go at their old times), and those of
// the new occurrences created.
func (s *Store) rescheduleSeries(ctx context.Context, c Caller, read ledger.Series, to Times, note string) (Rescheduled, error) {
	id := read.Item.ID
	if !read.CancelledAt.IsZero() {
		return Rescheduled{}, &ValidationError{ID: id, Problem: "is a series that was cancelled", Fix: "create another series with the new start"}
	}
	zone := read.Item.Local.TimeZone
	if to.TimeZone != "" && to.TimeZone != zone {
		return Rescheduled{}, &ValidationError{ID: id, Field: "timeZone", Problem: fmt.Sprintf("%q is not the series' zone (%s)", to.TimeZone, zone),
			Fix: "leave timeZone out (a series keeps its zone), or cancel the series and create another in the new zone"}
	}
	dueAt, expiresAt, l, err := resolveLocal(id, localIn{to.DueAt, to.ExpiresAt, to.DueLocal, to.ExpiresLocal, zone})
	if err != nil {
		return Rescheduled{}, err
	}
	due, exp, err := s.validator.times(id, dueAt, expiresAt, read.Item.ExpiresAt.Sub(read.Item.DueAt), "the series' window", "give an expiresAt")
	if err != nil {
		return Rescheduled{}, localField(err, to.DueAt, to.ExpiresAt, to.ExpiresLocal)
	}
	if l.TimeZone == "" {
		l.TimeZone = zone
	}
	if l.DueLocal == "" {
		loc, err := localtime.LoadZone(zone)
		if err != nil {
			return Rescheduled{}, fmt.Errorf("schedule: reschedule series %q: %w", id, err)
		}
		l.DueLocal = localtime.WallOf(due, loc).String()
	}
	out := Rescheduled{DueAt: due, ExpiresAt: exp, Local: l}
	if read.Unsettled {
		// An earlier reschedule (this one, sent again) stopped before its
		// cancels: done first, whatever this one asks.
		res, _, err := s.settleRestart(ctx, c, read, "its series was rescheduled to "+FormatTime(read.Item.DueAt)+note)
		out.Deliveries = append(out.Deliveries, movedOf(res)...)
		if err != nil {
			return out, fmt.Errorf("schedule: reschedule series %q: %w", id, err)
		}
		read.Unsettled = false
	}
	if due.Equal(read.Item.DueAt) && exp.Equal(read.Item.ExpiresAt) && localItem(l) == read.Item.Local {
		// Where it stands already (this reschedule again): a restart
		// would create again the occurrences since purged.
		return out, nil
	}
	now := s.cfg.Clock.Now()
	if !due.After(now) {
		return Rescheduled{}, &ValidationError{ID: id, Field: "dueAt", Problem: "is not ahead: a series restarts from its new first occurrence",
			Fix: "give a time ahead; to send one occurrence now, reschedule that occurrence by its id"}
	}
	item := read.Item
	item.DueAt, item.ExpiresAt = due, exp
	item.Local = localItem(l)
	if p := s.validator.checkRecur(Input{ID: id, Recur: item.Recur}, &Reminder{ID: id, DueAt: due, Local: l}); p != nil {
		return Rescheduled{}, &ValidationError{ID: id, Field: p.field, Problem: p.problem, Fix: p.fix}
	}
	series, err := seriesOf(item)
	if err != nil {
		return Rescheduled{}, fmt.Errorf("schedule: reschedule: %w", err)
	}
	if oid, err := s.cancelledByARestart(ctx, read, series, now); err != nil {
		return Rescheduled{}, fmt.Errorf("schedule: reschedule series %q: %w", id, err)
	} else if oid != "" {
		field := "dueAt"
		if to.DueLocal != "" {
			field = "dueLocal"
		}
		return Rescheduled{}, &ValidationError{ID: id, Field: field,
			Problem: "gives occurrence " + oid + ", which is cancelled (by an earlier reschedule of the series, or by hand): an occurrence, once cancelled, is never sent",
			Fix:     "give the new start another time of day, or cancel the series and create another"}
	}
	from := read.CurrentStart()
	err = s.cfg.Ledger.RestartSeries(ctx, id, from, due, exp, item.Local, now)
	switch {
	case errors.Is(err, ledger.ErrTooManyRestarts):
		return out, &ValidationError{ID: id, Field: "dueAt", Problem: fmt.Sprintf("is a series rescheduled %d times already, the most a series is", ledger.MaxRestarts),
			Fix: "cancel the series and create another with the new start"}
	case errors.Is(err, ledger.ErrSeriesMoved):
		// Extended (or cancelled, or restarted) since the read: the
		// caller's reschedule reads it again.
		return out, fmt.Errorf("schedule: reschedule series %q: %w; send the same reschedule again", id, ledger.ErrChanged)
	case err != nil:
		return out, fmt.Errorf("schedule: reschedule series %q: %w; send the same reschedule again", id, err)
	}
	restarted := read
	restarted.Item, restarted.Next, restarted.ExtendAt, restarted.Unsettled = item, 1, now, true
	from.LeftAt = now
	restarted.Starts = append(slices.Clone(read.Starts), from)
	res, kept, err := s.settleRestart(ctx, c, restarted, "its series was rescheduled to "+FormatTime(due)+note)
	out.Deliveries = append(out.Deliveries, movedOf(res)...)
	if err != nil {
		// The series stands at its new start, unsettled: its next
		// extension cancels what this one could not.
		return out, fmt.Errorf("schedule: reschedule series %q: the series is at its new start, but cancelling its old occurrences failed "+
			"(its next extension, or this reschedule sent again, finishes it): %w", id, err)
	}
	ext, err := s.Extend(ctx, id)
	if err != nil {
		// The series stands at its new start: the enqueue's next
		// extension creates what this one could not.
		s.cfg.Logger.Warn("series rescheduled; its first occurrences were not created, and the enqueue's extension creates them", "series", id,
			"error", err.Error())
	}
	for _, oid := range ext.Created {
		st, err := s.cfg.Ledger.ReadReminder(ctx, oid)
		if err != nil {
			return out, fmt.Errorf("schedule: reschedule series %q: %w", id, err)
		}
		for _, d := range st.Deliveries {
			out.Deliveries = append(out.Deliveries, MoveResult{Key: d.Key(), Moved: !kept[oid], Unchanged: kept[oid], Status: statusOf(d.Status)})
		}
	}
	return out, nil
}

// movedOf are a reschedule's results of the occurrences it cancelled:
// each cancelled delivery moved (to the new start's occurrence), or
// refused (sent, in flight), or unchanged (cancelled already).
func movedOf(res []CancelResult) []MoveResult {
	var out []MoveResult
	for _, r := range res {
		out = append(out, MoveResult{Key: r.Key, Moved: r.Cancelled, Status: r.Status, Refused: r.Refused, At: r.At,
			Unchanged: r.Refused == nil && !r.Cancelled})
	}
	return out
}

// startItem is series item it as it was at its start st.
func startItem(it ledger.ReminderItem, st ledger.Start) ledger.ReminderItem {
	it.DueAt, it.Local.DueLocal = st.DueAt, st.DueLocal
	return it
}

// givenBy are the ids of series' occurrences due at or before until.
func givenBy(series recur.Series, id string, until time.Time) map[string]bool {
	gives := map[string]bool{}
	for it := series.Iter(); ; {
		o, ok := it.Next()
		if !ok || o.At.After(until) {
			return gives
		}
		gives[recur.OccurrenceID(id, o)] = true
	}
}

// settleRestart finishes series sr's last restart (sr.Unsettled): each
// occurrence its start before created (sr.Starts' last), not yet due, that
// the current start does not give too is cancelled, as Cancel cancels a
// reminder (those it gives too are kept: the same id is the same instant);
// then the restart is marked settled. Run by the reschedule, or, if that
// stopped first, by whoever reads the series unsettled next. Its results
// are the cancels'.
func (s *Store) settleRestart(ctx context.Context, c Caller, sr ledger.Series, note string) ([]CancelResult, map[string]bool, error) {
	id := sr.Item.ID
	if !sr.Unsettled || len(sr.Starts) == 0 {
		return nil, nil, nil
	}
	cur, err := seriesOf(sr.Item)
	if err != nil {
		return nil, nil, err
	}
	// Every start's, not the last's alone: an occurrence an earlier
	// restart kept (its new start gave it too) is past that start's Next.
	made, err := madeOccurrences(sr, s.bounds(), false, true)
	if err != nil {
		return nil, nil, err
	}
	now := s.cfg.Clock.Now()
	var ids []string
	var last time.Time
	for _, o := range made {
		if o.At.After(now) {
			ids, last = append(ids, o.ID), maxTime(last, o.At)
		}
	}
	gives, kept := givenBy(cur, id, last), map[string]bool{}
	var out []CancelResult
	for _, oid := range ids {
		if gives[oid] {
			kept[oid] = true
			continue
		}
		res, err := s.cancelOccurrence(ctx, c, id, oid, note)
		if errors.Is(err, ErrNoReminder) {
			continue // missed, purged, or not the series'
		}
		out = append(out, cancelledNow(res)...)
		if err != nil {
			return out, kept, fmt.Errorf("cancel occurrence %s: %w", oid, err)
		}
	}
	if err := s.cfg.Ledger.SettleRestart(ctx, id, len(sr.Starts)); err != nil && !errors.Is(err, ledger.ErrSeriesMoved) {
		return out, kept, err
	}
	return out, kept, nil
}

// cancelOccurrence cancels occurrence oid of series id as Cancel cancels a
// reminder, if the reminder stored under oid is the series' occurrence:
// one created by hand under an occurrence's id is not the series' to
// cancel (ErrNoReminder then, as for one never created or purged).
func (s *Store) cancelOccurrence(ctx context.Context, c Caller, id, oid, note string) ([]CancelResult, error) {
	st, err := s.cfg.Ledger.ReadReminder(ctx, oid)
	if err != nil {
		return nil, fmt.Errorf("schedule: cancel %q: %w", oid, err)
	}
	if st.Reminder == nil || st.Reminder.Series != id {
		return nil, fmt.Errorf("schedule: cancel %q: %w", oid, ErrNoReminder)
	}
	return s.cancel(ctx, c, oid, note)
}

// bounds are s's extension's bounds.
func (s *Store) bounds() seriesBounds {
	return seriesBounds{Ahead: s.cfg.SeriesAhead, Count: s.cfg.SeriesCount}
}

// cancelledNow are the results of res of deliveries this cancel cancelled,
// or refused as sent or in flight: not those cancelled already (by an
// earlier restart, or by hand), which it changed nothing of.
func cancelledNow(res []CancelResult) []CancelResult {
	var out []CancelResult
	for _, r := range res {
		if r.Cancelled || r.Refused != nil && !(errors.Is(r.Refused, ledger.ErrFinished) && r.Status == StatusCancelled) {
			out = append(out, r)
		}
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// cancelledByARestart is the first occurrence (its id) that series, read's
// new start, gives within the extension's reach and that an earlier
// restart of read cancelled: made by one start, not given by a later one
// (moving a series back to a time it left), and stored cancelled, the
// series'. An extension would find it and send nothing: "" if there is
// none.
func (s *Store) cancelledByARestart(ctx context.Context, read ledger.Series, series recur.Series, now time.Time) (string, error) {
	starts := append(slices.Clone(read.Starts), read.CurrentStart())
	gives := make([]map[string]bool, len(starts))
	horizon := now.Add(s.cfg.SeriesAhead)
	for i, st := range starts {
		sj, err := seriesOf(startItem(read.Item, st))
		if err != nil {
			return "", err
		}
		gives[i] = givenBy(sj, read.Item.ID, horizon)
	}
	given, looked := givenBy(series, read.Item.ID, horizon), map[string]bool{}
	for i, st := range starts[:len(starts)-1] {
		one := read
		one.Starts = []ledger.Start{st}
		made, err := madeOccurrences(one, s.bounds(), false, false)
		if err != nil {
			return "", err
		}
		for _, o := range made {
			if !o.At.After(now) || !given[o.ID] || looked[o.ID] {
				continue
			}
			for j := i + 1; j < len(starts); j++ {
				if gives[j][o.ID] {
					continue
				}
				looked[o.ID] = true
				st, err := s.cfg.Ledger.ReadReminder(ctx, o.ID)
				if err != nil {
					return "", err
				}
				if st.Reminder != nil && st.Reminder.Series == read.Item.ID &&
					slices.ContainsFunc(st.Deliveries, func(d ledger.Delivery) bool { return d.Status == ledger.StatusCancelled }) {
					return o.ID, nil
				}
				break
			}
		}
	}
	return "", nil
}

// CreatedOccurrences are the ids of the occurrences series sr may have
// created, from each of its starts (before each reschedule, sr.Starts,
// then its current one), each once, in that order, with those an extension
// may have created past a start's Next before the start was left or the
// series cancelled (due within ahead: Config.SeriesAhead, a stage's
// DefaultSeriesAhead): for a purge of the series (nudge reminder purge),
// which cancels it first so that no more are created. Some were never
// created (missed, or past what an extension reached), and an id may hold
// a reminder created by hand under an occurrence's id: the purge reads
// each and deletes the series' occurrences only.
func CreatedOccurrences(sr ledger.Series, ahead time.Duration) ([]string, error) {
	made, err := madeOccurrences(sr, seriesBounds{Ahead: ahead, Count: DefaultSeriesCount}, true, false)
	if err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	ids := make([]string, len(made))
	for i, o := range made {
		ids[i] = o.ID
	}
	return ids, nil
}
