package ses

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Template is one stored e-mail template, as the repository keeps it
// (templates/email/<name>/) and SES stores it.
type Template struct {
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

// ReadTemplates reads every template folder in fsys (the
// templates/email folder), sorted by name. Files other than a folder's
// three are refused, so that a misnamed body is not silently left out.
func ReadTemplates(fsys fs.FS) ([]Template, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	var out []Template
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue // README.md and the like
		}
		t, err := readTemplateFolder(fsys, e.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, t)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Template) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func readTemplateFolder(fsys fs.FS, name string) (Template, error) {
	t := Template{Name: name}
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

// Handlebars syntax the variable scan reads: comments (removed first), and
// tags, with whitespace control ("~") and triple braces.
var (
	hbComment = regexp.MustCompile(`\{\{~?!--[\s\S]*?--~?\}\}|\{\{~?![\s\S]*?\}\}`)
	hbTag     = regexp.MustCompile(`\{\{\{?~?\s*([\s\S]*?)\s*~?\}?\}\}`)
)

// Variables returns the data t needs to render: each {{name}} outside a
// block that tests it ({{#if name}}…{{/if}}, {{#unless}}, {{^name}}, and
// {{else if name}} make name optional), and each list or object a block
// iterates or enters ({{#each items}} needs items), sorted. What it cannot
// resolve it leaves out rather than refuse a reminder for: names inside
// {{#each}} and {{#with}} (relative to the item), helper calls, {{this}},
// {{@index}}, {{../x}}, {{[a b]}}. SES accepts a send whose data lacks a
// variable and fails it afterwards (a rendering failure), so the intake
// refuses such data up front.
func (t Template) Variables() []string {
	type block struct {
		scope  bool            // #each, #with: names inside are the item's
		tested map[string]bool // roots the block (or its else-ifs) tests
	}
	root := func(name string) string { return strings.SplitN(name, ".", 2)[0] }
	resolvable := func(name string) bool {
		return name != "" && !strings.HasPrefix(name, "this") && !strings.HasPrefix(name, "@") && !strings.HasPrefix(name, "..") &&
			!strings.HasPrefix(name, "[") && !strings.ContainsAny(name, "\"'()=")
	}
	seen := map[string]bool{}
	for _, part := range []string{t.Subject, t.HTML, t.Text} {
		var open []block
		optional := func(r string) bool {
			for _, b := range open {
				if b.scope || b.tested[r] {
					return true
				}
			}
			return false
		}
		need := func(name string) {
			if resolvable(name) && !optional(root(name)) {
				seen[root(name)] = true
			}
		}
		for _, m := range hbTag.FindAllStringSubmatch(hbComment.ReplaceAllString(part, ""), -1) {
			fields := strings.Fields(m[1])
			if len(fields) == 0 {
				continue
			}
			head := fields[0]
			switch {
			case strings.HasPrefix(head, "^"): // {{^name}}: shown when name is absent
				arg := strings.TrimPrefix(head, "^")
				if arg == "" && len(fields) > 1 {
					arg = fields[1]
				}
				open = append(open, block{tested: map[string]bool{root(arg): true}})
			case strings.HasPrefix(head, "#"):
				helper, arg := strings.TrimPrefix(head, "#"), ""
				if len(fields) > 1 {
					arg = fields[1]
				}
				b := block{tested: map[string]bool{}}
				switch helper {
				case "each", "with":
					need(arg)
					b.scope = true
				case "if", "unless":
					b.tested[root(arg)] = true
				default:
					b.scope = true // an unknown block helper: its body is its own
				}
				open = append(open, b)
			case strings.HasPrefix(head, "/"):
				if len(open) > 0 {
					open = open[:len(open)-1]
				}
			case head == "else":
				if len(fields) > 2 && fields[1] == "if" && len(open) > 0 {
					open[len(open)-1].tested[root(fields[2])] = true
				}
			case len(fields) > 1:
				// A helper call ({{lookup a b}}): its arguments may be
				// anything; left out.
			default:
				need(head)
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
