package console

// A reminder's actions: cancel, reschedule and revive, each a confirmation
// page (GET) that shows what will change, delivery by delivery, then the
// change (POST), recorded with who and why in each delivery's history, and
// a redirect to the reminder's page. A change refused for some delivery
// (sent, in flight, changed since the page was read) answers with a page
// that says so, in the CLI's words, instead of the redirect.

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/pkg/failure"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// effectRow is one delivery on a confirmation page: as it is, and what
// the change will do to it.
type effectRow struct {
	Key, Status, Due, Expires string
	// Changes is whether the change will apply to it; Effect says what
	// happens to it, or why not.
	Changes bool
	Effect  string
}

// actionPage is a confirmation page's data.
type actionPage struct {
	ID string
	// Rows are the deliveries; Changes counts those the change applies to.
	Rows    []effectRow
	Changes int
	// Error says what was wrong with the form posted; Reason, Due and
	// Expires are its values, kept.
	Error, Reason, Due, Expires string
	// Window is the reminder's expiresAt − dueAt, which a reschedule
	// keeps unless given an expiry; Note the history note's beginning.
	Window, Note string
	// Dead and Left are a revive's: the deliveries it will revive, and
	// those it will not, with why.
	Dead, Left []redrive.Dead
	// MaxReason is the longest reason the history keeps whole.
	MaxReason int
}

// reminderPath is the reminder's page.
func reminderPath(id string) string { return "/reminders/" + url.PathEscape(id) }

// show reads the reminder, answering 404 (or 502) itself if it cannot.
func (s *Server) show(w http.ResponseWriter, r *http.Request) (schedule.View, bool) {
	v, err := s.cfg.Reminders.Show(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, schedule.ErrNoReminder):
		s.fail(w, r, http.StatusNotFound, err)
		return v, false
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err)
		return v, false
	}
	return v, true
}

// rows lists v's deliveries with effect's verdict on each.
func rows(v schedule.View, effect func(ledger.Delivery) (bool, string)) ([]effectRow, int) {
	var out []effectRow
	n := 0
	for _, d := range v.Deliveries {
		ok, what := effect(d)
		if ok {
			n++
		}
		out = append(out, effectRow{Key: d.Key().String(), Status: string(d.Status), Due: ledger.Format(d.DueAt), Expires: ledger.Format(d.ExpiresAt),
			Changes: ok, Effect: what})
	}
	return out, n
}

// inFlight reports whether a consumer holds d now, by the operator's
// allowance for clock skew.
func inFlight(d ledger.Delivery, now time.Time) bool {
	return d.Status == ledger.StatusSending && d.LeaseUntil.Add(ledger.OperatorClockSkew).After(now)
}

// cancelEffect says what a cancel does to d at now (ledger.Ledger.Cancel).
func cancelEffect(now time.Time) func(ledger.Delivery) (bool, string) {
	return func(d ledger.Delivery) (bool, string) {
		switch {
		case d.Status == ledger.StatusSent:
			return false, "stays sent: it was sent at " + ledger.Format(d.SentAt) + "; nothing can unsend it"
		case d.Status == ledger.StatusExpired || d.Status == ledger.StatusCancelled:
			return false, "already ended (" + string(d.Status) + "); nothing to cancel"
		case inFlight(d, now):
			return false, "refused while a consumer sends it (lease until " + ledger.Format(d.LeaseUntil) + "): cancel again after " +
				ledger.Format(d.LeaseUntil.Add(ledger.OperatorClockSkew))
		case d.Status == ledger.StatusSending:
			return true, "cancelled; its consumer's lease lapsed, so its last attempt may have gone out: check the provider's record"
		case d.Status == ledger.StatusDead:
			return true, "cancelled, so that no redrive sends it"
		case d.Status == ledger.StatusHeld:
			return true, "cancelled: a fallback, never taken"
		default:
			return true, "cancelled: never sent"
		}
	}
}

// cancelNote is the history note of a cancel from the console.
func (s *Server) cancelNote() string { return "cancelled by " + s.by() + ": " }

func (s *Server) cancelPage(v schedule.View, id string) actionPage {
	p := actionPage{ID: id, Note: s.cancelNote()}
	p.Rows, p.Changes = rows(v, cancelEffect(s.now()))
	p.MaxReason = ledger.MaxNote - len(p.Note)
	return p
}

// cancelDoc is a cancel's confirmation page's JSON twin.
func cancelDoc(p actionPage) map[string]any {
	return map[string]any{"reminder": p.ID, "action": "cancel", "deliveries": p.Rows, "changes": p.Changes, "note": p.Note}
}

