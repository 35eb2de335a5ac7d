package intake

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/nudgehq/nudge/pkg/schedule"
)

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
	// Recur is set on a series: its rule; its deliveries are the
	// template of its occurrences (status "series"), each listed as a
	// reminder of its own. Next is its next occurrence, until it ends
	// or is cancelled.
	Recur string                   `json:"recur,omitempty"`
	Next  *schedule.NextOccurrence `json:"next,omitempty"`
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
	writeJSON(w, http.StatusOK, PageOf(page))
}

// PageOf is a page of a listing as the API answers it.
func PageOf(page schedule.ListPage) Page {
	out := Page{Reminders: []ListedReminder{}, Next: page.Next}
	for _, l := range page.Reminders {
		lr := ListedReminder{ID: l.ID, AccountRef: l.AccountRef, DueAt: schedule.FormatTime(l.DueAt), ExpiresAt: schedule.FormatTime(l.ExpiresAt),
			CreatedAt: schedule.FormatOpt(l.CreatedAt), Deliveries: []ListedDelivery{}, Recur: l.Recur, Next: l.Next}
		for _, d := range l.Deliveries {
			ld := ListedDelivery{Channel: d.Channel, Provider: d.Provider, RecipientRef: d.RecipientRef, TemplateRef: d.TemplateRef, Status: "unknown"}
			if l.IsSeries {
				ld.Status = "series"
			}
			if cur, ok := l.Now[l.Key(d)]; ok {
				ld.Status, ld.Attempts, ld.SentAt, ld.LastErrorClass = string(cur.Status), cur.Attempts, cur.SentAt, string(cur.LastErrorClass)
			}
			lr.Deliveries = append(lr.Deliveries, ld)
		}
		out.Reminders = append(out.Reminders, lr)
	}
	return out
}
