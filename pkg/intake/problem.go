package intake

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/nudgehq/nudge/pkg/failure/awsfailure"

	"github.com/aws/smithy-go"

	"github.com/nudgehq/nudge/pkg/schedule"
)

// Problem is an RFC 9457 problem details object, with Nudge's extension
// members: the field at fault and the fix, and for a cancel or reschedule
// refused in part, what happened to each delivery.
type Problem struct {
	// Type names the kind of problem: a urn:nudge:problem: URN listed in
	// docs/api.md.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Instance is the request's id, as the function's log line has it.
	Instance string `json:"instance,omitempty"`
	// Field is the JSON path of the field at fault ("deliveries[1].channel").
	Field string `json:"field,omitempty"`
	// Fix says what to do.
	Fix string `json:"fix,omitempty"`
	// Deliveries, for a cancel or reschedule, says what happened to each.
	Deliveries []DeliveryResult `json:"deliveries,omitempty"`

	retryAfter int // seconds; a Retry-After header when above 0
}

// Problem types.
const (
	ProblemInvalid     = "urn:nudge:problem:invalid-request"
	ProblemNotFound    = "urn:nudge:problem:not-found"
	ProblemForbidden   = "urn:nudge:problem:forbidden"
	ProblemConflict    = "urn:nudge:problem:conflict"
	ProblemRefused     = "urn:nudge:problem:deliveries-refused"
	ProblemTooLarge    = "urn:nudge:problem:too-large"
	ProblemMediaType   = "urn:nudge:problem:unsupported-media-type"
	ProblemMethod      = "urn:nudge:problem:method-not-allowed"
	ProblemUnavailable = "urn:nudge:problem:unavailable"
	ProblemInternal    = "urn:nudge:problem:internal"
)

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	p.Instance = requestID(r)
	if p.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	writeJSONAs(w, p.Status, "application/problem+json", p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	writeJSONAs(w, status, "application/json", v)
}

func writeJSONAs(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, contentType = http.StatusInternalServerError, "application/problem+json"
		b = []byte(`{"type":"` + ProblemInternal + `","title":"Internal Server Error","status":500}`)
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// fail answers err as a problem.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeProblem(w, r, h.problemFor(r, err))
}

func (h *Handler) problemFor(r *http.Request, err error) *Problem {
	var ve *schedule.ValidationError
	var ce *schedule.ConflictError
	var api smithy.APIError
	switch {
	case errors.As(err, &ve):
		return &Problem{Type: ProblemInvalid, Status: http.StatusBadRequest, Title: "Invalid reminder", Detail: clip(ve.Error()), Field: clip(ve.Field), Fix: ve.Fix}
	case errors.Is(err, schedule.ErrUnattributed):
		return &Problem{Type: ProblemForbidden, Status: http.StatusForbidden, Title: "The reminder has no recorded creator",
			Detail: "the reminder was created before the intake recorded creators (or by the operator CLI), so only a full-access principal may act on it through the API; it is not absent, and stays scheduled",
			Fix:    "act on it as one of the stage's full-access principals (intakeFullAccess), or ask an operator (nudge cancel ID, nudge reschedule ID)"}
	case errors.Is(err, schedule.ErrTaken):
		// Another caller's reminder has the id: the same answer whatever
		// it holds, naming no field and quoting nothing of it.
		return &Problem{Type: ProblemConflict, Status: http.StatusConflict, Title: "The id is taken",
			Detail: "the id is taken by a reminder this caller cannot see",
			Fix:    "give the reminder another id: ids are the caller's idempotency keys, and this one is another's"}
	case errors.As(err, &ce) && ce.Holder != "":
		// A reminder under a series' id, or a series under a reminder's:
		// neither a reschedule nor a cancel frees the id.
		return &Problem{Type: ProblemConflict, Status: http.StatusConflict, Title: "The id belongs to a " + ce.Holder, Detail: ce.Error(), Field: ce.Field,
			Fix: ce.Fix()}
	case errors.As(err, &ce):
		return &Problem{Type: ProblemConflict, Status: http.StatusConflict, Title: "A different reminder has this id", Detail: ce.Error(), Field: ce.Field,
			Fix: "give the changed reminder a new id, reschedule it (POST /v1/reminders/" + ce.ID + "/reschedule), or cancel the old one first"}
	case errors.Is(err, schedule.ErrIncomplete):
		return &Problem{Type: ProblemConflict, Status: http.StatusConflict, Title: "The reminder is not fully created", Detail: clip(err.Error()),
			Fix: "send its PUT again with the same body to finish it, then reschedule"}
	case errors.Is(err, schedule.ErrChanged):
		return &Problem{Type: ProblemUnavailable, Status: http.StatusServiceUnavailable, Detail: "the reminder kept changing while it was moved (a send, a cancel or another reschedule)",
			Fix: "send the request again: every call is idempotent", retryAfter: 1}
	case errors.Is(err, schedule.ErrNoReminder):
		return &Problem{Type: ProblemNotFound, Status: http.StatusNotFound, Title: "No such reminder", Detail: "no reminder has id " + strconv.Quote(clip(r.PathValue("id"))),
			Fix: "check the id: reminder ids are case-sensitive"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &Problem{Type: ProblemUnavailable, Status: http.StatusServiceUnavailable, Detail: "the request ran out of time",
			Fix: "send it again: every call is idempotent", retryAfter: 1}
	case errors.Is(err, schedule.ErrNoShardCount):
		// A fresh stage, before the enqueue's first run (a minute after the
		// first deploy) recorded the shard count the intake places
		// deliveries by. What was written stays; a repeat completes it.
		return &Problem{Type: ProblemUnavailable, Status: http.StatusServiceUnavailable,
			Detail: "the stage is not ready: the table has no shard count yet, which the enqueue records on its first run, within a minute of the stack's first deploy",
			Fix:    "send the request again after Retry-After (every call is idempotent); if this lasts, the enqueue is not running: see docs/operations.md#intake-5xx", retryAfter: 60}
	case errors.As(err, &api) && awsfailure.IsThrottleCode(api.ErrorCode()):
		return &Problem{Type: ProblemUnavailable, Status: http.StatusServiceUnavailable, Detail: "the table is throttling writes (" + api.ErrorCode() + ")",
			Fix: "send it again after Retry-After, with backoff: every call is idempotent", retryAfter: 2}
	}
	h.cfg.Logger.Error("intake: unexpected error", "error", err.Error(), "method", r.Method, "path", r.URL.Path, "requestId", requestID(r))
	return &Problem{Type: ProblemInternal, Status: http.StatusInternalServerError,
		Detail: "the intake failed unexpectedly; what was written stays written. Send the request again (every call is idempotent); if it fails again, report the instance id"}
}
