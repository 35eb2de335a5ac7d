package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// minReason is the shortest reason of a reveal, in characters, once
// trimmed.
const minReason = 3

// maxReason is the longest reason of a reveal, in bytes once trimmed: what
// the history's note ("address revealed to <operator>: <reason>",
// ledger.MaxNote) holds whole, so that no reason is cut short.
func (s *Server) maxReason() int {
	return ledger.MaxNote - len(ledger.RevealPrefix(s.cfg.Operator))
}

// reminderView is what a reminder's page shows.
type reminderView struct {
	ID         string
	Doc        schedule.Document
	Deliveries []deliveryView
	Timeline   []timelineEntry
	// Metadata is the reminder's labels, by name.
	Metadata []label
	// AccountURL is the reminder's account's page; DueAt and ExpiresAt
	// its times, as documents show them.
	AccountURL, DueAt, ExpiresAt string
	// Revealed names the delivery whose address this answer shows whole.
	Revealed string
	// CancelURL, RescheduleURL and ReviveURL are the actions' pages (when
	// the console allows actions).
	CancelURL, RescheduleURL, ReviveURL string
	// MaxReason is the longest reason a reveal takes, in bytes.
	MaxReason int
}

// label is one of the reminder's metadata.
type label struct{ Name, Value string }

// deliveryView is one delivery's section.
type deliveryView struct {
	schedule.DeliveryDocument
	// Anchor is the section's id: "d-<channel>-<provider>".
	Anchor string
	// RevealURL is where its reveal form posts.
	RevealURL string
	// State is Told(): the status and the provider's feedback in words.
	State string
	// Failed marks a delivery that did not reach its recipient: dead, or
	// failed by the provider's feedback.
	Failed bool
	// HandedOffText says whether the enqueue handed it to the queue.
	HandedOffText string
	// Revealed is set when Address is shown whole in this answer.
	Revealed bool
	// RevealError is why a reveal of this delivery was refused.
	RevealError string
	// Reason is the reason typed, given back with a refusal.
	Reason string
}

// timelineEntry is one history entry of the timeline, with its style.
type timelineEntry struct {
	schedule.Event
	// Class is the entry's style: "failed", "feedback", "reveal" or "".
	Class string
	// DeliveryURL is the entry's delivery's section.
	DeliveryURL string
}

// reminder shows a reminder: its deliveries' states and its history,
// addresses masked. Its JSON twin is `nudge reminder show --json`'s
// document.
func (s *Server) reminder(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	v, doc, ok := s.readReminder(w, r, id)
	if !ok {
		return
	}
	s.render(w, r, http.StatusOK, "reminder", "Reminder "+id, v, doc)
}

// readReminder reads reminder id and lays its page out, or answers with
// the error page (404 for no such reminder) and returns false.
func (s *Server) readReminder(w http.ResponseWriter, r *http.Request, id string) (reminderView, schedule.Document, bool) {
	doc, err := s.document(r.Context(), id)
	switch {
	case errors.Is(err, schedule.ErrNoReminder):
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no reminder %q: reminder ids are case-sensitive; search it, or its account, with Find", id))
		return reminderView{}, doc, false
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err)
		return reminderView{}, doc, false
	}
	return s.reminderView(id, doc), doc, true
}

// document is reminder id's document, addresses masked.
func (s *Server) document(ctx context.Context, id string) (schedule.Document, error) {
	v, err := s.cfg.Reminders.Show(ctx, id)
	if err != nil {
		return schedule.Document{}, err
	}
	return s.cfg.Reminders.Document(ctx, v, false)
}

