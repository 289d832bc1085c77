package sim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestRecomputedAndWorkAgainstReference steps an engine with a cache small enough to preempt and
// counts, from outside, what each iteration executed: a request's positions from the ones it had
// computed before the iteration to the ones after, recomputed where they lie below the furthest
// position it had reached at an earlier iteration's end. The engine's recomputed positions,
// FLOPs and bytes equal that reference's.
func TestRecomputedAndWorkAgainstReference(t *testing.T) {
	cfg := testEngineConfig(40)
	cfg.MaxModelLen = 512
	cfg.MFU, cfg.Compute = true, DefaultComputeModel()
	e := mustEngine(t, cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range randomSpecs(rng, 40, 2*time.Second, 64, 20, 200) {
		e.Submit(s)
	}
	furthest := map[uint64]int{}
	var tokens, context, iterations, recomputed int64
	for steps := 0; e.Busy() || e.Pending(); steps++ {
		if steps > 1_000_000 {
			t.Fatal("engine does not finish")
		}
		if !e.Busy() {
			e.now = e.pending[0].Arrival
		}
		if e.Step() == 0 {
			continue
		}
		iterations++
		for _, sr := range e.scheduled {
			r := sr.r
			end := r.numComputed // no drafts: the iteration computed all its tokens
			start := end - sr.tokens
			tokens += int64(sr.tokens)
			context += int64(start)
			if hw := furthest[r.ID]; hw > start {
				recomputed += int64(min(end, hw) - start)
			}
			furthest[r.ID] = max(furthest[r.ID], end)
		}
	}
	s := &e.stats.shape
	if e.stats.preemptions == 0 || recomputed == 0 {
		t.Fatalf("%d preemptions, %d positions recomputed: the test needs both", e.stats.preemptions, recomputed)
	}
	if s.recomputed != recomputed {
		t.Errorf("engine counted %d recomputed positions, the reference %d", s.recomputed, recomputed)
	}
	m := cfg.Compute
	if want := 2 * m.Params * float64(tokens); s.flops != want {
		t.Errorf("FLOPs %v, want %v (2 × %v params × %d tokens)", s.flops, want, m.Params, tokens)
	}
	if want := float64(iterations)*m.Params*m.BytesPerParam + m.KVBytesPerToken*float64(context); s.readBytes != want {
		t.Errorf("bytes read %v, want %v", s.readBytes, want)
	}
	if want := m.KVBytesPerToken * float64(tokens); s.writeBytes != want {
		t.Errorf("bytes written %v, want %v", s.writeBytes, want)
	}
	// Without preemptions every prompt position not cached is computed once and every output
	// but the last is fed back once: the tokens the page's own counters give.
	e2 := mustEngine(t, func() EngineConfig { c := cfg; c.NumBlocks = 4096; return c }())
	rng = rand.New(rand.NewPCG(3, 4))
	specs := randomSpecs(rng, 40, 2*time.Second, 64, 20, 200)
	runToEndChecking(t, e2, specs, false)
	st := &e2.stats
	if st.preemptions != 0 || st.shape.recomputed != 0 {
		t.Fatalf("%d preemptions, %d recomputed in a cache that holds everything", st.preemptions, st.shape.recomputed)
	}
	finished := int64(0)
	for _, n := range st.success {
		finished += n
	}
	computed := st.promptComputed + st.generationTokens - finished
	if want := 2 * m.Params * float64(computed); st.shape.flops != want {
		t.Errorf("FLOPs %v, want 2 × params × %d (prompt computed + generated − requests)", st.shape.flops, computed)
	}
}

// TestKVResidency drives the residency collector on a clock of its own: a block's lifetime, its
// idle time before eviction and the gaps between its last four accesses are observed when it is
// allocated again, and a restart forgets the lives.
func TestKVResidency(t *testing.T) {
	var now time.Duration
	var out shapeStats
	k := newKVResidency(2, &now, &out)
	k.allocated(0) // a first life: nothing to observe
	k.accessed(1)  // never allocated: not tracked
	for _, at := range []time.Duration{1, 2, 4, 8, 16} {
		now = at * time.Second
		k.accessed(0)
	}
	now = 20 * time.Second
	k.allocated(0)
	b := kvResidencyBounds
	if out.kvLifetime.count != 1 || out.kvLifetime.sum != 20 || out.kvLifetime.counts[searchBound(b, 20)] != 1 {
		t.Errorf("lifetime %+v, want one of 20 s", out.kvLifetime)
	}
	if out.kvIdle.count != 1 || out.kvIdle.sum != 4 {
		t.Errorf("idle %v of %d, want one of 4 s (16 s to 20 s)", out.kvIdle.sum, out.kvIdle.count)
	}
	// The last four accesses: 2, 4, 8, 16 s.
	if out.kvReuse.count != 3 || out.kvReuse.sum != 14 {
		t.Errorf("reuse gaps sum %v of %d, want 2 + 4 + 8 of 3", out.kvReuse.sum, out.kvReuse.count)
	}
	now = 21 * time.Second
	k.allocated(0) // a life with no access: idle is its lifetime, no gaps
	if out.kvLifetime.count != 2 || out.kvIdle.sum != 5 || out.kvReuse.count != 3 {
		t.Errorf("after an unused life: lifetimes %d, idle sum %v, gaps %d", out.kvLifetime.count, out.kvIdle.sum, out.kvReuse.count)
	}
	k.reset()
	k.allocated(0)
	if out.kvLifetime.count != 2 {
		t.Errorf("a life from before the reset was observed")
	}
}

func searchBound(bounds []float64, v float64) int {
	for i, b := range bounds {
		if v <= b {
			return i
		}
	}
	return len(bounds)
}

// TestShapeFamiliesOnPages checks which pages have the shape families (0.20 pages of a vLLM
// fleet: the recomputed positions always, the MFU counters and the residency histograms when
// asked for), that their HELP texts are vLLM's, and that the pages' values are the simulator's
// Totals, with every family moving in a run that preempts and hits the prefix cache.
func TestShapeFamiliesOnPages(t *testing.T) {
	base := DefaultConfig()
	base.DP = 2
	for _, tt := range []struct {
		name        string
		version     string
		engine      string
		mfu, kv     bool
		recomputed  bool
		wantMFU     bool
		wantKVHists bool
	}{
		{"0.20 plain", "0.20", EngineVLLM, false, false, true, false, false},
		{"0.20 all", "0.20", EngineVLLM, true, true, true, true, true},
		{"0.10 asked", "0.10", EngineVLLM, true, true, false, false, false},
		{"sglang asked", "0.20", EngineSGLang, true, true, false, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.Version, cfg.Engine, cfg.MFUMetrics, cfg.KVCacheMetrics = tt.version, tt.engine, tt.mfu, tt.kv
			s := mustSim(t, cfg)
			s.AdvanceTo(25 * time.Second)
			page := string(s.Page(0, testStart))
			has := func(name string) bool { return strings.Contains(page, "\n# TYPE "+name+" ") }
			for name, want := range map[string]bool{
				"vllm:recomputed_token_executions_total":   tt.recomputed,
				"vllm:estimated_flops_per_gpu_total":       tt.wantMFU,
				"vllm:estimated_read_bytes_per_gpu_total":  tt.wantMFU,
				"vllm:estimated_write_bytes_per_gpu_total": tt.wantMFU,
				"vllm:kv_block_lifetime_seconds":           tt.wantKVHists,
				"vllm:kv_block_idle_before_evict_seconds":  tt.wantKVHists,
				"vllm:kv_block_reuse_gap_seconds":          tt.wantKVHists,
			} {
				if has(name) != want {
					t.Errorf("page has %s: %v, want %v", name, has(name), want)
				}
			}
			if tt.engine == EngineSGLang {
				return
			}
			got, tot := simTotalsFromPages(t, s), s.Totals()
			compareTotals(t, "at 25s", got, tot)
			for _, k := range []string{"recomputed_token_executions", "estimated_flops_per_gpu", "kv_block_lifetime_seconds_count"} {
				_, ok := tot[k]
				if want := has("vllm:"+strings.TrimSuffix(k, "_count")) || has("vllm:"+k+"_total"); ok != want {
					t.Errorf("Totals has %s: %v, the page %v", k, ok, want)
				}
				if ok && !(tot[k] > 0) {
					t.Errorf("%s never moved: %v", k, tot[k])
				}
			}
			if tt.wantKVHists && !(tot["kv_block_reuse_gap_seconds_count"] > 0 && tot["kv_block_idle_before_evict_seconds_sum"] <= tot["kv_block_lifetime_seconds_sum"]) {
				t.Errorf("residency totals: %v reuse gaps, idle %v s of lifetimes %v s", tot["kv_block_reuse_gap_seconds_count"],
					tot["kv_block_idle_before_evict_seconds_sum"], tot["kv_block_lifetime_seconds_sum"])
			}
			if tt.wantMFU && math.Abs(tot["estimated_write_bytes_per_gpu"]/cfg.Compute.KVBytesPerToken-tot["estimated_flops_per_gpu"]/(2*cfg.Compute.Params)) > 0.5 {
				t.Errorf("written KV and FLOPs count different tokens")
			}
		})
	}
}

