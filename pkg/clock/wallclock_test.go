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

// wallClockMark is what a comment says where the wall clock is right,
// followed by why: on the line of the read, in the comment lines right
// above it, or above the statement that holds it.
const wallClockMark = "wall clock:"

// TestProductionCodeTakesTimeFromItsClock: production code (functions/,
// cmd/, pkg/ and internal/ but for internal/local, the system on one machine) reads time
// from its injected Clock; where it reads the wall clock instead (package
// time's reads and timers, a context's deadline or timeout, a Deadline()
// of a context), a comment says "wall clock:" and why (a context
// deadline, which is Lambda's; a SigV4 signature, which is AWS's; a pause
// for a service to recover). A new read without one fails here. What
// other packages read on the caller's behalf (an http.Client's Timeout,
// the SDK's retry pauses) is out of its sight.
func TestProductionCodeTakesTimeFromItsClock(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	for _, top := range []string{"functions", "cmd", "pkg", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if d.IsDir() && (rel == filepath.Join("internal", "local") || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
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
	// The lines whose comment (a real one: not text in a string) says the
	// mark, and the lines that are comments only.
	marks, commentOnly := map[int]bool{}, map[int]bool{}
	lines := strings.Split(string(src), "\n")
	for _, g := range f.Comments {
		for _, c := range g.List {
			from, to := fset.Position(c.Pos()).Line, fset.Position(c.End()).Line
			if strings.Contains(strings.ToLower(c.Text), wallClockMark) {
				for l := from; l <= to; l++ {
					marks[l] = true
				}
			}
			for l := from; l <= to; l++ {
				if l == from && strings.TrimSpace(lines[l-1][:fset.Position(c.Pos()).Column-1]) != "" {
					continue // code before the comment on its line
				}
				commentOnly[l] = true
			}
		}
	}
	// marked: the line says it, or the comment lines right above it do.
	marked := func(line int) bool {
		if marks[line] {
			return true
		}
		for l := line - 1; l >= 1 && commentOnly[l]; l-- {
			if marks[l] {
				return true
			}
		}
		return false
	}
	var out []wallClockRead
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := wallClock[p]; ok && imp.Name != nil && imp.Name.Name == "." {
			out = append(out, wallClockRead{name: "a dot import of " + p + " (its reads cannot be seen)", line: fset.Position(imp.Pos()).Line})
		}
	}
	var stmts []ast.Node // the nodes enclosing the one inspected
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stmts = stmts[:len(stmts)-1]
			return true
		}
		stmts = append(stmts, n)
		var name string
		var pos token.Pos
		switch n := n.(type) {
		case *ast.SelectorExpr:
			id, ok := n.X.(*ast.Ident)
			if !ok {
				return true
			}
			p, ok := names[id.Name]
			if !ok || !wallClock[p][n.Sel.Name] {
				return true
			}
			name, pos = p+"."+n.Sel.Name, n.Pos()
		case *ast.CallExpr:
			// A context's deadline is on the wall clock (Lambda's).
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Deadline" || len(n.Args) != 0 {
				return true
			}
			name, pos = "Deadline()", sel.Sel.Pos()
		default:
			return true
		}
		line := fset.Position(pos).Line
		r := wallClockRead{name: name, line: line, marked: marked(line)}
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

// TestTheWallClockCheckFindsAnUnmarkedRead: the check sees a read, an
// aliased import, a function value, a context's Deadline() and a dot
// import, takes a mark in a line or block comment, on the line, right above
// it or above its statement, and takes no mark from a string or a comment
// that only mentions the wall clock.
func TestTheWallClockCheckFindsAnUnmarkedRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.go")
	src := `package x

import (
	"context"
	. "fmt"
	tm "time"
)

var now = tm.Now

func f(ctx context.Context) {
	_ = tm.Since(tm.Time{})
	// wall clock: the invocation's deadline is Lambda's
	ctx, cancel := context.WithTimeout(ctx, tm.Second)
	defer cancel()
	<-tm.After(tm.Second) // Wall clock: a pause for SQS
	// The deadline is Lambda's: the
	// wall clock: as the next line says.
	//
	// more
	_ = g(1,
		tm.Now())
	_ = g(2, // an unrelated comment
		tm.Now())
	_ = "// wall clock: in a string"; _ = tm.Now()
	_ = tm.Now() // never the wall clock here
	_ = tm.Now() /* wall clock: in a block */
	dl, _ := ctx.Deadline()
	_ = Sprint(dl)
}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range wallClockReads(t, path) {
		got = append(got, r.name+":"+strconv.Itoa(r.line)+":"+strconv.FormatBool(r.marked))
	}
	want := "time.Now:9:false time.Since:12:false context.WithTimeout:14:true time.After:16:true time.Now:22:true time.Now:24:false " +
		"time.Now:25:false time.Now:26:false time.Now:27:true Deadline():28:false"
	if strings.Join(got, " ") != want {
		t.Errorf("reads\n%v\nwant\n%s", strings.Join(got, " "), want)
	}
	dot := filepath.Join(t.TempDir(), "y.go")
	if err := os.WriteFile(dot, []byte("package y\n\nimport . \"time\"\n\nvar _ = Now\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := wallClockReads(t, dot); len(r) != 1 || r[0].marked || !strings.Contains(r[0].name, "dot import of time") {
		t.Errorf("a dot import of time: %+v", r)
	}
}
