package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nudgehq/nudge/internal/redrive"
	"github.com/nudgehq/nudge/internal/status"
	"github.com/nudgehq/nudge/pkg/clock"
	"github.com/nudgehq/nudge/pkg/schedule"
)

// Config configures a console.
type Config struct {
	// Stage names the stage the console shows, in every page's title.
	Stage string
	// Hosts are the Host header values the console answers: its listening
	// address and the loopback names for that port ("127.0.0.1:8089",
	// "localhost:8089"). A request for another host (a DNS rebinding) is
	// refused. Required.
	Hosts []string
	// Token is the session's secret, in the URL printed at start. Default:
	// 128 random bits in hex.
	Token string
	// AllowActions turns on the pages that change deliveries (cancel,
	// reschedule, revive, redrive). Default false: read-only.
	AllowActions bool
	// Operator names who uses the console, in the history of what it
	// changes and of each address it reveals. Required.
	Operator string

	// Status reads what `nudge status` shows. Required.
	Status func(ctx context.Context) (status.Report, error)
	// Reminders shows, lists, cancels and reschedules reminders, as the
	// CLI's calendar commands do. Required.
	Reminders *schedule.Store
	// Ledger is read for the recent activity and records the reveal of an
	// address (*ledger.Ledger). Required.
	Ledger Ledger
	// Redriver makes the DLQ's redriver for the operator by (nil: no DLQ
	// pages, as for a stage without queues).
	Redriver func(by string) (*redrive.Redriver, error)
	// Reviver makes the ledger's reviver for the operator by, with the
	// reason (nil: no revive).
	Reviver func(by, reason string) (*redrive.Reviver, error)

	// Clock tells the time. Default clock.Real.
	Clock clock.Clock
	// Logger receives a line per refused request and per change. Default:
	// discard.
	Logger *slog.Logger

	// Reading pages.

	// ActivityRead is the most ledger items the overview's recent
	// activity reads (a bounded scan; past it the activity says sampled).
	// Default status.DefaultRecentRead.
	ActivityRead int
	// AccountPage is how many reminders an account's page lists. Default
	// intake.DefaultPage, as the API lists them.
	AccountPage int

	// Changing pages.

	// DLQRead is how many DLQ messages the dead letters page reads (the
	// CLI's `dlq list --limit`; ?limit=N on the page, 1 to 1000). Default
	// 100.
	DLQRead int
	// Selections is the most redrive selections held at once, each hiding
	// its messages in the DLQ until it is redriven, cancelled or its hold
	// ends. Default 4.
	Selections int
}

// Server is the console's HTTP handler.
type Server struct {
	cfg     Config
	handler http.Handler
	pages   *pages
	// base lives as long as the console: work a request starts that must
	// outlive the request (a confirmed redrive) runs under it; stop ends
	// it (Close).
	base context.Context
	stop context.CancelFunc
	// dead serves the DLQ's pages and holds their selections.
	dead *deadLetters
}

// Close ends the console's work: a redrive in progress stops after its
// current message (the rest are put back), and every selection held for
// a confirmation is put back in the DLQ at once. Call it before the HTTP
// server's Shutdown.
func (s *Server) Close(ctx context.Context) {
	s.stop()
	if s.dead != nil {
		s.dead.releaseAll(ctx)
	}
}

// New checks cfg, applies its defaults and returns the console.
func New(cfg Config) (*Server, error) {
	switch {
	case len(cfg.Hosts) == 0:
		return nil, errors.New("console: no hosts: give the address it listens on (Config.Hosts), so that requests for other hosts are refused")
	case strings.TrimSpace(cfg.Operator) == "":
		return nil, errors.New("console: no operator: name who uses it (--operator, default $USER), for the history of what it reveals and changes")
	case cfg.Status == nil || cfg.Reminders == nil || cfg.Ledger == nil:
		return nil, errors.New("console: Status, Reminders and Ledger are required")
	}
	if cfg.Token == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("console: token: %w", err)
		}
		cfg.Token = hex.EncodeToString(b)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, pages: p}
	s.base, s.stop = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(staticFS())))
	// The icon a browser asks for by itself: without it, every page's
	// console shows a failed request.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		http.ServeFileFS(w, r, staticFS(), "favicon.svg")
	})
	s.routes(mux)
	s.handler = s.guard(mux)
	return s, nil
}

