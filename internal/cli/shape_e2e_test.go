package cli

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// shapeBatches is how many GRPO batches TestRequestShapeAgainstSimulator's fleet runs.
const shapeBatches = 2

// TestRequestShapeAgainstSimulator runs "vllmstat run --gpu H100" against a simulated vLLM 0.20
// fleet of 2 servers with 2 engines each that serves the MFU counters and the KV block residency
// histograms, with a cache small enough to preempt and a KV connector, ending a step at the end
// of each batch. Each step's counts are the simulator's own for its batch: the truncated
// requests (truncated_fraction × finished_requests), the prefill split by
// source, which adds up to the step's prompt tokens exactly, the recomputed positions, and the
// FLOPs and bytes per GPU (the achieved rates × engines × the step's seconds); MFU is the
// achieved TFLOP/s over H100's peak. The length quantiles fall in the buckets of the true
// quantiles of the batch's requests. Replaying the run's recording gives its steps.jsonl.
func TestRequestShapeAgainstSimulator(t *testing.T) {
	t.Parallel()
	sc := sim.DefaultConfig()
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = 2, 2, 0, 10, 5
	sc.BlocksPerEngine = demoBlocks // the batches preempt
	sc.KVConnector = true
	sc.MFUMetrics, sc.KVCacheMetrics = true, true
	sc.Workload.Batches = shapeBatches
	sc.Workload.Dataset = sc.Workload.Prompts // the second batch asks the first one's questions again
	sc.Workload.MaxTokens = 400               // a good share stops at max_tokens
	sc.WaitForDriver = true                   // each batch's end waits for its step's end
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	engines := float64(sc.Servers * sc.DP)

	out := t.TempDir()
	rec := filepath.Join(t.TempDir(), "run.jsonl.gz")
	args := []string{"--per-worker", "--record", rec, "--interval", "0.2", "--gpu", "H100"}
	for _, u := range fleet.URLs() {
		args = append(args, "--target", u)
	}
	l := startLive(t, out, args...)
	atBatch := l.endStepsAtBatches(fleet, shapeBatches) // the totals as the pages show each batch's end
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}
	truth := fleet.GroundTruth()
	recs, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(recs) < shapeBatches {
		t.Fatalf("%d steps, want at least %d", len(recs), shapeBatches)
	}
	peak, err := vllm.GPUPeak("H100")
	if err != nil {
		t.Fatal(err)
	}
	moved := map[string]float64{}
	for i, r := range recs[:shapeBatches] {
		delta := func(key string) float64 {
			d := atBatch[i][key]
			if i > 0 {
				d -= atBatch[i-1][key]
			}
			return d
		}
		m := func(key string) float64 {
			v, ok := r.Metrics["vllm/"+key]
			if !ok {
				t.Errorf("step %d has no vllm/%s", r.Step, key)
			}
			return v
		}
		finished := m("finished_requests")
		if want := delta("request_success/stop") + delta("request_success/length"); finished != want {
			t.Errorf("step %d: %v finished requests, the simulator finished %v", r.Step, finished, want)
		}
		for key, simKey := range map[string]string{"truncated_fraction": "request_success/length"} {
			if got, want := m(key)*finished, delta(simKey); math.Abs(got-want) > 1e-9*finished {
				t.Errorf("step %d: %s × finished = %v requests, the simulator counted %v", r.Step, key, got, want)
			}
		}
		parts := 0.0
		for key, simKey := range map[string]string{"prompt_tokens_computed": "prompt_tokens_by_source/local_compute",
			"prompt_tokens_cached": "prompt_tokens_by_source/local_cache_hit", "prompt_tokens_transferred": "prompt_tokens_by_source/external_kv_transfer"} {
			got := m(key)
			if want := delta(simKey); got != want {
				t.Errorf("step %d: %s = %v, the simulator counted %v", r.Step, key, got, want)
			}
			parts += got
			moved[key] += got
		}
		if p := m("prompt_tokens"); parts != p || p != delta("prompt_tokens") {
			t.Errorf("step %d: the prefill split adds up to %v of %v prompt tokens (simulator %v)", r.Step, parts, p, delta("prompt_tokens"))
		}
		if got, want := m("recomputed_tokens"), delta("recomputed_token_executions"); got != want {
			t.Errorf("step %d: %v recomputed tokens, the simulator counted %v", r.Step, got, want)
		}
		moved["recomputed_tokens"] += m("recomputed_tokens")
		moved["truncated"] += m("truncated_fraction") * finished
		for key, c := range map[string]struct {
			simKey string
			unit   float64
		}{
			step.NameTFLOPS:    {"estimated_flops_per_gpu", 1e12},
			step.NameReadGBps:  {"estimated_read_bytes_per_gpu", 1e9},
			step.NameWriteGBps: {"estimated_write_bytes_per_gpu", 1e9},
		} {
			got, want := m(key)*engines*r.DurationS*c.unit, delta(c.simKey)
			if !(want > 0) || math.Abs(got-want) > 1e-9*want {
				t.Errorf("step %d: %s × %v engines × %v s = %v, the simulator estimated %v", r.Step, key, engines, r.DurationS, got, want)
			}
		}
		if got, want := m(step.NameMFU), m(step.NameTFLOPS)/peak.TFLOPS; math.Abs(got-want) > 1e-12 {
			t.Errorf("step %d: MFU %v, want %v of H100's %v TFLOP/s", r.Step, got, want, peak.TFLOPS)
		}
		if got, want := m("kv_block_lifetime_seconds/mean"), delta("kv_block_lifetime_seconds_sum")/delta("kv_block_lifetime_seconds_count"); math.Abs(got-want) > 1e-9*want {
			t.Errorf("step %d: mean KV block lifetime %v, the simulator's %v", r.Step, got, want)
		}
		var lengths sim.RequestLengths
		for _, e := range truth.Engines {
			lengths.Add(&e.Steps[i].Lengths)
		}
		checkLengthQuantiles(t, r, "request_prompt_tokens", lengths.Prompt, sc.MaxModelLen)
		checkLengthQuantiles(t, r, "request_generation_tokens", lengths.Generation, sc.MaxModelLen)
	}
	for _, key := range []string{"prompt_tokens_computed", "prompt_tokens_cached", "prompt_tokens_transferred", "recomputed_tokens", "truncated"} {
		if moved[key] == 0 {
			t.Errorf("no step has any %s: the test does not test it", key)
		}
	}
	// Replay is given the run's GPU, as --per-worker, which the recording does not hold.
	var replayed, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", "--gpu", "H100", rec}, &replayed, &errb); code != 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	if live := mustRead(t, filepath.Join(out, "steps.jsonl")); !bytes.Equal(replayed.Bytes(), live) {
		t.Errorf("replay differs from steps.jsonl\nreplay:\n%s\nrun:\n%s", replayed.Bytes(), live)
	}
}