// cancelConfirm is GET /reminders/{id}/cancel.
func (s *Server) cancelConfirm(w http.ResponseWriter, r *http.Request) {
	v, ok := s.show(w, r)
	if !ok {
		return
	}
	p := s.cancelPage(v, r.PathValue("id"))
	s.render(w, r, http.StatusOK, "confirm-cancel", "Cancel "+p.ID, p, cancelDoc(p))
}

// cancel is POST /reminders/{id}/cancel: schedule.Store.Cancel, noted
// "cancelled by <operator> (console): <reason>".
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	reason, err := reasonOf(r, s.cancelNote())
	if err != nil {
		v, ok := s.show(w, r)
		if !ok {
			return
		}
		p := s.cancelPage(v, id)
		p.Error, p.Reason = err.Error(), r.PostFormValue("reason")
		s.render(w, r, http.StatusBadRequest, "confirm-cancel", "Cancel "+id, p, problem{Status: http.StatusBadRequest, Error: err.Error()})
		return
	}
	note := s.cancelNote() + reason
	res, err := s.cfg.Reminders.Cancel(r.Context(), id, note)
	if errors.Is(err, schedule.ErrNoReminder) {
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	s.cfg.Logger.Info("console: cancel", "reminder", id, "by", s.by(), "reason", reason, "deliveries", len(res), "error", errText(err))
	var out []resultRow
	clean := err == nil
	for _, c := range res {
		row := resultRow{Key: c.Key.String(), OK: c.Cancelled && c.Unended == 0}
		switch {
		case c.Unended > 0:
			row.Text = fmt.Sprintf("cancelled, but attempt %d may have been sent: it never recorded its end; check the provider's record", c.Unended)
		case c.Cancelled:
			row.Text = "cancelled"
		case errors.Is(c.Refused, ledger.ErrAlreadySent):
			row.Text = "not cancelled: it was already sent at " + ledger.Format(c.At)
		case errors.Is(c.Refused, ledger.ErrLeased):
			row.Text = "not cancelled: a consumer is sending it now (lease until " + ledger.Format(c.At) + "); cancel again after " +
				ledger.Format(c.At.Add(ledger.OperatorClockSkew))
		default:
			row.OK, row.Text = true, "already ended ("+string(c.Status)+"); nothing to cancel"
		}
		clean = clean && row.OK
		out = append(out, row)
	}
	s.done(w, r, id, "Cancel", out, err, clean)
}

// resultRow is what a change did to one delivery, in the CLI's words.
type resultRow struct {
	Key  string
	OK   bool
	Text string
}

// resultPage is the page of a change not done as confirmed.
type resultPage struct {
	ID, Action string
	Rows       []resultRow
	Error      string
}

