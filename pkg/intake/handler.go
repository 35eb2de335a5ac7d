package intake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/nudgehq/nudge/pkg/schedule"
)

// Store is the intake the API serves: *schedule.Store, through its
// caller's door (each request as its caller: docs/api.md#who-sees-what).
type Store interface {
	Validator() schedule.Validator
	CreateAs(ctx context.Context, c schedule.Caller, r schedule.Reminder) (schedule.Outcome, error)
	ShowAs(ctx context.Context, c schedule.Caller, id string) (schedule.View, error)
	Document(ctx context.Context, v schedule.View, reveal bool) (schedule.Document, error)
	CancelAs(ctx context.Context, c schedule.Caller, id, note string) ([]schedule.CancelResult, error)
	RescheduleAs(ctx context.Context, c schedule.Caller, id string, to schedule.Times, note string) (schedule.Rescheduled, error)
	ListAs(ctx context.Context, c schedule.Caller, account string, limit int, next string) (schedule.ListPage, error)
	// Now is the time on the store's clock, which its leases and times
	// count from.
	Now() time.Time
}

var _ Store = (*schedule.Store)(nil)

// Limits of the API.
const (
	// MaxBatch is the most reminders one batch create takes.
	MaxBatch = 100
	// MaxBatchBytes is the largest batch body: MaxBatch reminders of the
	// largest size (819,200 bytes), with room for indentation.
	MaxBatchBytes = 1 << 20
	// MaxTimesBytes is the largest reschedule body.
	MaxTimesBytes = 1 << 10
	// DefaultPage and MaxPage are a listing's default and largest page.
	DefaultPage = 25
	MaxPage     = schedule.MaxListPage
)

// Config configures a Handler.
type Config struct {
	// Store is the intake. Required.
	Store Store
	// Logger receives one line per request (never a body: bodies hold
	// addresses). Default: discard.
	Logger *slog.Logger
	// BatchConcurrency is how many reminders of a batch are written at
	// once. Default 8.
	BatchConcurrency int
	// Margin is how long before the request's deadline (the function's)
	// the handler stops starting work and answers: what is not done is
	// answered 503, to be sent again (every call is idempotent). Default 1s.
	Margin time.Duration
	// Metrics, if set, counts every answer by status class and route
	// (MetricAnswered5xx and its siblings), written to MetricsOut after each
	// request: one EMF line. Default: nothing counted.
	Metrics AnswerCounter
	// MetricsOut receives Metrics' lines. Default os.Stdout, where Lambda
	// sends them to CloudWatch.
	MetricsOut io.Writer
	// FullAccess are the IAM role and user ARNs that act on every
	// reminder, whoever created it (NUDGE_FULL_ACCESS_PRINCIPALS); every
	// other caller acts on its own alone. Default none.
	FullAccess []string
}

// Handler serves the API. It is safe for concurrent use.
type Handler struct {
	cfg  Config
	mux  *http.ServeMux
	full fullAccess
}

// Route is one route the handler serves: a method and a path pattern in
// OpenAPI's form ("/v1/reminders/{id}").
type Route struct{ Method, Path string }

// New validates cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("intake: Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.BatchConcurrency == 0 {
		cfg.BatchConcurrency = 8
	}
	if cfg.BatchConcurrency < 1 || cfg.BatchConcurrency > MaxBatch {
		return nil, fmt.Errorf("intake: BatchConcurrency %d; use 1 to %d", cfg.BatchConcurrency, MaxBatch)
	}
	if cfg.Margin == 0 {
		cfg.Margin = time.Second
	}
	if cfg.MetricsOut == nil {
		cfg.MetricsOut = os.Stdout
	}
	full, err := newFullAccess(cfg.FullAccess)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), full: full}
	for _, rt := range h.routes() {
		h.mux.HandleFunc(rt.Method+" "+rt.Path, rt.serve)
	}
	return h, nil
}

type route struct {
	Method, Path string
	serve        http.HandlerFunc
}