func (s *Server) reminderView(id string, doc schedule.Document) reminderView {
	v := reminderView{ID: id, Doc: doc, MaxReason: s.maxReason()}
	if doc.Reminder != nil {
		v.AccountURL = accountURL(doc.Reminder.AccountRef)
		v.DueAt, v.ExpiresAt = schedule.FormatTime(doc.Reminder.DueAt), schedule.FormatTime(doc.Reminder.ExpiresAt)
		for k, val := range doc.Reminder.Metadata {
			v.Metadata = append(v.Metadata, label{k, val})
		}
		slices.SortFunc(v.Metadata, func(a, b label) int { return strings.Compare(a.Name, b.Name) })
	}
	if s.cfg.AllowActions {
		base := reminderURL(id)
		v.CancelURL, v.RescheduleURL, v.ReviveURL = base+"/cancel", base+"/reschedule", base+"/revive"
	}
	for _, d := range doc.Deliveries {
		dv := deliveryView{DeliveryDocument: d, Anchor: deliveryAnchor(d.Channel, d.Provider), RevealURL: reminderURL(id) + "/reveal", State: d.Told(),
			Failed: d.Status == schedule.StatusDead || (d.Feedback != nil && d.Feedback.Failed)}
		switch {
		case d.HandedOff == nil:
		case *d.HandedOff:
			dv.HandedOffText = "yes, to the work queue"
		default:
			dv.HandedOffText = "not yet: from " + d.PublishAt
		}
		v.Deliveries = append(v.Deliveries, dv)
	}
	for _, e := range doc.History {
		te := timelineEntry{Event: e}
		switch {
		case e.Reveal:
			te.Class = "reveal"
		case e.Feedback:
			te.Class = "feedback"
		case e.Class != "" || e.Status == schedule.StatusDead || e.Status == schedule.StatusExpired:
			te.Class = "failed"
		}
		if k, err := message.ParseDeliveryKey(e.Delivery); err == nil {
			te.DeliveryURL = "#" + deliveryAnchor(k.Channel, k.Provider)
		}
		v.Timeline = append(v.Timeline, te)
	}
	return v
}

// reveal shows one delivery's address whole, once a reason is given: the
// delivery's history records who (the operator), when and why, and the
// answer is the reminder's page with that address unmasked (never a
// redirect: the address stays out of every URL). A reveal changes no
// delivery, so read-only consoles allow it. Its JSON twin is the
// reminder's document with that one address whole.
func (s *Server) reveal(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	raw := r.PostFormValue("delivery")
	k, err := message.ParseDeliveryKey(raw)
	if err != nil || k.ReminderID != id {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("the reveal names delivery %q, not one of reminder %q (reminderId:channel:provider): "+
			"reveal from the reminder's page", raw, id))
		return
	}
	reason := strings.Join(strings.Fields(r.PostFormValue("reason")), " ")
	if n := utf8.RuneCountInString(reason); n < minReason || len(reason) > s.maxReason() {
		v, _, ok := s.readReminder(w, r, id)
		if !ok {
			return
		}
		why := fmt.Sprintf("Give a reason of %d to %d characters (this one has %d), such as the ticket you are answering: "+
			"the delivery's history records it whole, with your name.", minReason, s.maxReason(), n)
		for i := range v.Deliveries {
			if v.Deliveries[i].Key == k.String() {
				v.Deliveries[i].RevealError, v.Deliveries[i].Reason = why, reason
			}
		}
		s.render(w, r, http.StatusUnprocessableEntity, "reminder", "Reminder "+id, v, problem{Status: http.StatusUnprocessableEntity, Error: why})
		return
	}
	d, err := s.cfg.Ledger.RecordReveal(r.Context(), k, ledger.Reveal{By: s.cfg.Operator, Reason: reason})
	switch {
	case errors.Is(err, ledger.ErrInFlight):
		s.fail(w, r, http.StatusConflict, fmt.Errorf("delivery %s is being sent right now, and its history is being written: reveal again in a few seconds", k))
		return
	case errors.Is(err, ledger.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no delivery %s: it was purged, or never existed; open the reminder's page again", k))
		return
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	s.cfg.Logger.Info("console: address revealed", "delivery", k.String(), "by", s.cfg.Operator, "at", s.now(), "reason", reason)
	v, doc, ok := s.readReminder(w, r, id)
	if !ok {
		return
	}
	v.Revealed = k.String()
	for i := range v.Deliveries {
		if v.Deliveries[i].Key == k.String() {
			v.Deliveries[i].Address, v.Deliveries[i].Revealed = d.Address, true
		}
	}
	for i := range doc.Deliveries {
		if doc.Deliveries[i].Key == k.String() {
			doc.Deliveries[i].Address = d.Address
		}
	}
	s.render(w, r, http.StatusOK, "reminder", "Reminder "+id, v, doc)
}
