package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
	"github.com/nudgehq/nudge/pkg/intake"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// accountPrefix marks a query for an account's reminders: "account:acct-1".
const accountPrefix = "account:"

// findView is what the find page shows: the query, and why nothing was
// found.
type findView struct {
	Query string
	// Missing says what was looked for and not found, and the fix; ""
	// before a search.
	Missing string
}

// findDoc is the find page's JSON twin when nothing was found.
type findDoc struct {
	Query string `json:"query"`
	Found bool   `json:"found"`
	Error string `json:"error,omitempty"`
}

// find answers ?q=: a reminder id goes to its page; a delivery key
// (id:channel:provider) to its section of the reminder's page;
// "account:REF", or an id no reminder has that an account has, to the
// account's reminders; anything else to the find page, saying what was
// not found and how to search. A redirect keeps ?format=json.
func (s *Server) find(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if q == "" {
		s.render(w, r, http.StatusOK, "find", "Find", findView{}, findDoc{})
		return
	}
	ctx := r.Context()
	to := func(path string) {
		if wantsJSON(r) {
			path = withJSON(path)
		}
		http.Redirect(w, r, path, http.StatusSeeOther)
	}
	if ref, ok := strings.CutPrefix(q, accountPrefix); ok {
		if ref = strings.TrimSpace(ref); ref == "" {
			s.notFound(w, r, q, "account: needs the account's reference after it, as in account:acct-1")
			return
		}
		to(accountURL(ref))
		return
	}
	if strings.Count(q, ":") == 2 {
		k, err := message.ParseDeliveryKey(q)
		if err != nil {
			s.notFound(w, r, q, fmt.Sprintf("%v: a delivery key is reminderId:channel:provider, as in renewal-4821:email:ses", err))
			return
		}
		_, err = s.cfg.Ledger.Get(ctx, k)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			s.notFound(w, r, q, fmt.Sprintf("no delivery %s: check the reminder id (case-sensitive), the channel and the provider; "+
				"search the reminder id alone to see its deliveries", q))
		case err != nil:
			s.fail(w, r, http.StatusBadGateway, err)
		default:
			to(deliveryURL(k))
		}
		return
	}
	if message.ValidReminderID(q) == nil {
		_, err := s.cfg.Reminders.Show(ctx, q)
		switch {
		case err == nil:
			to(reminderURL(q))
			return
		case !errors.Is(err, schedule.ErrNoReminder):
			s.fail(w, r, http.StatusBadGateway, err)
			return
		}
	}
	page, err := s.cfg.Reminders.List(ctx, q, 1, "")
	var ve *schedule.ValidationError
	switch {
	case err == nil && len(page.Reminders) > 0:
		to(accountURL(q))
	case err == nil || errors.As(err, &ve):
		s.notFound(w, r, q, fmt.Sprintf("no reminder and no account's reminders have the id %q: reminder ids are case-sensitive; "+
			"search a delivery key as reminderId:channel:provider, or an account as account:REF", q))
	default:
		s.fail(w, r, http.StatusBadGateway, err)
	}
}

// notFound answers the find page for q, saying what was not found and
// the fix.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request, q, why string) {
	s.render(w, r, http.StatusNotFound, "find", "Find", findView{Query: q, Missing: why}, findDoc{Query: q, Error: why})
}

// withJSON is path (which may end in a #fragment) asking for the JSON twin.
func withJSON(path string) string {
	p, frag, _ := strings.Cut(path, "#")
	sep := "?"
	if strings.Contains(p, "?") {
		sep = "&"
	}
	if frag != "" {
		return p + sep + "format=json#" + frag
	}
	return p + sep + "format=json"
}

// accountView is what an account's page shows.
type accountView struct {
	Ref       string
	Reminders []listedView
	// NextURL and PrevURL are the neighbouring pages, "" at an end;
	// PrevLabel says which (the first page, for an address that does not
	// hold the earlier pages' tokens).
	NextURL, PrevURL, PrevLabel string
	Page                        int
}

// listedView is one reminder of an account's page.
type listedView struct {
	ID, URL, DueAt, ExpiresAt, CreatedAt string
	Deliveries                           []listedDelivery
}

// listedDelivery is one delivery of a listed reminder, as it is now.
type listedDelivery struct {
	Key, URL, Told string
	Failed         bool
}

// maxBack is the most earlier pages' tokens an account page's address
// keeps, for its previous link.
const maxBack = 50

// account lists account {ref}'s reminders, latest due first, a page at a
// time as the API lists them (?next= is the page's token; back= the
// earlier pages', for the previous link). Its JSON twin is the API's page
// (GET /v1/reminders?account=).
func (s *Server) account(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	q := r.URL.Query()
	next, back := q.Get("next"), q["back"]
	if len(back) > maxBack {
		back = back[len(back)-maxBack:]
	}
	limit := s.cfg.AccountPage
	if limit == 0 {
		limit = intake.DefaultPage
	}
	page, err := s.cfg.Reminders.List(r.Context(), ref, limit, next)
	var ve *schedule.ValidationError
	switch {
	case errors.As(err, &ve):
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("account %q: %w: open the account's first page, %s", ref, err, accountURL(ref)))
		return
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	v := accountView{Ref: ref, Page: 1, PrevLabel: "Previous page"}
	if next != "" {
		v.Page = len(back) + 1
		if len(back) == 0 {
			v.Page, v.PrevLabel = 0, "First page"
		}
	}
	if page.Next != "" {
		nq := url.Values{"next": {page.Next}, "back": append(append([]string{}, back...), next)}
		v.NextURL = accountURL(ref) + "?" + nq.Encode()
	}
	if next != "" {
		pq := url.Values{}
		if len(back) > 0 {
			if prev := back[len(back)-1]; prev != "" {
				pq.Set("next", prev)
			}
			if len(back) > 1 {
				pq["back"] = back[:len(back)-1]
			}
		}
		v.PrevURL = accountURL(ref)
		if len(pq) > 0 {
			v.PrevURL += "?" + pq.Encode()
		}
	}
	for _, l := range page.Reminders {
		lv := listedView{ID: l.ID, URL: reminderURL(l.ID), DueAt: schedule.FormatTime(l.DueAt), ExpiresAt: schedule.FormatTime(l.ExpiresAt),
			CreatedAt: schedule.FormatOpt(l.CreatedAt)}
		for _, d := range l.Deliveries {
			k := l.Key(d)
			ld := listedDelivery{Key: k.String(), URL: deliveryURL(k), Told: "not found (created a moment ago, or purged)"}
			if cur, ok := l.Now[k]; ok {
				ld.Told, ld.Failed = cur.Told(), cur.Status == schedule.StatusDead || (cur.Feedback != nil && cur.Feedback.Failed)
			}
			lv.Deliveries = append(lv.Deliveries, ld)
		}
		v.Reminders = append(v.Reminders, lv)
	}
	s.render(w, r, http.StatusOK, "account", "Account "+ref, v, intake.PageOf(page))
}
