package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsHaveNoPlaceholdersOrBrokenLinks: the README and docs/ hold no
// placeholder left for later (a line that is one UPPER_CASE word), and every
// relative link points to a file that exists and, with an #anchor, to one
// of its headings.
func TestDocsHaveNoPlaceholdersOrBrokenLinks(t *testing.T) {
	t.Parallel()
	root := "../.."
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	placeholder := regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$`)
	link := regexp.MustCompile(`\]\(([^)#\s]*)(#[^)\s]*)?\)`)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		b, err := os.ReadFile(path)
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if h, ok := strings.CutPrefix(line, "#"); ok {
					a["#"+slug(strings.TrimLeft(h, "# "))] = true
				}
			}
		}
		anchors[path] = a
		return a
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if placeholder.MatchString(strings.TrimSpace(line)) {
				t.Errorf("%s:%d: a placeholder: %q", f, i+1, line)
			}
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target, anchor := m[1], m[2]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path := f
				if target != "" {
					path = filepath.Join(filepath.Dir(f), target)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s:%d: a link to %s, which does not exist", f, i+1, target)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
					t.Errorf("%s:%d: a link to %s%s, which is not a heading there", f, i+1, target, anchor)
				}
			}
		}
	}
}

// slug is a heading's anchor as GitHub makes it.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && r != '→' && r != '—' && r != '–':
			b.WriteRune(r)
		}
	}
	return b.String()
}