// Token is the session's secret.
func (s *Server) Token() string { return s.cfg.Token }

// URL is the address to open: base (http://host:port) with the token,
// which the console exchanges for a cookie on the first request.
func (s *Server) URL(base string) string {
	return strings.TrimSuffix(base, "/") + "/?token=" + url.QueryEscape(s.cfg.Token)
}

// ServeHTTP serves the console.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// CookieName begins the name of the cookie that carries the session's
// token: "nudge_console_<port>", so that two consoles on one host (a
// cookie does not tell ports apart) do not overwrite each other's.
const CookieName = "nudge_console"

// cookie is this console's cookie's name (CookieName).
func (s *Server) cookie() string {
	_, port, err := net.SplitHostPort(s.cfg.Hosts[0])
	if err != nil || port == "" {
		return CookieName
	}
	return CookieName + "_" + port
}

// Cookie is the name of this console's session cookie.
func (s *Server) Cookie() string { return s.cookie() }

// maxForm is the largest body a form may post: a reason, a time, a
// selection's id.
const maxForm = 64 << 10

// contentSecurityPolicy allows the console's own styles, scripts and
// images alone: no inline script, no frame, no form to another origin.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// guard refuses what does not belong: a request for another host, one
// without the session's token, and a POST without the page's CSRF token or
// from another origin. It sets the security headers on every answer.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// same-origin, not no-referrer: under no-referrer a browser sends
		// "Origin: null" with every form, which the Origin check refuses.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		// A request a page of another site made (an image, a form; the
		// loopback's other ports are the same site to a cookie, not to
		// this): only the console's own pages and the address bar.
		if f := r.Header.Get("Sec-Fetch-Site"); f != "" && f != "same-origin" && f != "none" {
			s.refuse(w, r, http.StatusForbidden, "a request from another site ("+f+"): open the console's pages from its own address")
			return
		}
		if !slices.Contains(s.cfg.Hosts, r.Host) {
			s.refuse(w, r, http.StatusMisdirectedRequest, "this console answers for "+strings.Join(s.cfg.Hosts, ", ")+
				" alone; open the address `nudge console` printed")
			return
		}
		if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet {
			if !s.tokenIs(t) {
				s.refuse(w, r, http.StatusUnauthorized, "the token in the address is not this console's: open the address `nudge console` printed")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: s.cookie(), Value: s.cfg.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del("token")
			to := *r.URL
			to.RawQuery = q.Encode()
			http.Redirect(w, r, to.RequestURI(), http.StatusSeeOther)
			return
		}
		c, err := r.Cookie(s.cookie())
		if err != nil || !s.tokenIs(c.Value) {
			s.refuse(w, r, http.StatusUnauthorized, "no session: open the address `nudge console` printed (it holds the token)")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/x-www-form-urlencoded" {
				s.refuse(w, r, http.StatusUnsupportedMediaType, "a change is a form (application/x-www-form-urlencoded), not "+shown(ct))
				return
			}
			if o := r.Header.Get("Origin"); o != "http://"+r.Host {
				s.refuse(w, r, http.StatusForbidden, fmt.Sprintf("a change from origin %q, not this console's", o))
				return
			}
			if !hmac.Equal([]byte(r.PostFormValue(csrfField)), []byte(s.csrf())) {
				s.refuse(w, r, http.StatusForbidden, "the form has no valid CSRF token: reload the page and submit it again")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// shown is s for a message, or "nothing".
func shown(s string) string {
	if s == "" {
		return "nothing"
	}
	return strconv.Quote(s)
}

func (s *Server) tokenIs(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.cfg.Token)) == 1
}

// csrfField is the form field of the CSRF token.
const csrfField = "csrf"

// csrf is the session's CSRF token: derived from its secret, which only a
// page of the console holds, so a page of another origin cannot forge it.
func (s *Server) csrf() string {
	m := hmac.New(sha256.New, []byte(s.cfg.Token))
	m.Write([]byte("nudge console csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

// refuse answers a request that does not belong with code and why, as
// text, and logs it.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, code int, why string) {
	s.cfg.Logger.Warn("console: request refused", "method", r.Method, "path", r.URL.Path, "host", r.Host, "status", code, "why", why)
	http.Error(w, why, code)
}

// now is the console's time.
func (s *Server) now() time.Time { return s.cfg.Clock.Now() }
