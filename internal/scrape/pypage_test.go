package scrape

import (
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPythonPageKnowsTheQuery checks the Python client's page (expose(), whose page is
// clients/python/vllmstat/page.py) against the queries a scrape sends a vLLM page and a
// TensorRT-LLM page: the page
// renders a restricted request itself only when every name asked for is in its list, so the
// list must hold every name[] value of that query, and nothing else.
func TestPythonPageKnowsTheQuery(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		msg := "SKIPPED: needs " + python + ": " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// the package imports only the standard library until a page is served
	cmd := exec.Command(python, "-c", `import sys
sys.path.insert(0, "../../clients/python")
from vllmstat import page
print("\n".join(sorted(page._ASKED)))`)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))

	// A vLLM page's query and a TensorRT-LLM page's (vllmstat.trtllm.instrument serves one).
	var want []string
	for _, spelling := range []string{"vllm:", "trtllm_"} {
		ns := slices.Index(queryNamespaces, spelling)
		q, err := url.ParseQuery(readNames().query(nsMask(1) << ns))
		if err != nil {
			t.Fatal(err)
		}
		if len(q["name[]"]) < 40 {
			t.Fatalf("the query asks a %s page for %d names, want its dozens", spelling, len(q["name[]"]))
		}
		want = append(want, q["name[]"]...)
	}
	slices.Sort(want)
	for _, n := range want {
		if _, found := slices.BinarySearch(got, n); !found {
			t.Errorf("the query asks for %s; the Python page's list lacks it", n)
		}
	}
	for _, n := range got {
		if _, found := slices.BinarySearch(want, n); !found {
			t.Errorf("the Python page's list has %s; the query does not ask for it", n)
		}
	}
}
