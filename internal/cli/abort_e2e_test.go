package cli

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim"
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
	for _, engine := range []string{sim.EngineVLLM, sim.EngineSGLang} {
		t.Run(engine, func(t *testing.T) {
			sc := sim.DefaultConfig()
			sc.Engine = engine
			sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = 1, 2, 0, 10, 11
			sc.Workload.Prompts, sc.Workload.Samples = 8, 8
			sc.Workload.Batches = 2
			sc.Workload.Pause = 20 * time.Second
			sc.Workload.Abort = 0.3
			fleet, err := sim.Start(context.Background(), sc)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fleet.Close() })

			out := t.TempDir()
			l := startLive(t, out, "--target", fleet.URLs()[0], "--per-worker", "--interval", "0.2")
			var atBatch []map[string]float64
			for range 2 {
				select {
				case n := <-fleet.Batches():
					atBatch = append(atBatch, fleet.Totals()) // as the pages show the batch's end
					l.endStep(n)
				case <-time.After(2 * time.Minute): // only a hang gets here
					l.stop()
					t.Fatalf("no batch finished\n%s", l.stderr.String())
				}
			}
			if code := l.stop(); code != 0 {
				t.Fatalf("run exited %d\n%s", code, l.stderr.String())
			}
			recs, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
			if len(recs) < 2 {
				t.Fatalf("%d steps, want at least 2", len(recs))
			}
			for i, r := range recs[:2] {
				delta := func(key string) float64 {
					d := atBatch[i][key]
					if i > 0 {
						d -= atBatch[i-1][key]
					}
					return d
				}
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
					if got, want := r.Metrics["sglang/num_aborted_requests"], delta("num_aborted_requests"); got != want {
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
