package step

import (
	"fmt"
	"testing"
)

// TestLoadingOverAsleep: a weight update on an engine whose weights are offloaded (vLLM's
// sleep state and resource states both say asleep) is loading_weights, the higher state; the
// next sample without the update is asleep again.
func TestLoadingOverAsleep(t *testing.T) {
	asleep := states(resources("paused", "offloaded", "released"), []string{
		`engine_sleep_state{sleep_state="awake"} 0`,
		`engine_sleep_state{sleep_state="weights_offloaded"} 1`,
		"engine_fully_awake 0",
	})
	tr := NewTracker(Options{PerWorker: true})
	observeText(t, tr, 0, vpage(0, 0, asleep...))
	observeText(t, tr, 1, vpage(0, 0, append(asleep, "rl_weight_update_active{} 1")...))
	observeText(t, tr, 2, vpage(0, 0, append(asleep, "rl_weight_update_active{} 0")...))
	r := tr.EndStep(1, at(2))
	secs := map[State]float64{LoadingWeights: 1, Asleep: 1}
	wantLedger(t, r.Metrics, "vllm", secs)
	wantLedger(t, r.PerWorker[0].Metrics, "vllm", secs)
}

// TestLoadOnFirstPageNotNew: SGLang's weight_load_duration_seconds on the first page that
// shows a worker tells a load that ended before vllmstat saw the worker: its first span (a DP
// rank that comes up after its target's first pages stands for the time since the target's
// previous scrape) is not re-booked as loading. A load that shows later is.
func TestLoadOnFirstPageNotNew(t *testing.T) {
	batches := 0.0 // a batch between every two pages: the ranks generate
	pg := func(loads ...string) string {
		batches++
		s := sglangPage(sgl{dp: "0", running: 1, decode: batches}, sgl{dp: "1", running: 1, decode: batches})
		if len(loads) == 0 {
			s = sglangPage(sgl{dp: "0", running: 1, decode: batches})
		}
		for i, l := range loads {
			s += fmt.Sprintf("sglang:weight_load_duration_seconds{dp_rank=\"%d\",engine_type=\"unified\",model_name=\"m\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\",source=\"distributed\"} %s\n", i, l)
		}
		return s
	}
	tr := NewTracker(Options{PerWorker: true})
	observeText(t, tr, 0, pg())
	observeText(t, tr, 1, pg())
	observeText(t, tr, 2, pg("0.5", "0.5"))  // rank 1's first page, a load of 0.5 s on both
	observeText(t, tr, 3, pg("0.5", "0.5"))  // the same loads
	observeText(t, tr, 4, pg("0.5", "0.25")) // rank 1 loads again: 0.25 s
	r := tr.EndStep(1, at(4))
	got := map[string]map[string]float64{}
	for _, w := range r.PerWorker {
		got[w.Labels["dp_rank"]] = w.Metrics
	}
	if len(got) != 3 || got["0"] == nil || got["1"] == nil {
		t.Fatalf("per_worker records by dp_rank %v, want the tokenizer's and DP ranks 0 and 1", got)
	}
	// Rank 0 was seen before the load showed: its 0.5 s are loading, from its span (1, 2].
	wantLedger(t, got["0"], "sglang", map[State]float64{Generating: 3.5, LoadingWeights: 0.5})
	// Rank 1's first span (1, 2] is generating whole; only its later load is loading.
	wantLedger(t, got["1"], "sglang", map[State]float64{Generating: 2.75, LoadingWeights: 0.25})
}
