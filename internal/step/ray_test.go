package step

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
)

// rayStep feeds the tracker two scrapes of the Ray fixture (two Ray Serve LLM replicas on one
// node, both engine="0") parsed with the worker labels wl, and closes the step.
func rayStep(t *testing.T, wl []string) Record {
	t.Helper()
	tr := NewTracker(Options{PerWorker: true, Scalars: true})
	for i, name := range []string{"ray-serve-llm-two-replicas.prom", "ray-serve-llm-two-replicas-next.prom"} {
		body, err := os.ReadFile("../page/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := page.ParsePageOptions(body, page.Options{WorkerLabels: wl})
		if err != nil {
			t.Fatal(err)
		}
		tr.Observe(at(float64(1+2*i)), target, p, nil)
	}
	return tr.EndStep(1, at(4))
}

// rayTotals are the step's totals over both replicas: what the second scrape adds to the first.
var rayTotals = map[string]float64{
	"vllm/prefix_cache_queries":             4096 + 8192,
	"vllm/prefix_cache_hits":                2048 + 1024,
	"vllm/prefix_cache_hit_rate":            (2048 + 1024) / (4096 + 8192.0),
	"vllm/num_preemptions":                  1 + 4,
	"vllm/prompt_tokens":                    5000 + 9000,
	"vllm/generation_tokens":                1500 + 2500,
	"vllm/generation_tokens_per_s":          (1500 + 2500) / 3.0,
	"vllm/request_success/stop":             12 + 20,
	"vllm/request_success/length":           1,
	"vllm/request_success/abort":            0 + 2,
	"vllm/time_to_first_token_seconds/mean": (3.5 + 6.5) / (13 + 22.0),
}

func TestRayReplicasPerWorkerAndStep(t *testing.T) {
	r := rayStep(t, nil)
	if r.Workers != 2 || r.Scrapes.OK != 2 {
		t.Fatalf("workers %d scrapes %+v, want 2 workers (the replicas) and 2 scrapes", r.Workers, r.Scrapes)
	}
	for k, v := range rayTotals {
		want(t, r.Metrics, k, v)
	}
	// Per-interval samples stay per replica: the largest running count is one replica's.
	want(t, r.Metrics, "vllm/num_requests_running/max", 6)
	perWorker := []struct {
		labels            map[string]string
		queries, preempt  float64
		running, abort    float64
		stop, promptToken float64
	}{
		{map[string]string{"ReplicaId": "k7qz2m1d", "WorkerId": "5f1c0a9e3b7d2c4e8a6f0b1d3c5e7a9b2d4f6a8c0e1b3d5f7a9c2e4b"}, 4096, 1, 4, 0, 12, 5000},
		{map[string]string{"ReplicaId": "p3xw9c4e", "WorkerId": "a2e4c6b8d0f1a3c5e7b9d2f4a6c8e0b1d3f5a7c9e2b4d6f8a0c1e3b5"}, 8192, 4, 6, 2, 20, 9000},
	}
	if len(r.PerWorker) != 2 {
		t.Fatalf("per_worker %d records, want 2", len(r.PerWorker))
	}
	for i, w := range perWorker {
		got := r.PerWorker[i]
		if got.Target != target || got.Engine != "0" || !maps.Equal(got.Labels, w.labels) {
			t.Fatalf("per_worker[%d] is %s #%s %v, want %s #0 %v", i, got.Target, got.Engine, got.Labels, target, w.labels)
		}
		want(t, got.Metrics, "vllm/prefix_cache_queries", w.queries)
		want(t, got.Metrics, "vllm/num_preemptions", w.preempt)
		want(t, got.Metrics, "vllm/num_requests_running/max", w.running)
		want(t, got.Metrics, "vllm/request_success/abort", w.abort)
		want(t, got.Metrics, "vllm/request_success/stop", w.stop)
		want(t, got.Metrics, "vllm/prompt_tokens", w.promptToken)
	}
	b, err := MarshalLine(&r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"engine":"0","labels":{"ReplicaId":"k7qz2m1d","WorkerId":"5f1c0a9e3b7d2c4e8a6f0b1d3c5e7a9b2d4f6a8c0e1b3d5f7a9c2e4b"},"metrics":{`) {
		t.Errorf("record line lacks the first replica's labels beside its engine:\n%s", b)
	}
	// Each replica has a timeline of its own.
	if len(r.Timeline.Workers) != 2 {
		t.Fatalf("timeline workers %d, want 2", len(r.Timeline.Workers))
	}
	for i, running := range [][]float64{{3, 4}, {5, 6}} {
		w := r.Timeline.Workers[i]
		if !maps.Equal(w.LabelMap(), perWorker[i].labels) {
			t.Errorf("timeline worker %d labels %v, want %v", i, w.LabelMap(), perWorker[i].labels)
		}
		if got := values(w.Series["num_requests_running"]); !slices.Equal(got, running) {
			t.Errorf("timeline worker %d running %v, want %v", i, got, running)
		}
	}
}

// TestRayReplicasMergedWithoutWorkerLabels: with no worker labels the replicas are one worker,
// as before worker labels existed; the step totals are the same, counted once.
func TestRayReplicasMergedWithoutWorkerLabels(t *testing.T) {
	r := rayStep(t, []string{})
	if r.Workers != 1 {
		t.Fatalf("workers %d, want 1", r.Workers)
	}
	for k, v := range rayTotals {
		want(t, r.Metrics, k, v)
	}
	want(t, r.Metrics, "vllm/num_requests_running/max", 10) // both replicas' running, added up
	if len(r.PerWorker) != 1 || r.PerWorker[0].Labels != nil {
		t.Fatalf("per_worker %+v, want one worker without labels", r.PerWorker)
	}
	b, err := MarshalLine(&r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"labels"`) {
		t.Errorf("a worker without worker labels has a labels key:\n%s", b)
	}
}

func values(ps []Point) []float64 {
	var vs []float64
	for _, p := range ps {
		vs = append(vs, p.Value)
	}
	return vs
}
