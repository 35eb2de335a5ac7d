package console

// The pages that change deliveries, each after a confirmation page that
// shows exactly what will change: the DLQ's redrive of a chosen, bounded
// selection (dlq.go), and a reminder's cancel, reschedule and revive
// (actions.go). Every one of them, the confirmation pages included, is
// refused unless the console was started with actions allowed.

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/nudgehq/nudge/internal/ledger"
)

// routesChange registers the dead letters page and the pages that change
// deliveries.
func (s *Server) routesChange(mux *http.ServeMux) {
	if s.cfg.DLQRead == 0 {
		s.cfg.DLQRead = 100
	}
	if s.cfg.Selections == 0 {
		s.cfg.Selections = 4
	}
	d := &deadLetters{s: s, held: &holds{max: s.cfg.Selections}}
	s.dead = d
	mux.HandleFunc("GET /dlq", d.list)
	mux.HandleFunc("POST /dlq/select", s.changing(d.choose))
	mux.HandleFunc("GET /dlq/selections/{id}", s.changing(d.confirm))
	mux.HandleFunc("POST /dlq/redrive", s.changing(d.redrive))
	mux.HandleFunc("POST /dlq/release", s.changing(d.release))

	mux.HandleFunc("GET /reminders/{id}/cancel", s.changing(s.cancelConfirm))
	mux.HandleFunc("POST /reminders/{id}/cancel", s.changing(s.cancel))
	mux.HandleFunc("GET /reminders/{id}/reschedule", s.changing(s.rescheduleConfirm))
	mux.HandleFunc("POST /reminders/{id}/reschedule", s.changing(s.reschedule))
	mux.HandleFunc("GET /reminders/{id}/revive", s.changing(s.reviveConfirm))
	mux.HandleFunc("POST /reminders/{id}/revive", s.changing(s.revive))
}

// errReadOnly is the answer to a change, or its confirmation page, in a
// console started read-only.
var errReadOnly = errors.New("started read-only: restart with --allow-actions to cancel, reschedule, revive or redrive from the console")

// changing lets next answer only if the console may change deliveries:
// otherwise 403, saying how to allow it.
func (s *Server) changing(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.AllowActions {
			s.cfg.Logger.Warn("console: change refused: read-only", "method", r.Method, "path", r.URL.Path)
			s.fail(w, r, http.StatusForbidden, errReadOnly)
			return
		}
		next(w, r)
	}
}

// by is who changes, as the ledger and the messages record it: the
// operator, from the console.
func (s *Server) by() string { return s.cfg.Operator + " (console)" }

// reasonOf reads the form's reason: required, and short enough that the
// history note prefix+reason keeps it whole (ledger.MaxNote).
func reasonOf(r *http.Request, prefix string) (string, error) {
	reason := strings.Join(strings.Fields(r.PostFormValue("reason")), " ")
	switch {
	case reason == "":
		return "", errors.New("give a reason: the delivery's history keeps who and why (no names or addresses)")
	case len(prefix)+len(reason) > ledger.MaxNote:
		return "", fmt.Errorf("the reason is %d bytes; the history keeps %d with who: shorten it to %d", len(reason), ledger.MaxNote,
			max(0, ledger.MaxNote-len(prefix)))
	}
	return reason, nil
}
