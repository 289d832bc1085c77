package snap

import (
	"sort"
)

// sglangGauges are the gauges an SGLang scheduler sets at a log point.
type SglangGauges struct {
	Running, Queue, UsedTokens int
	Usage                      float64
	GenThroughput              float64
	SpecLen, SpecRate          float64
	CacheHitRate               float64
	// paused is the number of requests an asynchronous weight sync holds (see Engine.pause).
	Paused int
	// With priority scheduling: the running and waiting requests by priority; the priorities
	// seen so far (SchedulerMetricsCollector._known_priorities), whose series each gauge sets
	// at every log point from then on; and which of those series each gauge has set.
	RunningBy, QueueBy   [NumPriorities]int
	Known                [NumPriorities]bool
	HasRunning, HasQueue [NumPriorities]bool
	// The KV pool's free and evictable (cached, unused) token slots (see sgLogPool).
	KvAvailable, KvEvictable int
}

// numPriorities is how many priorities the simulated requests have (Config.Priority).
const NumPriorities = 2

// sglangStats are an SGLang engine's figures of its page: the last log point's gauges, the
// scheduler's counters and queue-time histogram, and the tokenizer's counts of the engine's
// requests, which a server's page shows summed over its engines.
type SglangStats struct {
	Logged SglangGauges

	// The tokenizer's, counted at a request's finish.
	Prompt, Generation, Requests int64
	Aborted                      int64 // num_aborted_requests_total: one per abort call
	CachedDevice, CachedHost     int64 // prefix-cache hits, local and from the external cache
	Ttft, Itl, E2e               Histogram

	// The scheduler's.
	PrefillCompute, PrefillCache, Decode int64 // realtime_tokens_total by mode
	Queue                                Histogram
	// weightLoad is the duration of the last weight load, in seconds, once there was one
	// (weightLoaded): SGLang sets weight_load_duration_seconds at the end of each load.
	WeightLoad   float64
	WeightLoaded bool
	More         SglangMore // the families of sglang_more.go
	// stage is the scheduler's wall time by stage category (sglangStages) and idle its time
	// with nothing to run, in wall seconds, set when a page is filled (Config.SGLangStageMetrics).
	Stage [len(SglangStages)]float64
	Idle  float64
}

// sglangStages are the categories of scheduler_stage_seconds_total the engine model spends
// time in: the loop's time with a batch (run_batch, which here holds the whole busy loop), in a
// weight update (handled among the input requests) and in on_idle, which the loop runs while it
// has no batch: idle, or paused with the requests held.
var SglangStages = [...]string{"run_batch", "process_input_requests", "idle"}

func (s *SglangStats) AddCounters(o *SglangStats) {
	s.More.Add(&o.More)
	s.Prompt += o.Prompt
	s.Generation += o.Generation
	s.Requests += o.Requests
	s.Aborted += o.Aborted
	s.CachedDevice += o.CachedDevice
	s.CachedHost += o.CachedHost
	s.PrefillCompute += o.PrefillCompute
	s.PrefillCache += o.PrefillCache
	s.Decode += o.Decode
	for _, h := range []struct{ a, b *Histogram }{{&s.Ttft, &o.Ttft}, {&s.Itl, &o.Itl}, {&s.E2e, &o.E2e}, {&s.Queue, &o.Queue}} {
		h.a.Add(h.b)
	}
}

// sglangBuckets are SGLang's default bucket bounds (metrics_collector.py).
var SglangBuckets = struct{ Ttft, Itl, E2e, Queue []float64 }{
	Ttft: []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400},
	Itl: []float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
		0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000},
	E2e: []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400},
	Queue: []float64{0.0, 0.001, 0.005, 0.010, 0.050, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
		200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000},
}

// observeTokens is SGLang's inter-token latency: the interval since a request's previous output
// is added to the sum once, and its tokens to the bucket of the interval per token
// (TokenizerMetricsCollector.observe_inter_token_latency), so the count is of tokens.
func (h *Histogram) ObserveTokens(bounds []float64, interval float64, tokens int) {
	h.Counts[sort.SearchFloat64s(bounds, interval/float64(tokens))] += uint64(tokens)
	h.Sum += interval
	h.Count += uint64(tokens)
}

// addSGLangTotals adds s's counts to a Totals map of an SGLang fleet under the keys of SGLang's
// families (see Fleet.Totals).
func (s *EngineStats) AddSGLangTotals(m map[string]float64) {
	g := &s.Sg
	m["prompt_tokens"] += float64(g.Prompt)
	m["generation_tokens"] += float64(g.Generation)
	m["cached_tokens"] += float64(g.CachedDevice + g.CachedHost)
	m["num_requests"] += float64(g.Requests)
	m["num_aborted_requests"] += float64(g.Aborted)
	m["requests_aborted"] += float64(s.Aborted)
	m["aborted_prompt_tokens"] += float64(s.AbortedPrompt)
	m["num_retracted_requests"] += float64(s.Preemptions)
	m["realtime_tokens/prefill_compute"] += float64(g.PrefillCompute)
	m["realtime_tokens/prefill_cache"] += float64(g.PrefillCache)
	m["realtime_tokens/decode"] += float64(g.Decode)
	g.More.AddTotals(m)
	for _, c := range [...]struct {
		key string
		v   float64
	}{{"estimated_flops_per_gpu", s.Shape.Flops}, {"estimated_read_bytes_per_gpu", s.Shape.ReadBytes},
		{"estimated_write_bytes_per_gpu", s.Shape.WriteBytes}} {
		if c.v > 0 { // SGLang's series come with their first increment
			m[c.key] += c.v
		}
	}
	for _, h := range []struct {
		name string
		h    *Histogram
	}{{"time_to_first_token_seconds", &g.Ttft}, {"inter_token_latency_seconds", &g.Itl}, {"e2e_request_latency_seconds", &g.E2e}, {"queue_time_seconds", &g.Queue}} {
		m[h.name+"_count"] += float64(h.h.Count)
		m[h.name+"_sum"] += h.h.Sum
	}
}
