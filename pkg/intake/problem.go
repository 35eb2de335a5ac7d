package intake

import (
	"encoding/json"
	"net/http"
	"strconv"
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
