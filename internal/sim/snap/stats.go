package snap

import (
	"sort"
	"time"
)

// maxBounds is the largest number of finite bucket bounds an engine histogram may have (SGLang's
// queue_time_seconds has 40). Engine histograms are fixed-size arrays so that engineStats is a
// plain value: publishing a snapshot to the HTTP side is a struct copy, with no allocation and
// nothing shared.
const maxBounds = 40

// histogram is one Prometheus histogram child. counts are per bucket (not cumulative); the last
// used slot, counts[len(bounds)], is the +Inf bucket. The bounds live in the engine's bucketSet.
type Histogram struct {
	Counts [maxBounds + 1]uint64
	Sum    float64
	Count  uint64
}

// observe adds v with prometheus_client's rule: the first bucket whose bound is >= v.
func (h *Histogram) Observe(bounds []float64, v float64) {
	h.Counts[sort.SearchFloat64s(bounds, v)]++
	h.Sum += v
	h.Count++
}

func (h *Histogram) Add(o *Histogram) {
	for i := range h.Counts {
		h.Counts[i] += o.Counts[i]
	}
	h.Sum += o.Sum
	h.Count += o.Count
}

// finishReason indexes engineStats.success, in the order vLLM's FinishReason enum lists them.
type finishReason int

const (
	ReasonStop finishReason = iota
	ReasonLength
	reasonAbort
	reasonError
	reasonRepetition
	numReasons
)

var ReasonNames = [numReasons]string{"stop", "length", "abort", "error", "repetition"}

// engineStats is everything one engine's part of a /metrics page shows: gauges as they are now,
// counters and histograms since the engine (re)started. Only the engine's owner writes it.
type EngineStats struct {
	Running, Waiting int
	KvUsage          float64
	// recorded is set at the engine's first iteration since it (re)started: vLLM's frontend has
	// scheduler stats of it, and has set its scheduler gauges, from then on. A multiprocess
	// page shows those gauges only once set (multiproc.go).
	Recorded bool
	// res is the engine's scheduler and memory state, as vLLM's sleep families show it; its
	// zero value is an engine fully awake.
	Res Resources
	// snapshot is set once the engine has sent vLLM a sleep-state snapshot (at its first sleep or
	// pause), at snapshotAt: the sleep resource families have its children from then on.
	Snapshot   bool
	SnapshotAt time.Duration
	// rl is what vLLM's dev-mode RL families show of the engine's weight loads.
	Rl RlStats
	// version is the weight version of the engine's last load, if it had one (hasVersion) since
	// it (re)started.
	Version    int
	HasVersion bool

	PrefixQueries, PrefixHits int64
	Preemptions               int64
	PromptTokens              int64
	PromptComputed            int64 // prompt tokens of first-time prefills not served by the cache
	PromptCached              int64 // prompt tokens served by the local prefix cache
	PromptExternal            int64 // prompt tokens loaded from the external prefix cache
	GenerationTokens          int64
	Success                   [numReasons]int64
	// aborted are the requests their client aborted and abortedPrompt their prompt tokens:
	// the simulator's own count, which no vLLM page shows (see Engine.abort).
	Aborted, AbortedPrompt int64

	// The external prefix cache of a KV connector, in tokens.
	ExternalQueries, ExternalHits int64

	// Speculative decoding: drafts, their tokens, the accepted ones in all and by position.
	SpecDrafts, SpecDraftTokens, SpecAccepted int64
	SpecAcceptedPerPos                        [MaxSpecTokens]int64

	Ttft, Itl, E2e, Queue, Inference, Prefill, Decode, ReqTPOT  Histogram
	ReqPrompt, ReqGeneration, ReqMaxGeneration, ParamsMaxTokens Histogram
	ParamsN, IterationTokens                                    Histogram
	// prefillKVComputed is observed at a request's finish with its prompt tokens not served by
	// a cache, local or external (vLLM 0.20's request_prefill_kv_computed_tokens).
	PrefillKVComputed Histogram

	// shape is what the request shape and compute families show (see compute.go).
	Shape ShapeStats

	// sg is what an SGLang page shows (Config.Engine "sglang"); zero on a vLLM fleet.
	Sg SglangStats
	// Trt is what a TensorRT-LLM page shows (Config.Engine "trtllm"); zero on other fleets.
	Trt TrtllmStats
}

