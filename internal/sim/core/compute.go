package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/snap"
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

func (m ComputeModel) Validate() error {
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

// shapeStep counts what iteration sched computes, before complete moves the requests on: its
// recomputed positions and, with the MFU counters, its estimated work.
func (e *Engine) shapeStep(sched []scheduledReq) {
	s := &e.Stats.Shape
	tokens, context := 0, 0
	for _, sr := range sched {
		r := sr.r
		if r.recomputeUpTo > r.numComputed {
			s.Recomputed += int64(min(r.numComputed+sr.tokens, r.recomputeUpTo) - r.numComputed)
		}
		tokens += sr.tokens
		context += r.numComputed
	}
	if !e.cfg.MFU || len(sched) == 0 {
		return
	}
	m := &e.cfg.Compute
	s.Flops += 2 * m.Params * float64(tokens)
	s.ReadBytes += m.Params*m.BytesPerParam + m.KVBytesPerToken*float64(context)
	s.WriteBytes += m.KVBytesPerToken * float64(tokens)
}

// kvResidency is vLLM's KVCacheMetricsCollector over an engine's block pool, sampling every
// block: a block's life starts when it is allocated and ends when it is allocated again (vLLM
// observes the eviction of a sampled block as it leaves the free queue, cached or not); each
// prefix-cache hit on it is an access. At the end of a life it observes the life's length, the
// time since its last access (since its allocation when it had none), and the gaps between its
// last four accesses.
type kvResidency struct {
	now   *time.Duration // the engine's clock
	out   *snap.ShapeStats
	alive []bool
	born  []time.Duration
	last  []time.Duration
	hist  [][4]time.Duration // the last accesses, a ring
	nhist []uint8            // accesses in the ring, at most 4
	ring  []uint8            // next slot of the ring
}

func newKVResidency(n int, now *time.Duration, out *snap.ShapeStats) *kvResidency {
	return &kvResidency{now: now, out: out, alive: make([]bool, n), born: make([]time.Duration, n), last: make([]time.Duration, n),
		hist: make([][4]time.Duration, n), nhist: make([]uint8, n), ring: make([]uint8, n)}
}

// allocated ends block b's previous life, if it had one, and starts a new one.
func (k *kvResidency) allocated(b int32) {
	now := *k.now
	if k.alive[b] {
		k.out.KvLifetime.Observe(snap.KvResidencyBounds, (now - k.born[b]).Seconds())
		k.out.KvIdle.Observe(snap.KvResidencyBounds, (now - k.last[b]).Seconds())
		n := int(k.nhist[b])
		first := (int(k.ring[b]) - n + 4) % 4 // the oldest access kept
		for i := 1; i < n; i++ {
			gap := k.hist[b][(first+i)%4] - k.hist[b][(first+i-1)%4]
			k.out.KvReuse.Observe(snap.KvResidencyBounds, gap.Seconds())
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

// RequestLengths counts finished requests by their prompt and generated lengths, in tokens.
type RequestLengths struct {
	Prompt, Generation map[int]int64
}

func (l *RequestLengths) Observe(prompt, generated int) {
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
	l.step(l.Sched.tokenStep(t)).Lengths.Observe(prompt, generated)
}