// checkLengthQuantiles checks that step r's quantiles of the histogram family name lie in the
// buckets (vLLM's 1-2-5 buckets up to maxModelLen) of the true quantiles of the step's lengths,
// counted by length: the nearest-rank value, which is in the bucket Prometheus' rule picks.
func checkLengthQuantiles(t *testing.T, r step.Record, name string, byLen map[int]int64, maxModelLen int) {
	t.Helper()
	var lens []int
	var n int64
	for v, c := range byLen {
		lens = append(lens, v)
		n += c
	}
	if n == 0 {
		t.Fatalf("step %d: the simulator finished no request", r.Step)
	}
	slices.Sort(lens)
	var bounds []float64
	for p := 1; p <= maxModelLen; p *= 10 {
		for _, k := range []int{1, 2, 5} {
			if k*p <= maxModelLen {
				bounds = append(bounds, float64(k*p))
			}
		}
	}
	for _, q := range vllm.HistQuantiles {
		rank := int64(math.Ceil(q.Q * float64(n)))
		var seen int64
		var truth int
		for _, v := range lens {
			seen += byLen[v]
			if seen >= rank {
				truth = v
				break
			}
		}
		lo, hi := 0.0, math.Inf(1)
		for i, b := range bounds {
			if float64(truth) <= b {
				hi = b
				break
			}
			lo = bounds[i]
		}
		if math.IsInf(hi, 1) {
			hi = lo // the +Inf bucket's estimate is the highest finite bound
		}
		got, ok := r.Metrics["vllm/"+name+"/"+q.Stat]
		if !ok || got < lo || got > hi {
			t.Errorf("step %d: %s/%s = %v (present %v), the true value %d is in the bucket (%v, %v]", r.Step, name, q.Stat, got, ok, truth, lo, hi)
		}
	}
}