func (h *Handler) routes() []route {
	return []route{
		{http.MethodPut, "/v1/reminders/{id}", h.put},
		{http.MethodGet, "/v1/reminders/{id}", h.get},
		{http.MethodDelete, "/v1/reminders/{id}", h.cancel},
		{http.MethodPost, "/v1/reminders/{id}/reschedule", h.reschedule},
		{http.MethodGet, "/v1/reminders", h.list},
		{http.MethodPost, "/v1/reminders", h.batch},
	}
}

// Routes lists the routes the handler serves.
func (h *Handler) Routes() []Route {
	var out []Route
	for _, rt := range h.routes() {
		out = append(out, Route{Method: rt.Method, Path: rt.Path})
	}
	return out
}

// ServeHTTP answers one request: a route's, or a problem (404 for a path
// the API does not have, 405 for a method a path does not take). Every
// answer is counted (Config.Metrics), by its status class and its route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now() // wall clock: the request's duration, as measured, for its log line
	rec := &statusWriter{ResponseWriter: w}
	route := RouteUnrouted
	defer func() {
		if p := recover(); p != nil {
			h.cfg.Logger.Error("intake: panic", "panic", fmt.Sprint(p), "method", r.Method, "path", r.URL.Path, "requestId", requestID(r))
			if rec.status == 0 {
				writeProblem(rec, r, &Problem{Type: ProblemInternal, Status: http.StatusInternalServerError, Detail: "the intake failed unexpectedly; nothing is known to have changed. Send the request again; if it fails again, report the instance id"})
			}
		}
		// wall clock: how long the request took, as measured
		h.cfg.Logger.Info("request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "ms", time.Since(start).Milliseconds(),
			"caller", Caller(r.Context()), "requestId", requestID(r))
		h.count(r, route, rec.status)
	}()
	// A path that is not in its clean form ("//", "/./", "/../") is no
	// route: the mux would redirect (a 307 with an HTML body), and a
	// caller would find the reminder at another path than it asked for.
	_, pattern := h.mux.Handler(r)
	if pattern == "" || path.Clean(r.URL.Path) != r.URL.Path {
		h.notRouted(rec, r)
		return
	}
	route = pattern
	// The work stops half the margin before the function's deadline, so
	// that the answer (a 503 for what was cut off) is written before
	// Lambda ends the invocation, which the caller would see as a bare 502.
	// wall clock: the deadline is the invocation's, on Lambda's clock.
	if dl, ok := r.Context().Deadline(); ok {
		ctx, cancel := context.WithDeadline(r.Context(), dl.Add(-h.cfg.Margin/2)) // wall clock: as above
		defer cancel()
		r = r.WithContext(ctx)
	}
	h.mux.ServeHTTP(rec, r)
}

// notRouted answers a request no route takes, as a problem: the mux would
// answer in plain text.
func (h *Handler) notRouted(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete} {
		if path.Clean(r.URL.Path) != r.URL.Path {
			break
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeProblem(w, r, &Problem{Type: ProblemNotFound, Status: http.StatusNotFound, Detail: fmt.Sprintf("the API has no %s", clip(r.URL.Path)),
			Fix: "see docs/api.md: the routes are under /v1/reminders"})
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeProblem(w, r, &Problem{Type: ProblemMethod, Status: http.StatusMethodNotAllowed, Detail: fmt.Sprintf("%s does not take %s", clip(r.URL.Path), r.Method),
		Fix: "use " + strings.Join(allow, " or ")})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// clip bounds what a request put into an answer (an id, a path).
func clip(s string) string {
	if len(s) > 300 {
		return strings.ToValidUTF8(s[:300], "") + "…"
	}
	return s
}

// pathID returns the reminder id of the request's path, or writes the
// problem of an id that cannot be one and returns false.
func (h *Handler) pathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if err := validID(h.cfg.Store.Validator(), id); err != nil {
		h.fail(w, r, err)
		return "", false
	}
	return id, true
}

func validID(v schedule.Validator, id string) error {
	_, err := v.Validate(schedule.Input{ID: id})
	var ve *schedule.ValidationError
	if errors.As(err, &ve) && ve.Field == "id" {
		return err
	}
	return nil
}
