package intake

import (
	"errors"
	"net/http"
	"strings"

	"github.com/nudgehq/nudge/pkg/schedule"
)

func (h *Handler) reschedule(w http.ResponseWriter, r *http.Request) {
	body, p := readBody(w, r, MaxTimesBytes)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	id, ok := h.pathID(w, r)
	if !ok {
		return
	}
	to, err := schedule.ParseTimes(body)
	if err != nil {
		h.fail(w, r, withID(err, id))
		return
	}
	res, err := h.cfg.Store.RescheduleAs(r.Context(), h.caller(r), id, to, "through the API by "+Caller(r.Context()))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := Changed{ID: id, DueAt: schedule.FormatTime(res.DueAt), ExpiresAt: schedule.FormatTime(res.ExpiresAt), Local: res.Local}
	var refused []string
	conflict, stands := false, false
	for _, m := range res.Deliveries {
		d := DeliveryResult{Key: m.Key.String(), Channel: m.Key.Channel, Provider: m.Key.Provider, Status: m.Status}
		switch {
		case m.Moved:
			d.Outcome, stands = "moved", true
		case m.Unchanged:
			d.Outcome, stands = "unchanged", true
		default:
			d.Outcome, d.At = refusedOutcome(m.Refused), schedule.FormatOpt(m.At)
			refused = append(refused, d.Key+" ("+d.Outcome+")")
			conflict = conflict || d.Outcome != "finished"
		}
		out.Deliveries = append(out.Deliveries, d)
	}
	if !conflict && stands {
		writeJSON(w, http.StatusOK, out) // ended deliveries (cancelled, dead, expired) stay as they are, as a cancel leaves them
		return
	}
	detail := "nothing moved: every delivery was sent, ended or is being sent: " + strings.Join(refused, ", ")
	if stands {
		detail = "the reminder's other deliveries stand at " + out.DueAt + "; not moved: " + strings.Join(refused, ", ")
	}
	writeProblem(w, r, &Problem{Type: ProblemRefused, Status: http.StatusConflict, Title: "Some deliveries were not moved", Detail: detail,
		Fix:        "a sent or ended delivery cannot move; a dead one is reviewed in the DLQ first (redrive or cancel); for one in flight, send the reschedule again after Retry-After",
		Deliveries: out.Deliveries, retryAfter: retryAfter(out.Deliveries, h.cfg.Store.Now())})
}

func withID(err error, id string) error {
	var ve *schedule.ValidationError
	if errors.As(err, &ve) && ve.ID == "" {
		ve.ID = id
	}
	return err
}
