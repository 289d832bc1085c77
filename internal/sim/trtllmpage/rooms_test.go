package trtllmpage

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const simPkg = "github.com/vllmstat/vllmstat/internal/sim/"

// pageWriters are the simulator's rooms that write an engine's page (docs/simulator.md, "The
// simulator's rooms").
var pageWriters = []string{"vllmpage", "sglangpage", "routerpage", "trtllmpage"}

// importsOf returns the packages the non-test files of the simulator's room dir import.
func importsOf(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("room %s: no Go files (%v)", dir, err)
	}
	var imports []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, is := range af.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			if !slices.Contains(imports, p) {
				imports = append(imports, p)
			}
		}
	}
	return imports
}

// TestRooms: no page writer imports another's, and this one reads the model only through snap
// (with promtext to print and fleetconfig for the fleet's description), as the simulator's
// rooms are laid out.
func TestRooms(t *testing.T) {
	for _, dir := range pageWriters {
		if _, err := os.Stat(filepath.Join("..", dir)); err != nil {
			t.Fatalf("room %s: %v", dir, err)
		}
		for _, p := range importsOf(t, dir) {
			if other, ok := strings.CutPrefix(p, simPkg); ok && other != dir && slices.Contains(pageWriters, other) {
				t.Errorf("%s imports %s: a page writer imports no other's", dir, other)
			}
		}
	}
	allowed := []string{simPkg + "snap", simPkg + "promtext", simPkg + "fleetconfig"}
	for _, p := range importsOf(t, "trtllmpage") {
		if strings.HasPrefix(p, "github.com/vllmstat/") && !slices.Contains(allowed, p) {
			t.Errorf("trtllmpage imports %s: it reads the model through snap alone", p)
		}
	}
}