// addCounters adds o's counters and histograms to s, leaving the gauges alone. It is how a
// restarted engine's earlier life is kept for Totals.
func (s *EngineStats) AddCounters(o *EngineStats) {
	s.PrefixQueries += o.PrefixQueries
	s.PrefixHits += o.PrefixHits
	s.Preemptions += o.Preemptions
	s.PromptTokens += o.PromptTokens
	s.PromptComputed += o.PromptComputed
	s.PromptCached += o.PromptCached
	s.PromptExternal += o.PromptExternal
	s.ExternalQueries += o.ExternalQueries
	s.ExternalHits += o.ExternalHits
	s.GenerationTokens += o.GenerationTokens
	for i := range s.Success {
		s.Success[i] += o.Success[i]
	}
	s.Aborted += o.Aborted
	s.AbortedPrompt += o.AbortedPrompt
	s.SpecDrafts += o.SpecDrafts
	s.SpecDraftTokens += o.SpecDraftTokens
	s.SpecAccepted += o.SpecAccepted
	for i := range s.SpecAcceptedPerPos {
		s.SpecAcceptedPerPos[i] += o.SpecAcceptedPerPos[i]
	}
	for _, f := range histogramFields {
		f.get(s).Add(f.get(o))
	}
	s.Sg.AddCounters(&o.Sg)
	s.Trt.AddCounters(&o.Trt)
	s.Shape.Add(&o.Shape)
}

// histogramField names one engineStats histogram by its vLLM family name (without "vllm:") and
// carries its Totals keys, built once so that Totals, which the fleet computes every tick, does
// not build strings.
type histogramField struct {
	name, countKey, sumKey string
	get                    func(*EngineStats) *Histogram
}

var histogramFields = func() []histogramField {
	fs := []histogramField{
		{name: "time_to_first_token_seconds", get: func(s *EngineStats) *Histogram { return &s.Ttft }},
		{name: "inter_token_latency_seconds", get: func(s *EngineStats) *Histogram { return &s.Itl }},
		{name: "e2e_request_latency_seconds", get: func(s *EngineStats) *Histogram { return &s.E2e }},
		{name: "request_queue_time_seconds", get: func(s *EngineStats) *Histogram { return &s.Queue }},
		{name: "request_inference_time_seconds", get: func(s *EngineStats) *Histogram { return &s.Inference }},
		{name: "request_prefill_time_seconds", get: func(s *EngineStats) *Histogram { return &s.Prefill }},
		{name: "request_decode_time_seconds", get: func(s *EngineStats) *Histogram { return &s.Decode }},
		{name: "request_time_per_output_token_seconds", get: func(s *EngineStats) *Histogram { return &s.ReqTPOT }},
		{name: "request_prompt_tokens", get: func(s *EngineStats) *Histogram { return &s.ReqPrompt }},
		{name: "request_generation_tokens", get: func(s *EngineStats) *Histogram { return &s.ReqGeneration }},
		{name: "request_max_num_generation_tokens", get: func(s *EngineStats) *Histogram { return &s.ReqMaxGeneration }},
		{name: "request_params_max_tokens", get: func(s *EngineStats) *Histogram { return &s.ParamsMaxTokens }},
		{name: "request_params_n", get: func(s *EngineStats) *Histogram { return &s.ParamsN }},
		{name: "iteration_tokens_total", get: func(s *EngineStats) *Histogram { return &s.IterationTokens }},
		{name: "request_prefill_kv_computed_tokens", get: func(s *EngineStats) *Histogram { return &s.PrefillKVComputed }},
	}
	for i := range fs {
		fs[i].countKey, fs[i].sumKey = fs[i].name+"_count", fs[i].name+"_sum"
	}
	return fs
}()

