package console

// The pages that read: the overview, find, a reminder (and the reveal of
// an address, which its history records), an account's reminders.

import "net/http"

// routesRead registers the pages that read.
func (s *Server) routesRead(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", s.overview)
}

// overview is the first page: what `nudge status` shows.
func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	rep, err := s.cfg.Status(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	s.render(w, r, http.StatusOK, "overview", "Overview", rep, rep)
}
