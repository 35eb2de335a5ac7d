package intake

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/nudgehq/nudge/internal/metrics"
)

// The metrics the handler counts, one per status class of its answers
// (Answered2xx, Answered3xx, Answered4xx, Answered5xx), each by Function
// alone and by Function and Route: the route's pattern ("PUT
// /v1/reminders/{id}"), or RouteUnrouted for a request no route takes;
// never the request's path, which holds ids. A 500 (a panic, an unexpected
// error) and a 503 (DynamoDB throttling, the deadline, no shard count yet)
// are answers the function returns, so Lambda's Errors metric never counts
// them: Answered5xx does, and the stack's intake-5xx alarm watches it.
const (
	MetricAnswered5xx = "Answered5xx"
	// RouteUnrouted is the Route of a request no route takes (a 404 or 405).
	RouteUnrouted = "unrouted"
)

// AnswerCounter counts the handler's answers and writes what it counted:
// *metrics.Recorder, whose EMF line Lambda sends to CloudWatch.
type AnswerCounter interface {
	AddBy(name string, n float64, by map[string]string)
	Flush(w io.Writer, now time.Time) error
}

var _ AnswerCounter = (*metrics.Recorder)(nil)

// answeredMetric is the metric counting an answer of status.
func answeredMetric(status int) string {
	if status == 0 {
		status = http.StatusOK // nothing written: net/http answers 200
	}
	return "Answered" + strconv.Itoa(status/100) + "xx"
}

// count counts one answer of route and writes it out (one EMF line per
// request; in Lambda, one request is one invocation).
func (h *Handler) count(r *http.Request, route string, status int) {
	if h.cfg.Metrics == nil {
		return
	}
	h.cfg.Metrics.AddBy(answeredMetric(status), 1, map[string]string{"Route": route})
	if err := h.cfg.Metrics.Flush(h.cfg.MetricsOut, h.cfg.Store.Now()); err != nil {
		h.cfg.Logger.Warn("intake: cannot write metrics", "error", err.Error(), "requestId", requestID(r))
	}
}
