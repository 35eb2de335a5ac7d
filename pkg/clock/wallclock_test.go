package clock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// wallClock lists what reads or waits on the machine's clock: package
// time's reads and timers, and package context's deadlines, which run on
// time's timers.
var wallClock = map[string]map[string]bool{
	"time": {"Now": true, "Since": true, "Until": true, "After": true, "AfterFunc": true, "NewTimer": true,
		"NewTicker": true, "Tick": true, "Sleep": true},
	"context": {"WithTimeout": true, "WithTimeoutCause": true, "WithDeadline": true, "WithDeadlineCause": true},
}

// wallClockMark is what a comment says where the wall clock is right: on
// the line of the read, or on the line above it.
const wallClockMark = "wall clock"

// TestProductionCodeTakesTimeFromItsClock: production code (functions/,
// cmd/ and pkg/ but for pkg/local, the system on one machine) reads time
// from its injected Clock; where it reads the wall clock instead, a comment
// on that line or the line above says "wall clock" and why (a context
// deadline, which is Lambda's; a SigV4 signature, which is AWS's; a pause
// for a service to recover). A new read without one fails here.
func TestProductionCodeTakesTimeFromItsClock(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	for _, top := range []string{"functions", "cmd", "pkg"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if d.IsDir() && (rel == filepath.Join("pkg", "local") || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 50 {
		t.Fatalf("found only %d production files under %s; is the test run from pkg/clock?", len(files), root)
	}
	reads := 0
	for _, path := range files {
		for _, r := range wallClockReads(t, path) {
			reads++
			if !r.marked {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d: %s reads the wall clock: take the time from the component's injected clock.Clock, "+
					"or say why the machine's clock is right there in a comment with the words %q, on that line or right above it",
					rel, r.line, r.name, wallClockMark)
			}
		}
	}
	if reads == 0 {
		t.Fatal("no wall-clock read found at all, not even clock.Real's: the check is broken")
	}
}

type wallClockRead struct {
	name   string // "time.Now"
	line   int
	marked bool
}

// wallClockReads returns every reference to a wallClock function in the
// file (a call, or a function value such as Now: time.Now), and whether a
// comment marks it.
func wallClockReads(t *testing.T, path string) []wallClockRead {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{} // local name → package path, for time and context
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := wallClock[p]; !ok {
			continue
		}
		name := p
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = p
	}
	if len(names) == 0 {
		return nil
	}
	lines := strings.Split(string(src), "\n")
	// marked: the line says it, or the comment lines right above it do.
	marked := func(line int) bool { // 1-based
		if commentHas(lines[line-1]) {
			return true
		}
		for l := line - 1; l >= 1 && strings.HasPrefix(strings.TrimSpace(lines[l-1]), "//"); l-- {
			if commentHas(lines[l-1]) {
				return true
			}
		}
		return false
	}
	var out []wallClockRead
	var stmts []ast.Node // the statements and declarations enclosing the node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stmts = stmts[:len(stmts)-1]
			return true
		}
		stmts = append(stmts, n)
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		p, ok := names[id.Name]
		if !ok || !wallClock[p][sel.Sel.Name] {
			return true
		}
		line := fset.Position(sel.Pos()).Line
		r := wallClockRead{name: p + "." + sel.Sel.Name, line: line, marked: marked(line)}
		// Or the comment above the innermost statement holding the read,
		// where the read is inside a statement of several lines.
		for i := len(stmts) - 1; i >= 0 && !r.marked; i-- {
			switch stmts[i].(type) {
			case ast.Stmt, ast.Decl, *ast.ValueSpec:
				r.marked = marked(fset.Position(stmts[i].Pos()).Line)
				i = 0
			}
		}
		out = append(out, r)
		return true
	})
	return out
}

// commentHas reports whether a line's comment (after //) says
// wallClockMark.
func commentHas(line string) bool {
	_, comment, ok := strings.Cut(line, "//")
	return ok && strings.Contains(strings.ToLower(comment), wallClockMark)
}

// TestTheWallClockCheckFindsAnUnmarkedRead: the check sees a read, an
// aliased import and a function value, and takes a marked one.
func TestTheWallClockCheckFindsAnUnmarkedRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.go")
	src := `package x

import (
	"context"
	tm "time"
)

var now = tm.Now

func f(ctx context.Context) {
	_ = tm.Since(tm.Time{})
	// wall clock: the invocation's deadline is Lambda's
	ctx, cancel := context.WithTimeout(ctx, tm.Second)
	defer cancel()
	<-tm.After(tm.Second) // Wall clock: a pause for SQS
	// The deadline is Lambda's: the wall
	// clock's, as the next line says.
	//
	// wall clock: as above
	_ = g(1,
		tm.Now())
	_ = g(2, // an unrelated comment
		tm.Now())
}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range wallClockReads(t, path) {
		got = append(got, r.name+":"+strconv.Itoa(r.line)+":"+strconv.FormatBool(r.marked))
	}
	want := "time.Now:8:false time.Since:11:false context.WithTimeout:13:true time.After:15:true time.Now:21:true time.Now:23:false"
	if strings.Join(got, " ") != want {
		t.Errorf("reads %v, want %s", got, want)
	}
}
