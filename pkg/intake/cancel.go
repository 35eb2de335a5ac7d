package intake

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/nudgehq/nudge/pkg/schedule"
)

func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	if p := noBody(r); p != nil {
		writeProblem(w, r, p)
		return
	}
	id, ok := h.pathID(w, r)
	if !ok {
		return
	}
	results, err := h.cfg.Store.CancelAs(r.Context(), h.caller(r), id, "cancelled through the API by "+Caller(r.Context()))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := Changed{ID: id}
	var sent, inFlight, unended []string
	for _, c := range results {
		d := DeliveryResult{Key: c.Key.String(), Channel: c.Key.Channel, Provider: c.Key.Provider, Status: c.Status, At: schedule.FormatOpt(c.At)}
		switch {
		case c.Unended > 0:
			d.Outcome, d.At = "unended", ""
		case c.Cancelled || c.Status == schedule.StatusCancelled:
			d.Outcome, d.At = "cancelled", ""
		default:
			d.Outcome = refusedOutcome(c.Refused)
		}
		switch d.Outcome {
		case "sent":
			sent = append(sent, d.Key)
		case "in-flight":
			inFlight = append(inFlight, d.Key)
		case "unended":
			unended = append(unended, fmt.Sprintf("%s (%s; attempt %d)", d.Key, c.Status, c.Unended))
		}
		out.Deliveries = append(out.Deliveries, d)
	}
	if len(sent)+len(inFlight)+len(unended) == 0 {
		writeJSON(w, http.StatusOK, out)
		return
	}
	detail := "the reminder's other deliveries are cancelled, except:"
	if len(sent) > 0 {
		detail += " already sent: " + strings.Join(sent, ", ") + "."
	}
	fix := "nothing can unsend a sent delivery"
	if len(unended) > 0 {
		detail += " ended unsent, but an attempt may have been sent (it never recorded its end): " + strings.Join(unended, ", ") + "."
		fix = "nothing more is sent; whether the unended attempt reached the recipient is in the provider's record (an operator checks it: docs/operations.md)"
	}
	if len(inFlight) > 0 {
		detail += " being sent now: " + strings.Join(inFlight, ", ") + "."
		fix = "send the DELETE again after Retry-After: a delivery in flight is then sent, or back in the calendar and cancelled"
	}
	title := "Some deliveries were not cancelled"
	if len(sent)+len(inFlight) == 0 {
		title = "Ended, but a delivery may have been sent"
	}
	writeProblem(w, r, &Problem{Type: ProblemRefused, Status: http.StatusConflict, Title: title, Detail: detail, Fix: fix,
		Deliveries: out.Deliveries, retryAfter: retryAfter(out.Deliveries, h.cfg.Store.Now())})
}
