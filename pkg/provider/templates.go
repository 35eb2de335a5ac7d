package provider

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// EmailTemplate is one stored e-mail template, as the repository keeps it
// (templates/email/<name>/) and SES stores it.
type EmailTemplate struct {
	// Name is the folder's name: the templateRef deliveries give.
	Name string
	// Subject, HTML and Text are the parts; Subject and one body are
	// required.
	Subject, HTML, Text string
}

// MaxTemplateBytes bounds a template's parts together (SES allows 500 KB).
const MaxTemplateBytes = 500 << 10

// The files of a template's folder.
const (
	fileSubject = "subject.txt"
	fileHTML    = "body.html"
	fileText    = "body.txt"
)

// ReadEmailTemplates reads every template folder in fsys (the
// templates/email folder), sorted by name. Files other than a folder's
// three are refused, so that a misnamed body is not silently left out.
func ReadEmailTemplates(fsys fs.FS) ([]EmailTemplate, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	var out []EmailTemplate
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue // README.md and the like
		}
		t, err := readEmailTemplate(fsys, e.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, t)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b EmailTemplate) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func readEmailTemplate(fsys fs.FS, name string) (EmailTemplate, error) {
	t := EmailTemplate{Name: name}
	if !ValidTemplateRef(name, len("nudge-")) {
		return t, fmt.Errorf("templates: folder %q: a template's name is letters, digits, '-' and '_', short enough for SES's %d characters with its stage prefix", name, MaxTemplateName)
	}
	files, err := fs.ReadDir(fsys, name)
	if err != nil {
		return t, fmt.Errorf("templates: %s: %w", name, err)
	}
	size := 0
	for _, f := range files {
		p := path.Join(name, f.Name())
		var dst *string
		switch f.Name() {
		case fileSubject:
			dst = &t.Subject
		case fileHTML:
			dst = &t.HTML
		case fileText:
			dst = &t.Text
		default:
			return t, fmt.Errorf("templates: %s is not a template part; a template folder holds %s, %s and %s", p, fileSubject, fileHTML, fileText)
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return t, fmt.Errorf("templates: %w", err)
		}
		size += len(b)
		*dst = string(b)
	}
	t.Subject = strings.TrimSpace(t.Subject)
	switch {
	case t.Subject == "":
		return t, fmt.Errorf("templates: %s has no %s (or it is empty); write the subject line there", name, fileSubject)
	case strings.ContainsAny(t.Subject, "\r\n"):
		return t, fmt.Errorf("templates: %s/%s holds more than one line; a subject is one line", name, fileSubject)
	case t.HTML == "" && t.Text == "":
		return t, fmt.Errorf("templates: %s has neither %s nor %s; write at least one body", name, fileHTML, fileText)
	case size > MaxTemplateBytes:
		return t, fmt.Errorf("templates: %s is %d bytes; SES allows %d", name, size, MaxTemplateBytes)
	}
	return t, nil
}

// mustache matches one Handlebars tag: {{name}}, {{{name}}}, {{#if name}},
// {{/if}}, {{else}}.
var mustache = regexp.MustCompile(`\{\{\{?\s*([#/^]?)\s*([A-Za-z0-9_.-]+)(?:\s+([A-Za-z0-9_.-]+))?[^}]*\}?\}\}`)

// Variables returns the data t needs to render: every {{name}} used outside
// a block that tests it ({{#if name}}…{{/if}} makes name optional), sorted.
// SES accepts a send whose data lacks one and fails it afterwards (a
// rendering failure), so the intake refuses such data up front.
func (t EmailTemplate) Variables() []string {
	seen := map[string]bool{}
	for _, part := range []string{t.Subject, t.HTML, t.Text} {
		var conditions []string
		for _, m := range mustache.FindAllStringSubmatch(part, -1) {
			kind, name, arg := m[1], m[2], m[3]
			switch {
			case kind == "#" || kind == "^":
				conditions = append(conditions, arg) // {{#if where}}: "if", "where"
			case kind == "/":
				if len(conditions) > 0 {
					conditions = conditions[:len(conditions)-1]
				}
			case name == "else" || name == "this" || strings.HasPrefix(name, "@"):
			case slices.Contains(conditions, name) || len(conditions) > 0 && slices.Contains(conditions, strings.Split(name, ".")[0]):
			case arg != "":
				// A helper call such as {{lookup x y}}: not a plain variable.
			default:
				seen[strings.Split(name, ".")[0]] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}