// done ends a change: a redirect to the reminder's page when it did what
// was confirmed (clean), else a page that says what it did and did not.
func (s *Server) done(w http.ResponseWriter, r *http.Request, id, action string, out []resultRow, err error, clean bool) {
	if clean && r.URL.Query().Get("format") != "json" {
		http.Redirect(w, r, reminderPath(id), http.StatusSeeOther)
		return
	}
	p := resultPage{ID: id, Action: action, Rows: out}
	code := http.StatusOK
	if err != nil {
		p.Error, code = err.Error(), http.StatusBadGateway
	}
	if p.Rows == nil {
		p.Rows = []resultRow{}
	}
	s.render(w, r, code, "change-done", action+" "+id+": not all as confirmed", p, map[string]any{"reminder": id, "action": strings.ToLower(action),
		"deliveries": p.Rows, "error": p.Error})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// rescheduleEffect says what a reschedule does to d at now
// (schedule.Store.Reschedule).
func rescheduleEffect(now time.Time) func(ledger.Delivery) (bool, string) {
	return func(d ledger.Delivery) (bool, string) {
		switch {
		case d.Status == ledger.StatusSending:
			return false, "not moved: a consumer is sending it now (lease until " + ledger.Format(d.LeaseUntil) + ")"
		case d.Status == ledger.StatusRetrying && d.LastErrorClass == failure.ClassAmbiguous:
			return false, "not moved: it waits for the provider's record of an attempt that may have gone out"
		case d.Status == ledger.StatusSent:
			return false, "not moved: it was already sent at " + ledger.Format(d.SentAt)
		case d.Status == ledger.StatusDead:
			return false, "not moved: it is dead-lettered; review it (dead letters): a redrive sends it at its old time, or cancel it"
		case d.Status.Terminal():
			return false, "not moved: it already ended (" + string(d.Status) + ")"
		case d.Status == ledger.StatusHeld:
			return true, "moves with the reminder, and stays held (a fallback)"
		default:
			return true, "moves to the new due time (pending)"
		}
	}
}

// rescheduleNote is the note the console gives a reschedule: the history
// reads "rescheduled to <time>: by <operator> (console): <reason>".
func (s *Server) rescheduleNote() string { return "by " + s.by() + ": " }

func (s *Server) reschedulePage(v schedule.View, id string) actionPage {
	p := actionPage{ID: id, Note: "rescheduled to " + ledger.TimeFormat + ": " + s.rescheduleNote()}
	p.Rows, p.Changes = rows(v, rescheduleEffect(s.now()))
	if rem := v.Reminder; rem != nil {
		p.Window = schedule.FormatSpan(rem.ExpiresAt.Sub(rem.DueAt))
	}
	p.MaxReason = ledger.MaxNote - len(p.Note)
	return p
}

func rescheduleDoc(p actionPage) map[string]any {
	return map[string]any{"reminder": p.ID, "action": "reschedule", "deliveries": p.Rows, "changes": p.Changes, "window": p.Window}
}

// rescheduleConfirm is GET /reminders/{id}/reschedule.
func (s *Server) rescheduleConfirm(w http.ResponseWriter, r *http.Request) {
	v, ok := s.show(w, r)
	if !ok {
		return
	}
	p := s.reschedulePage(v, r.PathValue("id"))
	p.Due, p.Expires = r.URL.Query().Get("due"), r.URL.Query().Get("expires")
	s.render(w, r, http.StatusOK, "confirm-reschedule", "Reschedule "+p.ID, p, rescheduleDoc(p))
}

// reschedule is POST /reminders/{id}/reschedule: schedule.Store.Reschedule
// with the CLI's semantics (the window kept unless an expiry is given).
func (s *Server) reschedule(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	to := schedule.Times{DueAt: strings.TrimSpace(r.PostFormValue("due")), ExpiresAt: strings.TrimSpace(r.PostFormValue("expires"))}
	again := func(err error) {
		v, ok := s.show(w, r)
		if !ok {
			return
		}
		p := s.reschedulePage(v, id)
		p.Error, p.Reason, p.Due, p.Expires = err.Error(), r.PostFormValue("reason"), to.DueAt, to.ExpiresAt
		s.render(w, r, http.StatusBadRequest, "confirm-reschedule", "Reschedule "+id, p, problem{Status: http.StatusBadRequest, Error: err.Error()})
	}
	reason, err := reasonOf(r, "rescheduled to "+ledger.TimeFormat+": "+s.rescheduleNote())
	if err == nil && to.DueAt == "" {
		err = errors.New("give the new due time, RFC 3339, like 2026-12-08T09:00:00Z")
	}
	if err != nil {
		again(err)
		return
	}
	res, err := s.cfg.Reminders.Reschedule(r.Context(), id, to, s.rescheduleNote()+reason)
	var ve *schedule.ValidationError
	switch {
	case errors.As(err, &ve):
		again(err)
		return
	case errors.Is(err, schedule.ErrNoReminder):
		s.fail(w, r, http.StatusNotFound, err)
		return
	}
	s.cfg.Logger.Info("console: reschedule", "reminder", id, "by", s.by(), "reason", reason, "due", to.DueAt, "expires", to.ExpiresAt, "error", errText(err))
	var out []resultRow
	clean := err == nil
	for _, m := range res.Deliveries {
		row := resultRow{Key: m.Key.String(), OK: m.Moved || m.Unchanged}
		switch {
		case m.Moved:
			row.Text = "moved to " + ledger.Format(res.DueAt) + " (expires " + ledger.Format(res.ExpiresAt) + ")"
		case m.Unchanged:
			row.Text = "already at " + ledger.Format(res.DueAt)
		case errors.Is(m.Refused, ledger.ErrAlreadySent):
			row.Text = "not moved: it was already sent at " + ledger.Format(m.At)
		case errors.Is(m.Refused, ledger.ErrLeased):
			row.Text = "not moved: a consumer is sending it now (lease until " + ledger.Format(m.At) + "); reschedule again after " +
				ledger.Format(m.At.Add(ledger.OperatorClockSkew))
		case errors.Is(m.Refused, schedule.ErrDeadLettered):
			row.Text = "not moved: it is dead-lettered; review it (dead letters): a redrive sends it at its old time, or cancel it"
		default:
			row.OK, row.Text = true, "not moved: it already ended ("+string(m.Status)+")"
		}
		clean = clean && row.OK
		out = append(out, row)
	}
	s.done(w, r, id, "Reschedule", out, err, clean)
}

// reviveNote is the note's beginning of a revive from the console
// (ledger.Revival.Note).
func (s *Server) reviveNote() string { return "revived by " + s.by() + ": " }

// errNoReviver answers a revive in a console without a reviver.
var errNoReviver = errors.New("this console cannot revive: it was started without the ledger's reviver")

// revivePlan plans the revive of the reminder's dead deliveries
// (redrive.Reviver, ReviveFilter.Reminder), for reason.
func (s *Server) revivePlan(r *http.Request, id, reason string) (*redrive.Reviver, *redrive.RevivePlan, int, error) {
	if s.cfg.Reviver == nil {
		return nil, nil, http.StatusNotFound, errNoReviver
	}
	rv, err := s.cfg.Reviver(s.by(), reason)
	if err != nil {
		return nil, nil, http.StatusBadRequest, err
	}
	p, err := rv.Plan(r.Context(), redrive.ReviveFilter{Max: 100, Reminder: id})
	if err != nil {
		return nil, nil, http.StatusBadGateway, err
	}
	if p.Scanned == 0 {
		return nil, nil, http.StatusNotFound, fmt.Errorf("revive %q: %w; check the id (reminder ids are case-sensitive)", id, schedule.ErrNoReminder)
	}
	return rv, p, http.StatusOK, nil
}

// previewReason is the reason a confirmation page's plan is made with: a
// plan writes nothing, and the reason posted is the one recorded.
const previewReason = "confirmation page (nothing written)"

func (s *Server) revivePage(id string, p *redrive.RevivePlan) actionPage {
	a := actionPage{ID: id, Note: s.reviveNote(), Dead: p.Chosen, Left: p.Left, Changes: len(p.Chosen)}
	a.MaxReason = ledger.MaxNote - len(a.Note)
	return a
}

func reviveDoc(id string, p *redrive.RevivePlan) map[string]any {
	chosen, left := p.Chosen, p.Left
	if chosen == nil {
		chosen = []redrive.Dead{}
	}
	if left == nil {
		left = []redrive.Dead{}
	}
	return map[string]any{"reminder": id, "action": "revive", "dryRun": true, "wouldRevive": chosen, "left": left}
}

// reviveConfirm is GET /reminders/{id}/revive: the reminder's dead
// deliveries that a revive brings back, and those it leaves, with why.
func (s *Server) reviveConfirm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	_, p, code, err := s.revivePlan(r, id, previewReason)
	if err != nil {
		s.fail(w, r, code, err)
		return
	}
	a := s.revivePage(id, p)
	s.render(w, r, http.StatusOK, "confirm-revive", "Revive "+id, a, reviveDoc(id, p))
}

