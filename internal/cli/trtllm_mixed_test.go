package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
)

// TestRunMixedVLLMAndTRTLLM runs "vllmstat run" against a driven simulated vLLM server of 2
// engines and 2 driven simulated TensorRT-LLM servers at once, the test sending each fleet its
// own batches: each kind's token and request keys are what its own answers' usage said, its hit
// rate its own simulator's, its ledger its own workers' (states adding up to its engine-seconds,
// at most its workers' worth of the step), and the summary line shows each kind's figures after
// its name, TensorRT-LLM's paused requests where vLLM's has preemptions.
func TestRunMixedVLLMAndTRTLLM(t *testing.T) {
	t.Parallel()
	vc := sim.DefaultConfig()
	vc.Servers, vc.DP, vc.Port, vc.Speed, vc.Seed = 1, 2, 0, 20, 31
	vc.Workload.Kind = sim.WorkloadNone
	vfleet, err := sim.Start(context.Background(), vc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vfleet.Close() })
	tfleet := trtllmFleet(t, 2, 32)
	var vbases, tbases []string
	args := []string{"--per-worker", "--interval", "0.1"}
	for _, u := range vfleet.URLs() {
		vbases = append(vbases, serverBase(t, u))
		args = append(args, "--target", u)
	}
	for _, u := range tfleet.URLs() {
		tbases = append(tbases, serverBase(t, u))
		args = append(args, "--target", u)
	}
	out := t.TempDir()
	l := startLive(t, out, args...)
	const steps = 2
	type sent struct {
		vllm, trtllm    received
		vbefore, vafter map[string]float64
		tbefore, tafter map[string]float64
	}
	plans := make([]sent, steps)
	phase := func(edge string) {
		t.Helper()
		if code, body := apiCall(t, "POST", l.api+"/v1/phases/"+edge, `{"phase": "rollout"}`, map[string]string{"Content-Type": "application/json"}); code != 200 {
			t.Fatalf("%s phase rollout: %d %s", edge, code, body)
		}
	}
	for k := range plans {
		p := &plans[k]
		// The phase's start scrapes every target: the run's first pages are in before the
		// first tokens, which vLLM counts as they are generated.
		phase("start")
		p.vbefore, p.tbefore = vfleet.Totals(), tfleet.Totals()
		p.vllm = openAIBatch(t, vbases, fmt.Sprintf("vllm step %d", k+1), 3, 4)
		p.trtllm = openAIBatch(t, tbases, fmt.Sprintf("trtllm step %d", k+1), 3, 4)
		p.vafter, p.tafter = vfleet.Totals(), tfleet.Totals()
		phase("end")
		l.endStep(k + 1)
	}
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}
	recs, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(recs) != steps {
		t.Fatalf("%d steps, want %d", len(recs), steps)
	}
	for k, r := range recs {
		p, n, m := plans[k], k+1, r.Metrics
		if r.Workers != 4 {
			t.Errorf("step %d: %d workers, want 2 vLLM engines and 2 TensorRT-LLM servers", n, r.Workers)
		}
		for prefix, u := range map[string]received{"vllm": p.vllm, "trtllm": p.trtllm} {
			for key, want := range map[string]int{"prompt_tokens": u.prompt, "generation_tokens": u.completion} {
				if got := m[prefix+"/"+key]; got != float64(want) || want == 0 {
					t.Errorf("step %d: %s/%s = %v, its fleet answered %d", n, prefix, key, got, want)
				}
			}
		}
		if got := m["trtllm/finished_requests"]; got != float64(p.trtllm.samples) {
			t.Errorf("step %d: trtllm/finished_requests = %v, its fleet answered %d samples", n, got, p.trtllm.samples)
		}
		delta := func(before, after map[string]float64, key string) float64 { return after[key] - before[key] }
		if got, want := m["vllm/prefix_cache_hit_rate"], delta(p.vbefore, p.vafter, "prefix_cache_hits")/delta(p.vbefore, p.vafter, "prefix_cache_queries"); got != want {
			t.Errorf("step %d: vllm/prefix_cache_hit_rate %v, its simulator's %v", n, got, want)
		}
		if got, want := m["trtllm/prefix_cache_hit_rate"], delta(p.tbefore, p.tafter, "prompt_cached_tokens")/delta(p.tbefore, p.tafter, "prompt_tokens"); got != want || want == 0 {
			t.Errorf("step %d: trtllm/prefix_cache_hit_rate %v, its simulator's %v", n, got, want)
		}
		for _, prefix := range []string{"vllm", "trtllm"} {
			var sum float64
			for s := range step.NumStates {
				sum += m[prefix+"/"+step.StateKey(s)]
			}
			engine := m[prefix+"/"+step.NameEngineTime]
			if engine <= 0 || sum < engine*(1-1e-9) || sum > engine*(1+1e-9) || engine > 2*r.DurationS {
				t.Errorf("step %d: %s's states add up to %v of its %v engine-s, its 2 workers' step %v s", n, prefix, sum, engine, r.DurationS)
			}
			if _, ok := m[prefix+"/generation_tokens_imbalance"]; !ok {
				t.Errorf("step %d has no %s/generation_tokens_imbalance: each kind's balance is over its own workers", n, prefix)
			}
		}
		for key := range m {
			if !strings.HasPrefix(key, "vllm/") && !strings.HasPrefix(key, "trtllm/") {
				t.Errorf("step %d has %s, of neither kind", n, key)
			}
		}
		checkSummaryLine(t, l.stderr.String(), r, "vLLM ", "vllm")
		// TensorRT-LLM's page counts no preemptions: the most requests paused at once in their place.
		want := fmt.Sprintf("TensorRT-LLM hit %.1f%% | paused %.0f | kv %.2f/%.2f", 100*m["trtllm/prefix_cache_hit_rate"],
			m["trtllm/num_paused_requests/max"], m["trtllm/kv_cache_usage_perc/mean"], m["trtllm/kv_cache_usage_perc/max"])
		if !strings.Contains(l.stderr.String(), want) {
			t.Errorf("step %d: the logs lack %q:\n%s", n, want, l.stderr.String())
		}
	}
}
