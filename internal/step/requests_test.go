package step

import (
	"encoding/json"
	"math"
	"os"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// readFixturePage parses a page of testdata.
func readFixturePage(t *testing.T, name string) *page.Page {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := page.ParsePage(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

// The request shape and compute of a step, from pages rendered by prometheus_client from vLLM's
// declarations (testdata/vllm_requests.py, which also wrote what the step between the pages
// holds): the truncated and aborted shares of the finished requests, the prefill split, which
// adds up to the prompt tokens exactly, the recomputed tokens, the achieved FLOP/s and bytes
// per GPU with MFU and MBU of a named GPU, and the length and time quantiles, each in the
// bucket that holds the true quantile of the step's requests.
func TestRequestShapeAndCompute(t *testing.T) {
	var want struct {
		Values  map[string]float64
		Buckets map[string][2]float64
	}
	b, err := os.ReadFile("testdata/vllm-requests-want.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	h100, err := vllm.GPUPeak("H100")
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker(Options{Scalars: true, PerWorker: true, Peak: h100})
	t0 := time.Unix(2_000_000_000, 0) // after the pages' _created
	tr.Begin(t0)
	tr.Observe(t0, "v", readFixturePage(t, "vllm-requests-a.prom"), nil)
	tr.Observe(t0.Add(time.Second), "v", readFixturePage(t, "vllm-requests-b.prom"), nil)
	r := tr.EndStep(1, t0.Add(2*time.Second))
	want.Values["vllm/mfu"] = want.Values["vllm/achieved_tflops_per_gpu"] / h100.TFLOPS
	want.Values["vllm/mbu"] = (want.Values["vllm/achieved_read_gbps_per_gpu"] + want.Values["vllm/achieved_write_gbps_per_gpu"]) / h100.GBps
	for k, v := range want.Values {
		if got, ok := r.Metrics[k]; !ok || math.Abs(got-v) > 1e-9*math.Max(1, math.Abs(v)) {
			t.Errorf("%s = %v (%v), want %v", k, got, ok, v)
		}
	}
	for k, in := range want.Buckets {
		if got, ok := r.Metrics[k]; !ok || got < in[0] || got > in[1] {
			t.Errorf("%s = %v (%v), want in the bucket (%v, %v]", k, got, ok, in[0], in[1])
		}
	}
	m := r.Metrics
	if sum := m["vllm/prompt_tokens_computed"] + m["vllm/prompt_tokens_cached"] + m["vllm/prompt_tokens_transferred"]; sum != m["vllm/prompt_tokens"] {
		t.Errorf("prefill split adds up to %v, prompt tokens %v", sum, m["vllm/prompt_tokens"])
	}
	// Each engine's own record: its compute is its GPU's.
	for _, w := range r.PerWorker {
		if _, ok := w.Metrics["vllm/achieved_tflops_per_gpu"]; !ok {
			t.Errorf("worker %s/%s: no achieved_tflops_per_gpu", w.Target, w.Engine)
		}
	}
}

// Without a GPU's peak no share of it is made, and a page without the compute counters gets no
// compute key.
func TestComputeKeysNeedTheirFamilies(t *testing.T) {
	tr := NewTracker(Options{})
	t0 := time.Unix(2_000_000_000, 0) // after the pages' _created
	tr.Begin(t0)
	tr.Observe(t0, "v", readFixturePage(t, "vllm-requests-a.prom"), nil)
	tr.Observe(t0, "w", mustPage(t, eng{engine: "0", gen: 1}), nil)
	tr.Observe(t0.Add(time.Second), "v", readFixturePage(t, "vllm-requests-b.prom"), nil)
	tr.Observe(t0.Add(time.Second), "w", mustPage(t, eng{engine: "0", gen: 5}), nil)
	r := tr.EndStep(1, t0.Add(2*time.Second))
	for _, name := range []string{NameMFU, NameMBU, NameMFUGenerating} {
		if v, ok := r.Metrics["vllm/"+name]; ok {
			t.Errorf("%s = %v without a peak", name, v)
		}
	}
	// the engine without the counters is no GPU of the mean
	if got := r.Metrics["vllm/achieved_tflops_per_gpu"]; got != 450 {
		t.Errorf("achieved_tflops_per_gpu = %v, want 450", got)
	}
	for _, w := range r.PerWorker {
		if w.Target == "w" {
			if _, ok := w.Metrics["vllm/achieved_tflops_per_gpu"]; ok {
				t.Errorf("a worker without the counters has compute keys")
			}
		}
	}
}
