package sim

import (
	"errors"
	"fmt"
	"time"
)

// The request shape and compute families of vLLM's newest pages, which the simulator serves on
// its 0.20 pages only (see withShape):
//
//   - vllm:recomputed_token_executions_total: token positions an engine executes again after a
//     preemption. A preempted request loses its KV and is computed again from its first
//     uncached block; every position below the furthest one it had computed before, executed
//     again, is counted (prefix-cache hits are not executed, so they are not).
//   - With Config.MFUMetrics (vLLM's --enable-mfu-metrics), vLLM's PerfMetricsProm counters
//     vllm:estimated_flops_per_gpu_total, vllm:estimated_read_bytes_per_gpu_total and
//     vllm:estimated_write_bytes_per_gpu_total, from Config.Compute (see ComputeModel).
//   - With Config.KVCacheMetrics (vLLM's --kv-cache-metrics), the KV block residency
//     histograms vllm:kv_block_lifetime_seconds, vllm:kv_block_idle_before_evict_seconds and
//     vllm:kv_block_reuse_gap_seconds, as vLLM's KVCacheMetricsCollector observes them with
//     --kv-cache-metrics-sample 1 (see kvResidency).

// ComputeModel is the model whose work the MFU counters estimate, on one GPU (tensor parallel
// size 1). vLLM's estimate (vllm/v1/metrics/perf.py) sums its layers' matrix products and
// attention; the simulator keeps the first-order terms of it. Per engine iteration:
//
//   - FLOPs: 2 × Params per token computed: the prompt tokens prefilled (cache hits and loaded
//     tokens are not computed; recomputed ones are), decoded tokens and the draft tokens
//     verified with them;
//   - bytes read: the weights once (Params × BytesPerParam) plus the KV cache of the context
//     every scheduled request attends to, KVBytesPerToken for each of its tokens already in the
//     cache;
//   - bytes written: the new KV, KVBytesPerToken per token computed.
type ComputeModel struct {
	// Params is the model's parameter count.
	Params float64
	// BytesPerParam is the size of one weight: 2 for BF16.
	BytesPerParam float64
	// KVBytesPerToken is the size of one token's keys and values over all layers.
	KVBytesPerToken float64
}

// DefaultComputeModel is an 8B-parameter model in BF16 with Llama 3 8B's KV cache: 32 layers of
// 8 KV heads of 128 dimensions, keys and values, 2 bytes each (131,072 bytes per token).
func DefaultComputeModel() ComputeModel {
	return ComputeModel{Params: 8e9, BytesPerParam: 2, KVBytesPerToken: 32 * 8 * 128 * 2 * 2}
}

func (m ComputeModel) validate() error {
	var errs []error
	if !(m.Params > 0 && m.Params <= 1e15) {
		errs = append(errs, fmt.Errorf("model params must be a positive number up to 1e15, got %v", m.Params))
	}
	if !(m.BytesPerParam > 0 && m.BytesPerParam <= 8) {
		errs = append(errs, fmt.Errorf("model bytes per param must be positive and at most 8, got %v", m.BytesPerParam))
	}
	if !(m.KVBytesPerToken >= 0 && m.KVBytesPerToken <= 1e9) {
		errs = append(errs, fmt.Errorf("model KV bytes per token must be 0 to 1e9, got %v", m.KVBytesPerToken))
	}
	return errors.Join(errs...)
}

// shapeStats are an engine's counts of the families above. The float counters hold whole
// numbers: every term is a multiple of 2^13 for the default model, exact well past any run.
type shapeStats struct {
	flops, readBytes, writeBytes float64
	recomputed                   int64
	kvLifetime, kvIdle, kvReuse  histogram
}

func (s *shapeStats) add(o *shapeStats) {
	s.flops += o.flops
	s.readBytes += o.readBytes
	s.writeBytes += o.writeBytes
	s.recomputed += o.recomputed
	s.kvLifetime.add(&o.kvLifetime)
	s.kvIdle.add(&o.kvIdle)
	s.kvReuse.add(&o.kvReuse)
}

// kvResidencyBounds are vLLM's buckets of the KV block residency histograms, in seconds.
var kvResidencyBounds = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300,
	600, 1200, 1800}

