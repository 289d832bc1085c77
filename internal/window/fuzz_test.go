package window

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/testkit"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// FuzzObserve checks that a worker's identical scrapes never increase anything, whatever page
// they parse from. Its seeds are the pages package page fuzzes with (shared vLLM fixtures and
// its Ray fixture) and the corpus of its FuzzParsePage.
func FuzzObserve(f *testing.F) {
	for _, n := range []string{"prometheus-client-render-vllm-0.10.prom", "llm-d-inference-sim-dp1.prom"} {
		f.Add(testkit.ReadFixture(f, n))
	}
	ray, err := os.ReadFile("../page/testdata/ray-serve-llm-two-replicas.prom")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ray)
	const corpus = "../page/testdata/fuzz/FuzzParsePage/"
	entries, err := os.ReadDir(corpus)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(corpus + e.Name())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(corpusPage(f, e.Name(), string(b)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := page.ParsePage(b)
		if err != nil {
			return
		}
		w := NewWorker()
		for i := range p.Engines {
			w.Observe(&p.Engines[i], 0)
			w.Observe(&p.Engines[i], 0) // a second identical scrape never increases anything
			inc := w.Observe(&p.Engines[i], 0)
			for c, v := range inc.Counters {
				if v != 0 {
					t.Fatalf("identical scrape gave increase %v for %s", v, vllm.Counters[c].Name)
				}
			}
			for h, d := range inc.Hists {
				if d != nil && (d.Count != 0 || d.Sum != 0) {
					t.Fatalf("identical scrape gave increase %s for %s", fmtDelta(d), vllm.Hists[h].Name)
				}
			}
		}
	})
}

// corpusPage returns the page of a corpus file of go test's, which holds one []byte argument.
func corpusPage(f *testing.F, name, file string) []byte {
	s, ok := strings.CutPrefix(file, "go test fuzz v1\n[]byte(")
	if ok {
		s, ok = strings.CutSuffix(strings.TrimRight(s, "\n"), ")")
	}
	if ok {
		if q, err := strconv.Unquote(s); err == nil {
			return []byte(q)
		}
	}
	f.Fatalf("corpus file %s is not one []byte argument", name)
	return nil
}
