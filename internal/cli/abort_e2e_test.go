package cli

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
)

// TestAbortsAgainstSimulator runs "vllmstat run" against simulated fleets whose trainer aborts a
// third of its requests partway through their output, ending a step at the end of each GRPO
// batch. vLLM counts an aborted request in prompt_tokens and generation_tokens only, never in
// request_success or a per-request histogram, so a share of aborted requests would read 0
// whatever was aborted: no step has aborted_fraction. What is exact is the prompt tokens of the
// requests that did not finish, prompt_tokens less request_prompt_tokens' sum, where no
// request was in flight at either end of the step: the second step, from the end of the first
// batch to the end of the second, has them, equal to the simulator's own count, and the first
// has them only if its first scrape came before the first batch. SGLang counts aborts itself
// (num_aborted_requests), and its prompt tokens at a request's finish, aborted ones included.
func TestAbortsAgainstSimulator(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{sim.EngineVLLM, sim.EngineSGLang} {
		t.Run(engine, func(t *testing.T) {
			sc := sim.DefaultConfig()
			sc.Engine = engine
			sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = 1, 2, 0, 10, 11
			sc.Workload.Prompts, sc.Workload.Samples = 8, 8
			sc.Workload.Batches = 2
			sc.WaitForDriver = true // each batch's end waits for its step's end
			sc.Workload.Abort = 0.3
			// The fleet starts once the run has made its first scrapes (endStepsAtBatches), so
			// step 1 counts every abort; the checks below still allow it fewer, as they did when a
			// loaded machine's first scrape could come after the first batch's first aborts.
			recs, atBatch := runBatchSteps(t, sc)
			for i, r := range recs[:2] {
				delta := batchDelta(atBatch, i)
				if !(delta("requests_aborted") > 0) {
					t.Fatalf("step %d: the simulator aborted no request", r.Step)
				}
				for k := range r.Metrics {
					if filepath.Base(k) == "aborted_fraction" {
						t.Errorf("step %d has %s = %v, a share of aborts the engine did not count", r.Step, k, r.Metrics[k])
					}
				}
				got, has := r.Metrics["vllm/aborted_prompt_tokens"]
				if engine == sim.EngineSGLang {
					if has {
						t.Errorf("step %d: an SGLang fleet has vllm/aborted_prompt_tokens %v", r.Step, got)
					}
					if got, want := r.Metrics["sglang/num_aborted_requests"], delta("num_aborted_requests"); got != want && !(i == 0 && got < want) {
						t.Errorf("step %d: sglang/num_aborted_requests = %v, the simulator counted %v", r.Step, got, want)
					}
					continue
				}
				want := delta("aborted_prompt_tokens")
				switch {
				case !has && i == 0:
					t.Logf("step 1 has no aborted_prompt_tokens: its first scrape came after the first batch began")
				case !has:
					t.Errorf("step %d has no vllm/aborted_prompt_tokens; the simulator's aborted requests had %v prompt tokens", r.Step, want)
				case i == 0 && got < want:
					t.Logf("step 1 has %v of the aborted requests' %v prompt tokens: its first scrape came after the first aborts", got, want)
				case got != want:
					t.Errorf("step %d: vllm/aborted_prompt_tokens = %v, the simulator's aborted requests had %v", r.Step, got, want)
				}
				var perWorker float64
				for _, w := range r.PerWorker {
					perWorker += w.Metrics["vllm/aborted_prompt_tokens"]
				}
				if has && perWorker != got {
					t.Errorf("step %d: the workers' aborted_prompt_tokens add up to %v, the fleet's is %v", r.Step, perWorker, got)
				}
			}
		})
	}
}

// runBatchSteps runs "vllmstat run" against a simulated fleet of sc, whose GRPO workload must run
// 2 batches, ending a step at the end of each; it returns the run's steps and the simulator's
// Totals at each batch's end.
func runBatchSteps(t *testing.T, sc sim.Config) ([]step.Record, []map[string]float64) {
	t.Helper()
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	out := t.TempDir()
	l := startLive(t, out, "--target", fleet.URLs()[0], "--per-worker", "--interval", "0.2")
	atBatch := l.endStepsAtBatches(fleet, 2) // the totals as the pages show each batch's end
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}
	recs, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(recs) < 2 {
		t.Fatalf("%d steps, want at least 2", len(recs))
	}
	return recs[:2], atBatch
}

// batchDelta is the increase of a Totals key over batch i.
func batchDelta(atBatch []map[string]float64, i int) func(string) float64 {
	return func(key string) float64 {
		d := atBatch[i][key]
		if i > 0 {
			d -= atBatch[i-1][key]
		}
		return d
	}
}

// TestMaxTokensAgainstSimulator runs "vllmstat run" against a simulated vLLM fleet whose
// requests ask for max_tokens 300 and whose client aborts some, ending a step at the end of each
// GRPO batch. Each step has the max_tokens its finished requests asked for
// (request_params_max_tokens: its mean is the simulator's) beside their generated lengths, and
// the share of that budget they used, their generated tokens over their max_tokens, equal to
// the simulator's; request_max_num_generation_tokens, the longest generation of a request's
// samples, has the mean of the generated lengths, each request being one sample.
func TestMaxTokensAgainstSimulator(t *testing.T) {
	t.Parallel()
	sc := sim.DefaultConfig()
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = 1, 2, 0, 10, 13
	sc.Workload.Prompts, sc.Workload.Samples = 8, 8
	sc.Workload.Batches = 2
	sc.WaitForDriver = true // each batch's end waits for its step's end
	sc.Workload.MaxTokens = 300
	sc.Workload.Abort = 0.2
	recs, atBatch := runBatchSteps(t, sc)
	for i, r := range recs {
		delta := batchDelta(atBatch, i)
		m := func(key string) float64 {
			v, ok := r.Metrics["vllm/"+key]
			if !ok {
				t.Errorf("step %d has no vllm/%s", r.Step, key)
			}
			return v
		}
		near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Abs(want) }
		if got, want := m("request_params_max_tokens/mean"), delta("request_params_max_tokens_sum")/delta("request_params_max_tokens_count"); got != 300 || want != 300 {
			t.Errorf("step %d: mean max_tokens asked %v, the simulator's %v, want 300", r.Step, got, want)
		}
		used := delta("request_generation_tokens_sum") / delta("request_params_max_tokens_sum")
		if got := m("max_tokens_used_fraction"); !near(got, used) || !(used > 0 && used < 1) {
			t.Errorf("step %d: max_tokens_used_fraction %v, the simulator's requests used %v of their max_tokens", r.Step, got, used)
		}
		if got, want := m("request_max_num_generation_tokens/mean"), m("request_generation_tokens/mean"); !near(got, want) || got >= 300 {
			t.Errorf("step %d: mean longest generation %v, want the mean generated length %v (below max_tokens 300)", r.Step, got, want)
		}
	}
}
