package gate

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// root is the repository's top, from this package's directory.
const root = "../.."

// concurrentSuffix ends the name of a test of a sequential package that starts goroutines;
// scripts/test runs those tests under -race.
const concurrentSuffix = "Concurrently"

// sequentialDirs reads scripts/sequential: one package directory per line, # comments.
func sequentialDirs(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "scripts/sequential"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !strings.HasPrefix(line, "./") || strings.ContainsAny(line, " \t") {
			t.Fatalf("scripts/sequential:%d: %q is not a package directory (./path)", n, line)
		}
		dirs = append(dirs, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("scripts/sequential lists no package")
	}
	return dirs
}

// TestSequentialPackages checks each package of scripts/sequential: its code starts no
// goroutine (but in a command's functions that its tests never name, such as main), and every function of its tests that starts
// one, marks its test parallel or starts a server is a test named ...Concurrently, which
// scripts/test runs under -race. A helper that does is refused, since the tests that call it
// would run without the race detector.
func TestSequentialPackages(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(root, "scripts/test"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "-run '"+concurrentSuffix+"$'") {
		t.Errorf("scripts/test does not run the sequential packages' tests named ...%s under -race (-run '%s$')", concurrentSuffix, concurrentSuffix)
	}
	for _, dir := range sequentialDirs(t) {
		for _, err := range concurrency(t, filepath.Join(root, dir)) {
			t.Errorf("%s (listed in scripts/sequential): %v", dir, err)
		}
	}
}

// concurrency returns what in dir's Go files breaks the rules of TestSequentialPackages.
func concurrency(t *testing.T, dir string) []error {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("%s: no Go files (%v)", dir, err)
	}
	sort.Strings(names)
	fset := token.NewFileSet()
	files := make([]*ast.File, len(names))
	named := map[string]bool{} // the identifiers the tests use
	for i, name := range names {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = f
		if strings.HasSuffix(name, "_test.go") {
			for _, decl := range f.Decls { // not the package clause's name
				ast.Inspect(decl, func(n ast.Node) bool {
					if id, ok := n.(*ast.Ident); ok {
						named[id.Name] = true
					}
					return true
				})
			}
		}
	}
	var errs []error
	for i, f := range files {
		isTest := strings.HasSuffix(names[i], "_test.go")
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			what := starts(fn.Body)
			switch {
			case what == "":
			case !isTest && f.Name.Name == "main" && fn.Recv == nil && !named[fn.Name.Name]:
			case !isTest:
				errs = append(errs, fmt.Errorf("%s: %s %s, which the package's tests would run without the race detector",
					fset.Position(fn.Pos()), fn.Name.Name, what))
			case !isTestFunc(fn) || !strings.HasSuffix(fn.Name.Name, concurrentSuffix):
				errs = append(errs, fmt.Errorf("%s: %s %s: only a test named ...%s may (scripts/test runs those under -race)",
					fset.Position(fn.Pos()), fn.Name.Name, what, concurrentSuffix))
			}
		}
	}
	return errs
}

// isTestFunc reports whether fn is a top-level test, the level go test -run matches first.
func isTestFunc(fn *ast.FuncDecl) bool {
	return fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test")
}

// starts says how body starts concurrent work ("" when it does not): a go statement, a
// t.Parallel, WaitGroup.Go or AfterFunc call, or a server from net/http/httptest.
func starts(body *ast.BlockStmt) string {
	what := ""
	ast.Inspect(body, func(n ast.Node) bool {
		if what != "" {
			return false
		}
		switch n := n.(type) {
		case *ast.GoStmt:
			what = "starts a goroutine"
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				break
			}
			switch sel.Sel.Name {
			case "Parallel":
				what = "marks a test parallel"
			case "Go":
				what = "starts a goroutine (Go)"
			case "AfterFunc":
				what = "starts a timer's goroutine (AfterFunc)"
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "httptest" {
				what = "starts a server (httptest)"
			}
		}
		return true
	})
	return what
}

// TestConcurrencyFindsEachKind shows the check tells each kind of concurrent work from code
// that has none, on sources written here.
func TestConcurrencyFindsEachKind(t *testing.T) {
	cases := map[string]string{
		"func f() { go g() }":                                          "starts a goroutine",
		"func f(t *testing.T) { t.Parallel() }":                        "marks a test parallel",
		"func f() { var wg sync.WaitGroup; wg.Go(g) }":                 "starts a goroutine (Go)",
		"func f() { s := httptest.NewServer(nil); _ = s }":             "starts a server (httptest)",
		"func f() { for i := range 3 { func() { go g() }(); _ = i } }": "starts a goroutine",
		"func f() { g(); x := []int{1}; _ = x }":                       "",
	}
	for src, want := range cases {
		f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package x\n"+src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := starts(f.Decls[0].(*ast.FuncDecl).Body); got != want {
			t.Errorf("%s: %q, want %q", src, got, want)
		}
	}
}

// TestConcurrencyRules runs the rules on a package written here: a helper with a goroutine, a
// test with one not named ...Concurrently, and code with one are refused; a ...Concurrently
// test and a goroutine in a command's function that no test names are not.
func TestConcurrencyRules(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", "package main\nfunc main() { go work() }\nfunc work() {}\nfunc spawn() { go work() }\nfunc run() { go work() }\n")
	write("main_test.go", `package main
import "testing"
func TestRunsConcurrently(t *testing.T) { go work() }
func TestRuns(t *testing.T) { t.Parallel() }
func helper() { go work() }
func TestSpawns(t *testing.T) { spawn() }
`)
	var got []string
	for _, err := range concurrency(t, dir) {
		msg := err.Error()
		got = append(got, msg[strings.LastIndex(msg, ".go:")+4:])
	}
	sort.Strings(got)
	want := []string{
		"4:1: spawn starts a goroutine, which the package's tests would run without the race detector",
		"4:1: TestRuns marks a test parallel: only a test named ...Concurrently may (scripts/test runs those under -race)",
		"5:1: helper starts a goroutine: only a test named ...Concurrently may (scripts/test runs those under -race)",
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("refused:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
