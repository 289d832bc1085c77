package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The release wheels' platforms, as the Python package's build backend lists them (PLATFORMS):
// each pair is a GOOS and a GOARCH.
var backendPlatform = regexp.MustCompile(`\(\s*"(\w+)"\s*,\s*"(\w+)"\s*\)\s*:`)

func releasePlatforms(t *testing.T) [][2]string {
	t.Helper()
	src, err := os.ReadFile("../../clients/python/backend/vllmstat_backend.py")
	if err != nil {
		t.Fatal(err)
	}
	_, dict, ok := strings.Cut(string(src), "\nPLATFORMS = {")
	if !ok {
		t.Fatal("vllmstat_backend.py has no PLATFORMS dict")
	}
	dict, _, _ = strings.Cut(dict, "\n}")
	var ps [][2]string
	for _, m := range backendPlatform.FindAllStringSubmatch(dict, -1) {
		ps = append(ps, [2]string{m[1], m[2]})
	}
	if len(ps) < 2 {
		t.Fatalf("read %d platforms from vllmstat_backend.py's PLATFORMS", len(ps))
	}
	return ps
}

// TestTypeChecksForEveryReleasePlatform type-checks the binary's code as it builds for each
// platform a release wheel holds: the files each platform's build constraints select (flock
// and peek differ between Linux and macOS, and syscall's fields differ further), with
// CGO_ENABLED=0 as the wheels are built. Compiling the binary for another platform compiles
// the standard library and every dependency anew, minutes of CPU on a fresh machine;
// type-checking from source takes seconds, and catches what a build on another platform would
// refuse in vllmstat's own code (a name, field or constant the platform lacks). Dependencies
// are checked by their declarations only: they build for these platforms by their own tests.
// scripts/wheels compiles all four, as a release does.
func TestTypeChecksForEveryReleasePlatform(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list the packages with")
	}
	files := newParsed()
	for _, p := range releasePlatforms(t) {
		t.Run(p[0]+"_"+p[1], func(t *testing.T) {
			for _, err := range typeCheck(t, files, p[0], p[1], ".", ".") {
				t.Error(err)
			}
		})
	}
}

// listed is what go list says of one package.
type listed struct {
	ImportPath, Dir string
	GoFiles         []string
	ImportMap       map[string]string // vendored or replaced paths
	Module          *struct{ Main bool }
	Error           *struct{ Err string }
}

// typeCheck type-checks pattern (in the module of dir) and the packages it depends on, as they
// build for goos/goarch, and returns the errors of the module's own packages.
func typeCheck(t *testing.T, parsed *parsed, goos, goarch, dir, pattern string) []error {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-e", "-json=ImportPath,Dir,GoFiles,ImportMap,Module,Error", pattern)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list for %s/%s: %v: %s", goos, goarch, err, stderr.Bytes())
	}
	checked := map[string]*types.Package{}
	var errs []error
	// go list -deps lists every package after the packages it imports.
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.ImportPath == "unsafe" {
			continue
		}
		own := p.Module != nil && p.Module.Main
		if p.Error != nil {
			errs = append(errs, fmt.Errorf("%s for %s/%s: %s", p.ImportPath, goos, goarch, p.Error.Err))
			continue
		}
		files := make([]*ast.File, 0, len(p.GoFiles))
		for _, name := range p.GoFiles {
			files = append(files, parsed.file(t, filepath.Join(p.Dir, name)))
		}
		var first error
		conf := types.Config{
			Importer:         imports{checked, p.ImportMap},
			Sizes:            types.SizesFor("gc", goarch),
			IgnoreFuncBodies: !own,
			Error: func(err error) {
				if first == nil {
					first = err
				}
			},
		}
		checked[p.ImportPath], _ = conf.Check(p.ImportPath, parsed.fset, files, nil)
		if first != nil && (own || len(errs) == 0) {
			errs = append(errs, fmt.Errorf("%s for %s/%s: %w", p.ImportPath, goos, goarch, first))
		}
	}
	return errs
}

// parsed holds the files parsed for one platform's check, for the next: most files are in every
// platform's build, and parsing is a third of the check's time.
type parsed struct {
	fset  *token.FileSet
	files map[string]*ast.File
}

func newParsed() *parsed { return &parsed{fset: token.NewFileSet(), files: map[string]*ast.File{}} }

func (p *parsed) file(t *testing.T, path string) *ast.File {
	f := p.files[path]
	if f == nil {
		var err error
		if f, err = parser.ParseFile(p.fset, path, nil, parser.SkipObjectResolution); err != nil {
			t.Fatal(err)
		}
		p.files[path] = f
	}
	return f
}

// imports hands the type checker the packages checked before, under the paths their importer
// names them by.
type imports struct {
	checked map[string]*types.Package
	mapped  map[string]string
}

func (im imports) Import(path string) (*types.Package, error) {
	if path == "unsafe" {
		return types.Unsafe, nil
	}
	if p, ok := im.mapped[path]; ok {
		path = p
	}
	if p := im.checked[path]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%s was not listed before its importer", path)
}

// TestTypeCheckFindsAPlatformsMissingField checks that the type check above tells platforms
// apart: a package that sets a Linux-only field of syscall.SysProcAttr passes for Linux and is
// refused for macOS.
func TestTypeCheckFindsAPlatformsMissingField(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list the packages with")
	}
	files := newParsed()
	if errs := typeCheck(t, files, "linux", "arm64", "testdata/linuxonly", "."); len(errs) != 0 {
		t.Errorf("linux/arm64: %v", errs)
	}
	errs := typeCheck(t, files, "darwin", "arm64", "testdata/linuxonly", ".")
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "Pdeathsig") {
		t.Errorf("darwin/arm64: got %v, want Pdeathsig refused", errs)
	}
}