// shapeStep counts what iteration sched computes, before complete moves the requests on: its
// recomputed positions and, with the MFU counters, its estimated work.
func (e *Engine) shapeStep(sched []scheduledReq) {
	s := &e.stats.shape
	tokens, context := 0, 0
	for _, sr := range sched {
		r := sr.r
		if r.recomputeUpTo > r.numComputed {
			s.recomputed += int64(min(r.numComputed+sr.tokens, r.recomputeUpTo) - r.numComputed)
		}
		tokens += sr.tokens
		context += r.numComputed
	}
	if !e.cfg.MFU || len(sched) == 0 {
		return
	}
	m := &e.cfg.Compute
	s.flops += 2 * m.Params * float64(tokens)
	s.readBytes += m.Params*m.BytesPerParam + m.KVBytesPerToken*float64(context)
	s.writeBytes += m.KVBytesPerToken * float64(tokens)
}

// kvResidency is vLLM's KVCacheMetricsCollector over an engine's block pool, sampling every
// block: a block's life starts when it is allocated and ends when it is allocated again (vLLM
// observes the eviction of a sampled block as it leaves the free queue, cached or not); each
// prefix-cache hit on it is an access. At the end of a life it observes the life's length, the
// time since its last access (since its allocation when it had none), and the gaps between its
// last four accesses.
type kvResidency struct {
	now   *time.Duration // the engine's clock
	out   *shapeStats
	alive []bool
	born  []time.Duration
	last  []time.Duration
	hist  [][4]time.Duration // the last accesses, a ring
	nhist []uint8            // accesses in the ring, at most 4
	ring  []uint8            // next slot of the ring
}

func newKVResidency(n int, now *time.Duration, out *shapeStats) *kvResidency {
	return &kvResidency{now: now, out: out, alive: make([]bool, n), born: make([]time.Duration, n), last: make([]time.Duration, n),
		hist: make([][4]time.Duration, n), nhist: make([]uint8, n), ring: make([]uint8, n)}
}

// allocated ends block b's previous life, if it had one, and starts a new one.
func (k *kvResidency) allocated(b int32) {
	now := *k.now
	if k.alive[b] {
		k.out.kvLifetime.observe(kvResidencyBounds, (now - k.born[b]).Seconds())
		k.out.kvIdle.observe(kvResidencyBounds, (now - k.last[b]).Seconds())
		n := int(k.nhist[b])
		first := (int(k.ring[b]) - n + 4) % 4 // the oldest access kept
		for i := 1; i < n; i++ {
			gap := k.hist[b][(first+i)%4] - k.hist[b][(first+i-1)%4]
			k.out.kvReuse.observe(kvResidencyBounds, gap.Seconds())
		}
	}
	k.alive[b], k.born[b], k.last[b], k.nhist[b], k.ring[b] = true, now, now, 0, 0
}

// accessed notes a prefix-cache hit on block b.
func (k *kvResidency) accessed(b int32) {
	if !k.alive[b] {
		return
	}
	now := *k.now
	k.last[b] = now
	k.hist[b][k.ring[b]] = now
	k.ring[b] = (k.ring[b] + 1) % 4
	k.nhist[b] = min(k.nhist[b]+1, 4)
}

// reset forgets every life: a restarted engine's pool starts empty, as vLLM's collector's reset.
func (k *kvResidency) reset() { clear(k.alive) }

// The families; their HELP texts are vLLM's own.
var (
	famRecomputed = counter("vllm:recomputed_token_executions", "Cumulative token positions executed again after preemption.",
		func(s *engineStats) int64 { return s.shape.recomputed })
	famEstFlops = floatCounter("vllm:estimated_flops_per_gpu",
		"Estimated number of floating point operations per GPU (for Model Flops Utilization calculations).",
		func(s *engineStats) float64 { return s.shape.flops })
	famEstRead = floatCounter("vllm:estimated_read_bytes_per_gpu",
		"Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).",
		func(s *engineStats) float64 { return s.shape.readBytes })
	famEstWrite = floatCounter("vllm:estimated_write_bytes_per_gpu",
		"Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).",
		func(s *engineStats) float64 { return s.shape.writeBytes })
	famKVLifetime = hist("vllm:kv_block_lifetime_seconds",
		"Histogram of KV cache block lifetime from allocation to eviction. Sampled metrics (controlled by --kv-cache-metrics-sample).",
		func(s *engineStats) *histogram { return &s.shape.kvLifetime })
	famKVIdle = hist("vllm:kv_block_idle_before_evict_seconds",
		"Histogram of idle time before KV cache block eviction. Sampled metrics (controlled by --kv-cache-metrics-sample).",
		func(s *engineStats) *histogram { return &s.shape.kvIdle })
	famKVReuse = hist("vllm:kv_block_reuse_gap_seconds",
		"Histogram of time gaps between consecutive KV cache block accesses. Only the most recent accesses are recorded "+
			"(ring buffer). Sampled metrics (controlled by --kv-cache-metrics-sample).",
		func(s *engineStats) *histogram { return &s.shape.kvReuse })
)

