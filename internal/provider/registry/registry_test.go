package registry_test

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/nudgehq/nudge/internal/provider/registry"
	"github.com/nudgehq/nudge/pkg/provider"
)

// TestEveryDriverIsComplete: a driver declares everything the consumer,
// the intake, the stage, the stack and the local system ask of it.
func TestEveryDriverIsComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range registry.All() {
		switch {
		case seen[d.Name]:
			t.Errorf("%s is registered twice", d.Name)
		case !regexp.MustCompile(`^[a-z0-9_-]{1,32}$`).MatchString(d.Name):
			t.Errorf("%q is no provider name (1–32 of a-z, 0-9, '_', '-')", d.Name)
		case d.Title == "" || d.Build == nil || d.StandIn.Kind == "" || d.StandIn.Resources == nil || d.StandIn.Evidence == "":
			t.Errorf("%s lacks its title, its Build or its stand-in", d.Name)
		case len(d.Contract.Classification) == 0:
			t.Errorf("%s has no classification table", d.Name)
		}
		if _, err := provider.ParseAmbiguousPolicy(string(d.Contract.Ambiguous)); err != nil {
			t.Errorf("%s: %v", d.Name, err)
		}
		seen[d.Name] = true
	}
	if _, ok := registry.Lookup(registry.Default()); !ok || len(registry.Names()) != len(seen) {
		t.Errorf("the default %q or the names %v disagree with the drivers", registry.Default(), registry.Names())
	}
	if err := registry.Check("NUDGE_PROVIDERS", []string{"pigeon"}); err == nil || !strings.Contains(err.Error(), `"pigeon"`) {
		t.Errorf("an unknown provider: %v", err)
	}
}

// TestProviderNamesLiveInTheirDrivers: adding a provider is its package
// and a line in the registry (and, for the stack, its part,
// infra/provider_<name>.go, and a line in infra/providers.go). Production
// code anywhere else names no provider: no string is a provider's name,
// and no word in a string is one of its variables, settings or flags
// (NUDGE_SES_FROM, sesFrom, ses-rate). Prose may mention a service
// ("SES"), as may the stand-ins of AWS's services; tests may name
// anything.
func TestProviderNamesLiveInTheirDrivers(t *testing.T) {
	names := map[string]bool{}
	for _, n := range registry.Names() {
		names[n] = true
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	exempt := func(rel string) bool {
		dir, base := filepath.Dir(rel), filepath.Base(rel)
		switch {
		case dir == "internal/provider/registry",
			// A driver's own package, public or internal.
			strings.HasPrefix(dir, "pkg/provider/") && names[strings.Split(strings.TrimPrefix(dir, "pkg/provider/"), "/")[0]],
			strings.HasPrefix(dir, "internal/provider/") && names[strings.Split(strings.TrimPrefix(dir, "internal/provider/"), "/")[0]],
			dir == "infra" && (base == "providers.go" || strings.HasPrefix(base, "provider_")),
			// The stand-ins of AWS's services, named after the services.
			dir == "internal/local/standin",
			// Test helpers, as tests.
			strings.HasSuffix(filepath.Base(dir), "test"):
			return true
		}
		return false
	}
	// allowed are literals that hold a provider's name for another reason.
	allowed := map[string]string{
		"internal/message/message.go webhook": "a channel of that name",
	}
	token := regexp.MustCompile(`[A-Za-z0-9_-]+`)
	checked := 0
	err = filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if e.IsDir() {
			if n := e.Name(); rel != "." && (strings.HasPrefix(n, ".") || n == "build" || n == "cdk.out" || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || exempt(rel) {
			return nil
		}
		fset := gotoken.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			if _, ok := n.(*ast.ImportSpec); ok {
				return false
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != gotoken.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			bad := names[strings.ToLower(strings.TrimSpace(v))]
			for _, tok := range token.FindAllString(v, -1) {
				ws := words(tok)
				// A provider's variable (NUDGE_SES_FROM), setting (sesFrom)
				// or flag (ses-rate); not a service's name in another word
				// (SESEndpoint, aws-ses-v2-local).
				env := len(ws) > 2 && ws[0] == "nudge" && names[ws[1]] && strings.ToUpper(tok) == tok
				setting := len(ws) > 1 && names[ws[0]] && unicode.IsLower(rune(tok[0]))
				bad = bad || env || setting
			}
			if bad {
				if _, ok := allowed[rel+" "+v]; !ok {
					t.Errorf("%s: %q names a provider; take it from the provider's driver (internal/provider/registry)", fset.Position(lit.Pos()), v)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d files read from %s", checked, root)
	}
}

// words splits an identifier-like token into lower-case words: at '_',
// '-' and case changes ("NUDGE_SES_FROM", "sesFrom", "ses-rate").
func words(tok string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = nil
		}
	}
	rs := []rune(tok)
	for i, r := range rs {
		if r == '_' || r == '-' {
			flush()
			continue
		}
		if unicode.IsUpper(r) && len(cur) > 0 {
			prev := cur[len(cur)-1]
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return out
}
