package console

// The pages that read: the overview, find, a reminder (and the reveal of
// an address, which its history records), an account's reminders.

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/nudgehq/nudge/internal/message"
)

// routesRead registers the pages that read.
func (s *Server) routesRead(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", s.overview)
	mux.HandleFunc("GET /find", s.find)
	mux.HandleFunc("GET /accounts/{ref}", s.account)
	mux.HandleFunc("GET /reminders/{id}", s.reminder)
	mux.HandleFunc("POST /reminders/{id}/reveal", s.reveal)
}

// reminderURL is the reminder page of id.
func reminderURL(id string) string { return "/reminders/" + url.PathEscape(id) }

// deliveryAnchor is the id of a delivery's section on its reminder's page.
func deliveryAnchor(channel, provider string) string { return "d-" + channel + "-" + provider }

// deliveryURL is the section of key's delivery on its reminder's page.
func deliveryURL(k message.DeliveryKey) string {
	return reminderURL(k.ReminderID) + "#" + deliveryAnchor(k.Channel, k.Provider)
}

// accountURL is the page of account ref's reminders.
func accountURL(ref string) string { return "/accounts/" + url.PathEscape(ref) }

// wantsJSON reports whether r asks for a page's JSON twin.
func wantsJSON(r *http.Request) bool { return r.URL.Query().Get("format") == "json" }

// span says a duration the way the pages do: "4s", "3m 20s", "2h 5m",
// "3d 4h".
func span(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}
