package page

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

// readPage returns the fixture page name: one of this package's testdata, or, when it has none
// of that name, a shared fixture (testkit's). A page lives in one place only, so a name means
// one page.
func readPage(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if errors.Is(err, fs.ErrNotExist) {
		return testkit.ReadFixture(tb, name)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
