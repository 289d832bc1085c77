package step

import (
	"fmt"
	"testing"
)

// TestPrefillSplitMixedFleet: engine 0 exports prompt_tokens_by_source (vLLM 0.16 on), engine 1
// only prompt_tokens (vLLM 0.10). The fleet's parts would cover engine 0's prompt tokens alone:
// the step's and the phase's prompt_tokens_computed, _cached and _transferred are absent, while
// each worker's record keeps its own parts, which add up to its own prompt_tokens. A fleet
// whose every engine has the family keeps its parts, adding up to its prompt tokens.
func TestPrefillSplitMixedFleet(t *testing.T) {
	pg := func(i float64, both bool) string {
		s := renderPage(eng{engine: "0", prompt: 100 * i}, eng{engine: "1", prompt: 60 * i})
		srcs := map[string]float64{"local_compute": 70 * i, "local_cache_hit": 20 * i, "external_kv_transfer": 10 * i}
		for _, e := range []string{"0", "1"} {
			if e == "1" && !both {
				continue
			}
			k := 1.0
			if e == "1" {
				k = 0.6
			}
			for src, v := range srcs {
				s += fmt.Sprintf("vllm:prompt_tokens_by_source_total{engine=%q,model_name=\"m\",source=%q} %v\n", e, src, k*v)
			}
		}
		return s
	}
	parts := []string{"vllm/prompt_tokens_computed", "vllm/prompt_tokens_cached", "vllm/prompt_tokens_transferred"}
	tr := NewTracker(Options{PerWorker: true})
	observeText(t, tr, 0, pg(0, false))
	tr.StartPhase("rollout", at(0))
	observeText(t, tr, 1, pg(1, false))
	observeText(t, tr, 2, pg(2, false))
	r := tr.EndStep(1, at(2))
	want(t, r.Metrics, "vllm/prompt_tokens", 320)
	for _, m := range []map[string]float64{r.Metrics, r.Phases["rollout"].Metrics} {
		for _, k := range parts {
			absent(t, m, k)
		}
	}
	w0 := r.PerWorker[0].Metrics
	want(t, w0, "vllm/prompt_tokens_computed", 140)
	want(t, w0, "vllm/prompt_tokens_cached", 40)
	want(t, w0, "vllm/prompt_tokens_transferred", 20)
	want(t, w0, "vllm/prompt_tokens", 200)
	for _, k := range parts {
		absent(t, r.PerWorker[1].Metrics, k)
	}

	// Both engines with the family: the fleet's parts add up to its prompt tokens.
	tr = NewTracker(Options{})
	observeText(t, tr, 0, pg(0, true))
	observeText(t, tr, 1, pg(1, true))
	r = tr.EndStep(1, at(1))
	want(t, r.Metrics, "vllm/prompt_tokens_computed", 112)
	want(t, r.Metrics, "vllm/prompt_tokens_cached", 32)
	want(t, r.Metrics, "vllm/prompt_tokens_transferred", 16)
	want(t, r.Metrics, "vllm/prompt_tokens", 160)
}
