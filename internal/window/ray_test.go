package window

import (
	"maps"
	"os"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// loadPage parses one of package page's fixtures.
func loadPage(t *testing.T, name string) *page.Page {
	t.Helper()
	b, err := os.ReadFile("../page/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := page.ParsePage(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

// rayIncreases is what each of the two Ray Serve LLM replicas of package page's Ray fixture
// (both engine="0", told apart by their worker labels) gains from its first scrape to the next.
var rayIncreases = map[string]struct {
	queries, hits float64
	preempt       float64
	success       map[string]float64
	ttftCount     float64
	ttftSum       float64
}{
	`ReplicaId="k7qz2m1d",WorkerId="5f1c0a9e3b7d2c4e8a6f0b1d3c5e7a9b2d4f6a8c0e1b3d5f7a9c2e4b"`: {4096, 2048, 1, map[string]float64{"stop": 12, "length": 1, "abort": 0}, 13, 3.5},
	// B's preemption and abort series appear only on the second scrape (Ray's counters appear
	// at their first non-zero increment): all of their value is new.
	`ReplicaId="p3xw9c4e",WorkerId="a2e4c6b8d0f1a3c5e7b9d2f4a6c8e0b1d3f5a7c9e2b4d6f8a0c1e3b5"`: {8192, 1024, 4, map[string]float64{"stop": 20, "length": 0, "abort": 2}, 22, 6.5},
}

func TestRayReplicaIncreases(t *testing.T) {
	first, next := loadPage(t, "ray-serve-llm-two-replicas.prom"), loadPage(t, "ray-serve-llm-two-replicas-next.prom")
	if len(first.Engines) != len(rayIncreases) || len(next.Engines) != len(rayIncreases) {
		t.Fatalf("workers %d then %d, want %d", len(first.Engines), len(next.Engines), len(rayIncreases))
	}
	for i := range first.Engines {
		a, b := &first.Engines[i], &next.Engines[i]
		if a.Labels != b.Labels {
			t.Fatalf("worker %d: labels %s then %s", i, a.Labels, b.Labels)
		}
		w, ok := rayIncreases[a.Labels]
		if !ok {
			t.Fatalf("worker %d: labels %s, not a replica of the fixture", i, a.Labels)
		}
		wk := NewWorker()
		if inc := wk.Observe(a, 0); inc.Counters != ([vllm.NumCounters]float64{}) {
			t.Errorf("%s: first scrape (a baseline) gave %v", a.Labels, inc.Counters)
		}
		inc := wk.Observe(b, 0)
		if inc.Counters[vllm.PrefixQueries] != w.queries || inc.Counters[vllm.PrefixHits] != w.hits || inc.Counters[vllm.Preemptions] != w.preempt {
			t.Errorf("%s: queries %v hits %v preemptions %v, want %v %v %v", a.Labels,
				inc.Counters[vllm.PrefixQueries], inc.Counters[vllm.PrefixHits], inc.Counters[vllm.Preemptions], w.queries, w.hits, w.preempt)
		}
		if !maps.Equal(inc.Success(), w.success) {
			t.Errorf("%s: request_success %v, want %v", a.Labels, inc.Success(), w.success)
		}
		if h := inc.Hists[vllm.TTFT]; h == nil || h.Count != w.ttftCount || h.Sum != w.ttftSum {
			t.Errorf("%s: ttft increase %+v, want count %v sum %v", a.Labels, h, w.ttftCount, w.ttftSum)
		}
	}
}
