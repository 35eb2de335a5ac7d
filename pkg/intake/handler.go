package intake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go"

	"github.com/nudgehq/nudge/pkg/ledger"
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
	MaxPage     = ledger.MaxAccountPage
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

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	if p := noBody(r); p != nil {
		writeProblem(w, r, p)
		return
	}
	if err := validID(h.cfg.Store.Validator(), r.PathValue("id")); err != nil {
		h.fail(w, r, err)
		return
	}
	v, err := h.cfg.Store.ShowAs(r.Context(), h.caller(r), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	doc, err := h.cfg.Store.Document(r.Context(), v, false)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

// DeliveryResult is what a cancel or reschedule did to one delivery.
type DeliveryResult struct {
	Key      string `json:"key"`
	Channel  string `json:"channel"`
	Provider string `json:"provider"`
	// Outcome is cancelled, moved or unchanged when the call did what was
	// asked (or it was already so); finished for a delivery that ended
	// (cancelled, expired) and stays so; sent, in-flight or (for a
	// reschedule) dead when it was refused; unended for a delivery that is
	// cancelled (or ended) while an attempt's outcome is unknown: that
	// attempt may have been sent.
	Outcome string        `json:"outcome"`
	Status  ledger.Status `json:"status"`
	// At is, for a refused delivery, when it was sent or last changed,
	// and for one in flight, when its attempt's lease ends.
	At string `json:"at,omitempty"`
}

// Changed is the answer to a cancel or reschedule that every delivery
// took.
type Changed struct {
	ID string `json:"id"`
	// DueAt and ExpiresAt are a reschedule's new times.
	DueAt      string           `json:"dueAt,omitempty"`
	ExpiresAt  string           `json:"expiresAt,omitempty"`
	Deliveries []DeliveryResult `json:"deliveries"`
}

func refusedOutcome(err error) string {
	switch {
	case errors.Is(err, ledger.ErrAlreadySent):
		return "sent"
	case errors.Is(err, ledger.ErrLeased):
		return "in-flight"
	case errors.Is(err, schedule.ErrDeadLettered):
		return "dead"
	}
	return "finished"
}

// retryAfter is the seconds from now until the latest lease among results
// ends.
func retryAfter(results []DeliveryResult, now time.Time) int {
	secs := 0
	for _, d := range results {
		if d.Outcome != "in-flight" {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, d.At); err == nil {
			secs = max(secs, int(at.Sub(now).Seconds())+1)
		}
	}
	if secs <= 0 {
		return 0
	}
	return min(secs, 900)
}

func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	if p := noBody(r); p != nil {
		writeProblem(w, r, p)
		return
	}
	id := r.PathValue("id")
	if err := validID(h.cfg.Store.Validator(), id); err != nil {
		h.fail(w, r, err)
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
		case c.Cancelled || c.Status == ledger.StatusCancelled:
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

func (h *Handler) reschedule(w http.ResponseWriter, r *http.Request) {
	body, p := readBody(w, r, MaxTimesBytes)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	id := r.PathValue("id")
	if err := validID(h.cfg.Store.Validator(), id); err != nil {
		h.fail(w, r, err)
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
	out := Changed{ID: id, DueAt: ledger.Format(res.DueAt), ExpiresAt: ledger.Format(res.ExpiresAt)}
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

// Page is the answer to a listing.
type Page struct {
	Reminders []ListedReminder `json:"reminders"`
	// Next is the token of the next page (?next=…); absent on the last.
	Next string `json:"next,omitempty"`
}

// ListedReminder is one reminder of a listing, without its metadata.
type ListedReminder struct {
	ID         string           `json:"id"`
	AccountRef string           `json:"accountRef"`
	DueAt      string           `json:"dueAt"`
	ExpiresAt  string           `json:"expiresAt"`
	CreatedAt  string           `json:"createdAt,omitempty"`
	Deliveries []ListedDelivery `json:"deliveries"`
}

// ListedDelivery is one delivery of a listed reminder, as it is now.
type ListedDelivery struct {
	Channel        string `json:"channel"`
	Provider       string `json:"provider"`
	RecipientRef   string `json:"recipientRef"`
	TemplateRef    string `json:"templateRef"`
	Status         string `json:"status"`
	Attempts       int    `json:"attempts"`
	SentAt         string `json:"sentAt,omitempty"`
	LastErrorClass string `json:"lastErrorClass,omitempty"`
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	if p := noBody(r); p != nil {
		writeProblem(w, r, p)
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		h.fail(w, r, &schedule.ValidationError{Field: "query", Problem: "is not a well-formed query string", Fix: "percent-encode the values: account=…&limit=…&next=…"})
		return
	}
	for k, vs := range q {
		switch {
		case k != "account" && k != "limit" && k != "next":
			h.fail(w, r, &schedule.ValidationError{Field: k, Problem: "is not a listing parameter", Fix: "use account, limit and next"})
			return
		case len(vs) > 1:
			h.fail(w, r, &schedule.ValidationError{Field: k, Problem: "is given more than once", Fix: "give it once"})
			return
		}
	}
	limit := DefaultPage
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPage {
			h.fail(w, r, &schedule.ValidationError{Field: "limit", Problem: fmt.Sprintf("%q is not a number from 1 to %d", clip(s), MaxPage), Fix: fmt.Sprintf("ask for 1 to %d reminders a page (default %d)", MaxPage, DefaultPage)})
			return
		}
		limit = n
	}
	if !q.Has("account") {
		h.fail(w, r, &schedule.ValidationError{Field: "account", Problem: "is missing", Fix: "give the account's reference: GET /v1/reminders?account=acct-1"})
		return
	}
	page, err := h.cfg.Store.ListAs(r.Context(), h.caller(r), q.Get("account"), limit, q.Get("next"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := Page{Reminders: []ListedReminder{}, Next: page.Next}
	for _, l := range page.Reminders {
		lr := ListedReminder{ID: l.ID, AccountRef: l.AccountRef, DueAt: ledger.Format(l.DueAt), ExpiresAt: ledger.Format(l.ExpiresAt),
			CreatedAt: schedule.FormatOpt(l.CreatedAt), Deliveries: []ListedDelivery{}}
		for _, d := range l.Deliveries {
			ld := ListedDelivery{Channel: d.Channel, Provider: d.Provider, RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef, Status: "unknown"}
			if cur, ok := l.Now[l.Key(d)]; ok {
				ld.Status, ld.Attempts, ld.SentAt, ld.LastErrorClass = string(cur.Status), cur.Attempts, schedule.FormatOpt(cur.SentAt), string(cur.LastErrorClass)
			}
			lr.Deliveries = append(lr.Deliveries, ld)
		}
		out.Reminders = append(out.Reminders, lr)
	}
	writeJSON(w, http.StatusOK, out)
}

// readBody reads a JSON body of at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *Problem) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
			return nil, &Problem{Type: ProblemMediaType, Status: http.StatusUnsupportedMediaType, Detail: fmt.Sprintf("the body is %q", clip(ct)),
				Fix: "send JSON with Content-Type: application/json"}
		}
	}
	if r.ContentLength > limit {
		return nil, tooLarge(r.ContentLength, limit)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge(-1, limit)
	case err != nil:
		return nil, &Problem{Type: ProblemInvalid, Status: http.StatusBadRequest, Detail: "the body could not be read: " + err.Error(), Fix: "send the request again"}
	case len(b) == 0:
		return nil, &Problem{Type: ProblemInvalid, Status: http.StatusBadRequest, Detail: "the body is empty", Fix: "send a JSON object (docs/api.md)"}
	}
	return b, nil
}

func tooLarge(size, limit int64) *Problem {
	detail := fmt.Sprintf("the body is over the limit of %d bytes", limit)
	if size > 0 {
		detail = fmt.Sprintf("the body is %d bytes; the limit is %d", size, limit)
	}
	return &Problem{Type: ProblemTooLarge, Status: http.StatusRequestEntityTooLarge, Detail: detail,
		Fix: "keep metadata short and references brief; send at most 100 reminders a batch"}
}

// noBody refuses a body on a request that takes none.
func noBody(r *http.Request) *Problem {
	if r.ContentLength > 0 {
		return &Problem{Type: ProblemInvalid, Status: http.StatusBadRequest, Detail: r.Method + " takes no body", Fix: "send it without one"}
	}
	return nil
}

func validID(v schedule.Validator, id string) error {
	_, err := v.Validate(schedule.Input{ID: id})
	var ve *schedule.ValidationError
	if errors.As(err, &ve) && ve.Field == "id" {
		return err
	}
	return nil
}

func withID(err error, id string) error {
	var ve *schedule.ValidationError
	if errors.As(err, &ve) && ve.ID == "" {
		ve.ID = id
	}
	return err
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
	case errors.As(err, &ce):
		return &Problem{Type: ProblemConflict, Status: http.StatusConflict, Title: "A different reminder has this id", Detail: ce.Error(), Field: ce.Field,
			Fix: "give the changed reminder a new id, reschedule it (POST /v1/reminders/" + ce.ID + "/reschedule), or cancel the old one first"}
	case errors.Is(err, schedule.ErrIncomplete):
		return &Problem{Type: ProblemConflict, Status: http.StatusConflict, Title: "The reminder is not fully created", Detail: clip(err.Error()),
			Fix: "send its PUT again with the same body to finish it, then reschedule"}
	case errors.Is(err, ledger.ErrChanged):
		return &Problem{Type: ProblemUnavailable, Status: http.StatusServiceUnavailable, Detail: "the reminder kept changing while it was moved (a send, a cancel or another reschedule)",
			Fix: "send the request again: every call is idempotent", retryAfter: 1}
	case errors.Is(err, schedule.ErrNoReminder):
		return &Problem{Type: ProblemNotFound, Status: http.StatusNotFound, Title: "No such reminder", Detail: "no reminder has id " + strconv.Quote(clip(r.PathValue("id"))),
			Fix: "check the id: reminder ids are case-sensitive"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &Problem{Type: ProblemUnavailable, Status: http.StatusServiceUnavailable, Detail: "the request ran out of time",
			Fix: "send it again: every call is idempotent", retryAfter: 1}
	case errors.Is(err, ledger.ErrNoShardCount):
		// A fresh stage, before the enqueue's first run (a minute after the
		// first deploy) recorded the shard count the intake places
		// deliveries by. What was written stays; a repeat completes it.
		return &Problem{Type: ProblemUnavailable, Status: http.StatusServiceUnavailable,
			Detail: "the stage is not ready: the table has no shard count yet, which the enqueue records on its first run, within a minute of the stack's first deploy",
			Fix:    "send the request again after Retry-After (every call is idempotent); if this lasts, the enqueue is not running: see docs/operations.md#intake-5xx", retryAfter: 60}
	case errors.As(err, &api) && throttled(api.ErrorCode()):
		return &Problem{Type: ProblemUnavailable, Status: http.StatusServiceUnavailable, Detail: "the table is throttling writes (" + api.ErrorCode() + ")",
			Fix: "send it again after Retry-After, with backoff: every call is idempotent", retryAfter: 2}
	}
	h.cfg.Logger.Error("intake: unexpected error", "error", err.Error(), "method", r.Method, "path", r.URL.Path, "requestId", requestID(r))
	return &Problem{Type: ProblemInternal, Status: http.StatusInternalServerError,
		Detail: "the intake failed unexpectedly; what was written stays written. Send the request again (every call is idempotent); if it fails again, report the instance id"}
}

func throttled(code string) bool {
	switch code {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException", "LimitExceededException":
		return true
	}
	return false
}

// Batch is the body of a batch create.
type Batch struct {
	Reminders []jsonRaw `json:"reminders"`
}

// BatchResult is the answer to a batch create: one result per reminder,
// in order.
type BatchResult struct {
	Results []ItemResult `json:"results"`
}

// ItemResult is one reminder's result in a batch: the status its own PUT
// would have answered, its outcome, or its problem.
type ItemResult struct {
	ID      string           `json:"id,omitempty"`
	Status  int              `json:"status"`
	Outcome schedule.Outcome `json:"outcome,omitempty"`
	Problem *Problem         `json:"problem,omitempty"`
}

func (h *Handler) batch(w http.ResponseWriter, r *http.Request) {
	body, p := readBody(w, r, MaxBatchBytes)
	if p != nil {
		writeProblem(w, r, p)
		return
	}
	b, err := decodeBatch(body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx := r.Context()
	stop := time.Time{}
	// wall clock: the deadline is the invocation's, on Lambda's clock
	if dl, ok := ctx.Deadline(); ok {
		stop = dl.Add(-h.cfg.Margin / 2) // ServeHTTP took the other half
	}
	results := make([]ItemResult, len(b.Reminders))
	seen := map[string]int{}
	var todo []int
	rems := make([]schedule.Reminder, len(b.Reminders))
	for i, raw := range b.Reminders {
		if len(raw) > schedule.MaxInputBytes {
			results[i] = ItemResult{Status: http.StatusRequestEntityTooLarge, Problem: tooLarge(int64(len(raw)), schedule.MaxInputBytes)}
			continue
		}
		rem, err := h.cfg.Store.Validator().ParseJSON(raw)
		if err != nil {
			results[i] = h.itemProblem(r, err)
			continue
		}
		if j, dup := seen[rem.ID]; dup {
			results[i] = h.itemProblem(r, &schedule.ValidationError{ID: rem.ID, Field: "id", Problem: fmt.Sprintf("repeats reminders[%d]", j), Fix: "give each reminder of a batch once"})
			continue
		}
		seen[rem.ID] = i
		rems[i], results[i].ID = rem, rem.ID
		todo = append(todo, i)
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(h.cfg.BatchConcurrency, max(len(todo), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				// wall clock: stop is the invocation's deadline, on Lambda's clock
				if !stop.IsZero() && time.Now().After(stop) {
					results[i] = h.itemProblem(r, context.DeadlineExceeded)
					continue
				}
				h.createOne(ctx, r, rems[i], &results[i])
			}
		}()
	}
	for _, i := range todo {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for i := range results {
		if results[i].Problem != nil {
			results[i].Problem.Instance = requestID(r)
			if results[i].ID == "" {
				results[i].ID = rems[i].ID
			}
		}
	}
	writeJSON(w, http.StatusOK, BatchResult{Results: results})
}

// createOne creates one reminder of a batch into res; a panic is that
// reminder's 500, not the whole batch's.
func (h *Handler) createOne(ctx context.Context, r *http.Request, rem schedule.Reminder, res *ItemResult) {
	defer func() {
		if p := recover(); p != nil {
			h.cfg.Logger.Error("intake: panic", "panic", fmt.Sprint(p), "reminder", rem.ID, "requestId", requestID(r))
			*res = h.itemProblem(r, fmt.Errorf("panic: %v", p))
			res.ID = rem.ID
		}
	}()
	outcome, err := h.cfg.Store.CreateAs(ctx, h.caller(r), rem)
	if err != nil {
		*res = h.itemProblem(r, err)
		res.ID = rem.ID
		return
	}
	res.Outcome, res.Status = outcome, http.StatusOK
	if outcome == schedule.Created {
		res.Status = http.StatusCreated
	}
}

func (h *Handler) itemProblem(r *http.Request, err error) ItemResult {
	p := h.problemFor(r, err)
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	id := ""
	var ve *schedule.ValidationError
	if errors.As(err, &ve) {
		id = ve.ID
	}
	return ItemResult{ID: id, Status: p.Status, Problem: p}
}