var successKeys = func() (k [numReasons]string) {
	for i, r := range ReasonNames {
		k[i] = "request_success/" + r
	}
	return k
}()

// addTotals adds s's counters to a Totals map under the keys documented on Fleet.Totals.
func (s *EngineStats) AddTotals(m map[string]float64) {
	m["prefix_cache_queries"] += float64(s.PrefixQueries)
	m["prefix_cache_hits"] += float64(s.PrefixHits)
	m["num_preemptions"] += float64(s.Preemptions)
	m["prompt_tokens"] += float64(s.PromptTokens)
	m["prompt_tokens_cached"] += float64(s.PromptCached + s.PromptExternal)
	m["prompt_tokens_by_source/local_compute"] += float64(s.PromptComputed)
	m["prompt_tokens_by_source/local_cache_hit"] += float64(s.PromptCached)
	m["prompt_tokens_by_source/external_kv_transfer"] += float64(s.PromptExternal)
	m["external_prefix_cache_queries"] += float64(s.ExternalQueries)
	m["external_prefix_cache_hits"] += float64(s.ExternalHits)
	m["generation_tokens"] += float64(s.GenerationTokens)
	for i, n := range s.Success {
		m[successKeys[i]] += float64(n)
	}
	m["requests_aborted"] += float64(s.Aborted)
	m["aborted_prompt_tokens"] += float64(s.AbortedPrompt)
	if s.SpecDrafts > 0 { // only engines that decode speculatively have the keys
		m["spec_decode_num_drafts"] += float64(s.SpecDrafts)
		m["spec_decode_num_draft_tokens"] += float64(s.SpecDraftTokens)
		m["spec_decode_num_accepted_tokens"] += float64(s.SpecAccepted)
	}
	for _, f := range histogramFields {
		h := f.get(s)
		m[f.countKey] += float64(h.Count)
		m[f.sumKey] += h.Sum
	}
}

// bucketSet holds the bucket bounds of an engine's histograms; they depend on the configuration
// (max_model_len) but not on the engine, so all engines of a fleet share one.
type BucketSet struct {
	Ttft, PerToken, RequestPhase, Tokens, N, Iteration []float64
}

func NewBucketSet(maxModelLen int) *BucketSet {
	return &BucketSet{
		Ttft: []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
			2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0},
		PerToken: []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
			2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0},
		RequestPhase: []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
			40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0},
		Tokens:    buckets125(maxModelLen),
		N:         []float64{1, 2, 5, 10, 20},
		Iteration: []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384},
	}
}

// buckets125 is vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to max.
func buckets125(max int) []float64 {
	var b []float64
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*p > max {
				return b
			}
			b = append(b, float64(m*p))
		}
	}
}

// bounds returns the bucket bounds of the histogram with the given family name.
func (b *BucketSet) Bounds(name string) []float64 {
	switch name {
	case "time_to_first_token_seconds":
		return b.Ttft
	case "inter_token_latency_seconds", "time_per_output_token_seconds", "request_time_per_output_token_seconds":
		return b.PerToken
	case "e2e_request_latency_seconds", "request_queue_time_seconds", "request_inference_time_seconds",
		"request_prefill_time_seconds", "request_decode_time_seconds":
		return b.RequestPhase
	case "request_prompt_tokens", "request_generation_tokens", "request_max_num_generation_tokens",
		"request_params_max_tokens", "request_prefill_kv_computed_tokens":
		return b.Tokens
	case "request_params_n":
		return b.N
	case "iteration_tokens_total":
		return b.Iteration
	case "kv_block_lifetime_seconds", "kv_block_idle_before_evict_seconds", "kv_block_reuse_gap_seconds":
		return KvResidencyBounds
	}
	panic("sim: no buckets for histogram " + name)
}
