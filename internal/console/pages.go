package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/nudgehq/nudge/internal/ledger"
	"github.com/nudgehq/nudge/internal/message"
)

// Ledger is what the console reads and writes of the ledger itself: a
// delivery, and the reveal of its address, which its history records.
type Ledger interface {
	Get(ctx context.Context, key message.DeliveryKey) (ledger.Delivery, error)
	RecordReveal(ctx context.Context, key message.DeliveryKey, r ledger.Reveal) (ledger.Delivery, error)
	ReadRecent(ctx context.Context, q ledger.RecentQuery) (ledger.RecentPage, error)
}

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

func staticFS() fs.FS {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	return sub
}

// pages are the parsed templates: each page's own, with the layout.
type pages struct{ byName map[string]*template.Template }

// funcs are the templates' functions.
var funcs = template.FuncMap{
	"join": strings.Join,
}

func parsePages() (*pages, error) {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: layout: %w", err)
	}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, n := range names {
		base := path.Base(n)
		if base == "layout.html" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(templateFiles, n)
		if err != nil {
			return nil, fmt.Errorf("console: page %s: %w", base, err)
		}
		p.byName[strings.TrimSuffix(base, ".html")] = t
	}
	return p, nil
}

// view is what every page's template gets.
type view struct {
	// Title is the page's title; Nav the navigation entry it is under.
	Title, Nav string
	// Stage is the stage shown; Operator who is using the console.
	Stage, Operator string
	// CSRF is the token every form posts back.
	CSRF string
	// Actions is whether the console may change deliveries.
	Actions bool
	// Data is the page's own.
	Data any
}

// render answers with the page name (its template), or, for ?format=json,
// with doc: the page's JSON twin (the CLI's --json document).
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name, title string, data, doc any) {
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(doc)
		return
	}
	t, ok := s.pages.byName[name]
	if !ok {
		http.Error(w, "console: no page "+name, http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	v := view{Title: title, Nav: name, Stage: s.cfg.Stage, Operator: s.cfg.Operator, CSRF: s.csrf(), Actions: s.cfg.AllowActions, Data: data}
	if err := t.ExecuteTemplate(&b, "layout", v); err != nil {
		s.cfg.Logger.Error("console: render", "page", name, "error", err.Error())
		http.Error(w, "console: the page "+name+" failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

// problem is the JSON twin of an error page.
type problem struct {
	Status int    `json:"status"`
	Error  string `json:"error"`
}

// fail answers with an error page: code and what went wrong, with the fix.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	s.render(w, r, code, "error", http.StatusText(code), err.Error(), problem{Status: code, Error: err.Error()})
}

// routes registers every page: those that read (read.go) and those that
// change deliveries (change.go).
func (s *Server) routes(mux *http.ServeMux) {
	s.routesRead(mux)
	s.routesChange(mux)
}
