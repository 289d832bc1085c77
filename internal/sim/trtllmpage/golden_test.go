package trtllmpage

import (
	"os"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// goldenState is the scenario of testdata/render.py as the engine model counts it: a request
// scheduled as it arrived finishes with reason stop (log 1), its iteration is logged (log 2), a
// second request finishes with reason length after one output token and a wait in the queue
// (log 3), its iteration is logged (log 4).
func goldenState() snap.PageState {
	var t snap.TrtllmStats
	b := &snap.TrtllmBuckets
	t.Success[snap.TrtllmStop], t.Success[snap.TrtllmLength] = 1, 1
	t.First.Reason[snap.TrtllmStop], t.First.Reason[snap.TrtllmLength] = 1, 3
	t.Prompt, t.Generation, t.Cached = 150, 22, 64
	t.E2e.Observe(b.Phase, 1.5)
	t.E2e.Observe(b.Phase, 0.5)
	t.Ttft.Observe(b.Ttft, 0.25)
	t.Ttft.Observe(b.Ttft, 0.5)
	t.Tpot.Observe(b.Tpot, 0.0625)
	t.Queue.Observe(b.Phase, 0)
	t.Queue.Observe(b.Phase, 0.125)
	t.Prefill.Observe(b.Prefill, 0.25)
	t.Prefill.Observe(b.Prefill, 0.375)
	t.Decode.Observe(b.Phase, 1.25)
	t.Inference.Observe(b.Phase, 1.5)
	t.Inference.Observe(b.Phase, 0.375)
	t.CachedPerRequest.Observe(b.CachedTokens, 64)
	t.CachedPerRequest.Observe(b.CachedTokens, 0)
	t.PrefillBatchTokens.Observe(b.BatchTokens, 36)
	t.Completed = 2
	t.Logged = snap.TrtllmIteration{Active: 2, Queued: 0, Latency: 0.01, UsedBlocks: 12, ReusedBlocks: 4, MissedBlocks: 10,
		Context: 0, Generation: 2, Paused: 1, ContextTokens: 0}
	f := &t.First
	f.Logs = 4
	f.Prompt, f.Generation, f.CachedPerRequest, f.E2e, f.Ttft, f.Tpot, f.Queue, f.Prefill, f.Decode, f.Inference = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
	f.Iteration, f.Completed, f.Reused, f.Missed, f.PrefillBatchTokens = 2, 2, 2, 2, 2
	return snap.PageState{Engines: []snap.EngineStats{{Trt: t}}, Epoch: 1, Speed: 1}
}

// TestPageMatchesPrometheusClient renders the scenario of testdata/render.py and compares it
// byte for byte with the page prometheus_client's multiprocess collector renders from
// TensorRT-LLM's declarations and logging rules for it (testdata/prometheus-client-render-
// trtllm.prom): families in the order their first child was made, file by file, HELP and TYPE,
// sorted labels with pid on the gauges, no _created samples, each histogram's _sum before its
// buckets and _count, numbers as prometheus_client prints them. The first request's queue
// time of 0 is observed: request_queue_time_seconds is a family of log 1.
func TestPageMatchesPrometheusClient(t *testing.T) {
	want, err := os.ReadFile("testdata/prometheus-client-render-trtllm.prom")
	if err != nil {
		t.Fatal(err)
	}
	cfg := trtllmConfig()
	cfg.MaxNumSeqs = 48
	st := goldenState()
	got := string(NewTRTLLMPageWriter(cfg).Render(nil, &st))
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			t.Fatalf("line %d:\n got %s\nwant %s", i+1, gl[i], wl[i])
		}
	}
	t.Fatalf("the page has %d lines, prometheus_client's %d", len(gl), len(wl))
}
