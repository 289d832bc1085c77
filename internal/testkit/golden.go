package testkit

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata (and record again what a package's tests record)")

// Update reports whether the tests run with -update: golden files are to be written, not
// compared with.
func Update() bool { return *update }

// shortGolden is the size up to which a golden file that differs is shown whole; past it, only
// the first line that differs is.
const shortGolden = 8 << 10

// Golden compares got with testdata/name of the package under test, or writes got there under
// -update. A golden file stays beside the tests that write it.
func Golden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	if len(got) <= shortGolden && len(want) <= shortGolden {
		t.Errorf("%s differs from the golden file (run go test -update after checking):\ngot:\n%s\nwant:\n%s", path, got, want)
		return
	}
	line, g, w := firstDiff(got, want)
	t.Errorf("%s differs from the golden file at line %d (run go test -update after checking):\ngot  %.400s\nwant %.400s", path, line, g, w)
}

// firstDiff returns the number of the first line that differs between got and want, and that
// line of each ("<end of file>" where one has no such line).
func firstDiff(got, want []byte) (int, string, string) {
	gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	line := func(ls [][]byte, i int) string {
		if i >= len(ls) {
			return "<end of file>"
		}
		return string(ls[i])
	}
	i := 0
	for i < len(gl) && i < len(wl) && bytes.Equal(gl[i], wl[i]) {
		i++
	}
	return i + 1, line(gl, i), line(wl, i)
}