// TestShapeHelpTexts pins the families' HELP texts to vLLM's (vllm/v1/metrics/perf.py,
// vllm/v1/metrics/loggers.py).
func TestShapeHelpTexts(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MFUMetrics, cfg.KVCacheMetrics = true, true
	page := string(mustSim(t, cfg).Page(0, testStart))
	for _, line := range []string{
		"# HELP vllm:estimated_flops_per_gpu_total Estimated number of floating point operations per GPU (for Model Flops Utilization calculations).",
		"# HELP vllm:estimated_read_bytes_per_gpu_total Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).",
		"# HELP vllm:estimated_write_bytes_per_gpu_total Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).",
		"# HELP vllm:kv_block_lifetime_seconds Histogram of KV cache block lifetime from allocation to eviction. Sampled metrics (controlled by --kv-cache-metrics-sample).",
		"# HELP vllm:kv_block_idle_before_evict_seconds Histogram of idle time before KV cache block eviction. Sampled metrics (controlled by --kv-cache-metrics-sample).",
		"# HELP vllm:kv_block_reuse_gap_seconds Histogram of time gaps between consecutive KV cache block accesses. Only the most recent accesses are recorded (ring buffer). Sampled metrics (controlled by --kv-cache-metrics-sample).",
		`vllm:kv_block_lifetime_seconds_bucket{engine="0",le="1800.0",model_name="Qwen/Qwen3-1.7B"} 0.0`,
		`vllm:estimated_flops_per_gpu_total{engine="0",model_name="Qwen/Qwen3-1.7B"} 0.0`,
	} {
		if !strings.Contains(page, line+"\n") {
			t.Errorf("page lacks %q", line)
		}
	}
}
