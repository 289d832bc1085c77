package collector

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// rayServer answers the Ray fixture's first page (two Ray Serve LLM replicas, both engine="0")
// once, then its second page.
func rayServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var pages [2][]byte
	for i, name := range []string{"ray-serve-llm-two-replicas.prom", "ray-serve-llm-two-replicas-next.prom"} {
		b, err := os.ReadFile("../page/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		pages[i] = b
	}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(pages[min(n.Add(1)-1, 1)])
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestWorkerLabelsReachTheScrapes: the collector's worker labels decide whether the replicas
// are two workers (the default) or one, and either way the step counts each increase once.
func TestWorkerLabelsReachTheScrapes(t *testing.T) {
	for _, tt := range []struct {
		name    string
		labels  []string
		workers int
	}{{"default", nil, 2}, {"none", []string{}, 1}, {"ReplicaId", []string{"ReplicaId"}, 2}} {
		t.Run(tt.name, func(t *testing.T) {
			srv, n := rayServer(t)
			c, _, stop := start(t, Options{Options: scrape.Options{WorkerLabels: tt.labels}, Targets: targets(srv.URL), NoFinalStep: true})
			testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return n.Load() == 1 })
			r, err := c.EndStep(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if r.Workers != tt.workers || r.Metrics["vllm/prefix_cache_queries"] != 4096+8192 || r.Metrics["vllm/num_preemptions"] != 1+4 {
				t.Fatalf("workers %d, queries %v, preemptions %v; want %d, %d, 5", r.Workers,
					r.Metrics["vllm/prefix_cache_queries"], r.Metrics["vllm/num_preemptions"], tt.workers, 4096+8192)
			}
		})
	}
}