// revive is POST /reminders/{id}/revive: plans again, and revives the
// deliveries the confirmation page showed (its key fields) that are still
// to be revived; any other is left, saying so.
func (s *Server) revive(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	reason, err := reasonOf(r, s.reviveNote())
	if err != nil {
		_, p, code, perr := s.revivePlan(r, id, previewReason)
		if perr != nil {
			s.fail(w, r, code, perr)
			return
		}
		a := s.revivePage(id, p)
		a.Error, a.Reason = err.Error(), r.PostFormValue("reason")
		s.render(w, r, http.StatusBadRequest, "confirm-revive", "Revive "+id, a, problem{Status: http.StatusBadRequest, Error: err.Error()})
		return
	}
	rv, p, code, err := s.revivePlan(r, id, reason)
	if err != nil {
		s.fail(w, r, code, err)
		return
	}
	shown := map[string]bool{}
	for _, k := range r.PostForm["key"] {
		shown[k] = true
	}
	var out []resultRow
	chosen := p.Chosen[:0:0]
	for _, d := range p.Chosen {
		if shown[d.DeliveryKey] {
			chosen = append(chosen, d)
			continue
		}
		out = append(out, resultRow{Key: d.DeliveryKey, Text: "not revived: it was not on the confirmation page (dead since?); look again"})
	}
	for _, d := range p.Left {
		if shown[d.DeliveryKey] {
			out = append(out, resultRow{Key: d.DeliveryKey, Text: "not revived: " + d.Why})
		}
	}
	clean := len(out) == 0
	p.Chosen = chosen
	res, err := rv.Apply(r.Context(), p, nil)
	s.cfg.Logger.Info("console: revive", "reminder", id, "by", s.by(), "reason", reason, "revived", res.Revived, "skipped", res.Skipped,
		"failed", res.Failed, "error", errText(err))
	for _, o := range res.Outcomes {
		row := resultRow{Key: o.DeliveryKey, OK: o.Revived}
		switch {
		case o.Revived:
			row.Text = "revived (pending; the enqueue hands it off from " + ledger.Format(o.PublishAt) + ")"
		case o.Problem != "":
			row.Text = "FAILED: " + o.Problem
		default:
			row.Text = "skipped: " + o.Why
		}
		clean = clean && row.OK
		out = append(out, row)
	}
	s.done(w, r, id, "Revive", out, err, clean && err == nil)
}
