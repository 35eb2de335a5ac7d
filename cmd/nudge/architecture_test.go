package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestPackagesImportOnlyWhatIsBelowThem: docs/architecture.md's "Where
// things live" lists every package of the module, from the entry points
// down, and each package imports only packages listed below it (tests
// aside).
func TestPackagesImportOnlyWhatIsBelowThem(t *testing.T) {
	const module = "github.com/nudgehq/nudge/"
	f, err := os.Open("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `((?:pkg|internal|cmd|functions)/[a-z/]+)` \\|")
	rank := map[string]int{}
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case line == "## Where things live":
			in = true
		case in && strings.HasPrefix(line, "## "):
			in = false
		case in:
			if m := row.FindStringSubmatch(line); m != nil {
				if _, dup := rank[m[1]]; dup {
					t.Errorf("%s is listed twice", m[1])
				}
				rank[m[1]] = len(rank)
			}
		}
	}
	if len(rank) == 0 {
		t.Fatal(`docs/architecture.md has no "Where things live" table`)
	}

	cmd := exec.Command("go", "list", "-json", module+"...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := map[string]bool{}
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(p.ImportPath, module)
		seen[name] = true
		r, ok := rank[name]
		if !ok {
			t.Errorf("%s is not in the map: add it to docs/architecture.md, \"Where things live\", where its imports allow", name)
			continue
		}
		for _, imp := range p.Imports {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			if rd, ok := rank[dep]; ok && rd <= r {
				t.Errorf("%s imports %s, which the map lists above it", name, dep)
			}
		}
	}
	for name := range rank {
		if !seen[name] {
			t.Errorf("the map lists %s, which does not exist", name)
		}
	}
}

// TestWhatReceiversImportDependsOnNoAWSPackage: a webhook receiver written
// in Go imports the Verifier (pkg/provider/webhook); it, and the portable
// provider and failure packages it stands on, pull in no AWS package.
func TestWhatReceiversImportDependsOnNoAWSPackage(t *testing.T) {
	for _, pkg := range []string{"pkg/provider/webhook", "pkg/provider", "pkg/failure"} {
		cmd := exec.Command("go", "list", "-deps", "github.com/nudgehq/nudge/"+pkg)
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/aws/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

// TestPackagesKeepOffWhatTheyMustNotImport: rules the map's order cannot
// state, since the package below is allowed there. pkg/intake speaks the
// API's types (pkg/schedule's Reminder, Status, errors), never the
// ledger's, so that a storage change is not an API change; tests aside.
func TestPackagesKeepOffWhatTheyMustNotImport(t *testing.T) {
	const module = "github.com/nudgehq/nudge/"
	for _, rule := range []struct{ pkg, dep, why string }{
		{"pkg/intake", "internal/ledger", "the intake takes what it needs of the ledger (statuses, errors, times, page size, masking) from pkg/schedule"},
	} {
		cmd := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, module+rule.pkg)
		cmd.Dir = "../.."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, imp := range strings.Fields(string(out)) {
			if imp == module+rule.dep || strings.HasPrefix(imp, module+rule.dep+"/") {
				t.Errorf("%s imports %s: %s", rule.pkg, imp, rule.why)
			}
		}
	}
}
