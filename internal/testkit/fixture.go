package testkit

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// fixtureDir is the folder of the shared fixtures: testdata beside this file, wherever the test
// runs from. A test binary built with -trimpath knows this file only by its import path; go test
// runs a package's tests in the package's folder, so the folder is then found above it.
func fixtureDir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if ok && filepath.IsAbs(file) {
		return filepath.Join(filepath.Dir(file), "testdata")
	}
	if dir, err := os.Getwd(); err == nil {
		for ; ; dir = filepath.Dir(dir) {
			d := filepath.Join(dir, "internal", "testkit", "testdata")
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				return d
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	t.Fatalf("cannot find the shared fixtures: the test binary knows testkit's source only as %q (built with -trimpath), and no internal/testkit/testdata is above the working directory", file)
	return ""
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
