package intake

import (
	"net/http"
	"net/url"

	"github.com/nudgehq/nudge/pkg/schedule"
)

// Created is the answer to a create: what it did, and the reminder as
// stored (recipients' addresses are never echoed).
type Created struct {
	ID string `json:"id"`
	// Outcome is "created" (201), or "unchanged" or "completed" (200: the
	// reminder was there; completed when this call wrote deliveries a create
	// cut off, or still running, had not).
	Outcome  schedule.Outcome   `json:"outcome"`
	Reminder *schedule.Reminder `json:"reminder"`
}

func (h *Handler) put(w http.ResponseWriter, r *http.Request) {
	body, p := readBody(w, r, schedule.MaxInputBytes)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	id := r.PathValue("id")
	rem, err := h.cfg.Store.Validator().ParseJSONAs(id, body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	outcome, err := h.cfg.Store.CreateAs(r.Context(), h.caller(r), rem)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if outcome == schedule.Created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/reminders/"+url.PathEscape(rem.ID))
	}
	writeJSON(w, status, Created{ID: rem.ID, Outcome: outcome, Reminder: &rem})
}
