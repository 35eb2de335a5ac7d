package console

// The pages that change deliveries, each after a confirmation page that
// shows exactly what will change: the DLQ's redrive of a chosen, bounded
// selection, and a reminder's cancel, reschedule and revive.

import "net/http"

// routesChange registers the pages that change deliveries.
func (s *Server) routesChange(mux *http.ServeMux) {}