func floatCounter(name, help string, v func(*engineStats) float64) family {
	return family{name: name, help: help, kind: famCounter, value: func(s *engineStats, _ int) float64 { return v(s) }}
}

// shapes reports whether a fleet of cfg on pages of release r has the families above.
func (c Config) shapes(r release) bool { return c.Engine != EngineSGLang && r.name == "0.20" }

// withShape returns v with the families above that cfg turns on, after v's own (and before the
// optional families withOptions adds, the RL families last as vLLM lists them): the recomputed
// positions always, the MFU counters and the residency histograms when cfg asks for them
// (vLLM registers its PerfMetricsProm and residency histograms after its other families).
func (v *version) withShape(cfg Config) *version {
	if !cfg.shapes(v.release) {
		return v
	}
	o := *v
	o.families = append(append([]family(nil), v.families...), famRecomputed)
	if cfg.KVCacheMetrics {
		o.families = append(o.families, famKVLifetime, famKVIdle, famKVReuse)
	}
	if cfg.MFUMetrics {
		o.families = append(o.families, famEstFlops, famEstRead, famEstWrite)
	}
	return &o
}

// addShapeTotals adds the families' counts of every engine, all lives, to a Totals map: keys
// "recomputed_token_executions", "estimated_flops_per_gpu", "estimated_read_bytes_per_gpu",
// "estimated_write_bytes_per_gpu" (summed over the engines, each one GPU), and the residency
// histograms' "<name>_count" and "<name>_sum", each present when the pages show its family.
func (s *Sim) addShapeTotals(m map[string]float64) {
	if !s.cfg.shapes(s.release) {
		return
	}
	var t shapeStats
	for _, srv := range s.servers {
		for i, e := range srv.engines {
			t.add(&srv.carry[i].shape)
			t.add(&e.stats.shape)
		}
	}
	m["recomputed_token_executions"] = float64(t.recomputed)
	if s.cfg.MFUMetrics {
		m["estimated_flops_per_gpu"] = t.flops
		m["estimated_read_bytes_per_gpu"] = t.readBytes
		m["estimated_write_bytes_per_gpu"] = t.writeBytes
	}
	if s.cfg.KVCacheMetrics {
		for _, h := range []struct {
			name string
			h    *histogram
		}{{"kv_block_lifetime_seconds", &t.kvLifetime}, {"kv_block_idle_before_evict_seconds", &t.kvIdle},
			{"kv_block_reuse_gap_seconds", &t.kvReuse}} {
			m[h.name+"_count"] = float64(h.h.count)
			m[h.name+"_sum"] = h.h.sum
		}
	}
}

// RequestLengths counts finished requests by their prompt and generated lengths, in tokens.
type RequestLengths struct {
	Prompt, Generation map[int]int64
}

func (l *RequestLengths) observe(prompt, generated int) {
	if l.Prompt == nil {
		l.Prompt, l.Generation = map[int]int64{}, map[int]int64{}
	}
	l.Prompt[prompt]++
	l.Generation[generated]++
}

// Add adds o's counts to l, in maps of l's own.
func (l *RequestLengths) Add(o *RequestLengths) {
	if len(o.Prompt) == 0 && len(o.Generation) == 0 {
		return
	}
	if l.Prompt == nil {
		l.Prompt, l.Generation = map[int]int64{}, map[int]int64{}
	}
	for n, c := range o.Prompt {
		l.Prompt[n] += c
	}
	for n, c := range o.Generation {
		l.Generation[n] += c
	}
}

// finished counts a request that finished at t with these lengths in its step. The counts are
// by length, so that a step's are bounded by the model's length whatever the number of
// requests.
func (l *ledger) finished(t time.Duration, prompt, generated int) {
	l.step(l.sched.tokenStep(t)).Lengths.observe(prompt, generated)
}
