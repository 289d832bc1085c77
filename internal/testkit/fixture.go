package testkit

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// fixtureDir is the folder of the shared fixtures: testdata beside this file, wherever the test
// runs from.
func fixtureDir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		t.Fatalf("cannot find the shared fixtures: the test binary does not know testkit's source path %q (built with -trimpath?)", file)
	}
	return filepath.Join(filepath.Dir(file), "testdata")
}

// Fixture returns the path of the shared fixture name, a file of testkit's testdata folder. A
// fixture that several packages read lives there once; what one package alone reads, and the
// golden files a package writes, stay in that package's testdata.
func Fixture(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join(fixtureDir(t), name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("shared fixture: %v", err)
	}
	return path
}

// ReadFixture returns the content of the shared fixture name.
func ReadFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(Fixture(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Fixtures returns the paths of the shared fixtures whose names match pattern (as in
// filepath.Match), in lexical order; none is an error.
func Fixtures(t testing.TB, pattern string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(fixtureDir(t), pattern))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no shared fixture matches %q: %v", pattern, err)
	}
	return paths
}
