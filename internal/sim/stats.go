package sim

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
type histogram struct {
	counts [maxBounds + 1]uint64
	sum    float64
	count  uint64
}

// observe adds v with prometheus_client's rule: the first bucket whose bound is >= v.
func (h *histogram) observe(bounds []float64, v float64) {
	h.counts[sort.SearchFloat64s(bounds, v)]++
	h.sum += v
	h.count++
}

func (h *histogram) add(o *histogram) {
	for i := range h.counts {
		h.counts[i] += o.counts[i]
	}
	h.sum += o.sum
	h.count += o.count
}

// finishReason indexes engineStats.success, in the order vLLM's FinishReason enum lists them.
type finishReason int

const (
	reasonStop finishReason = iota
	reasonLength
	reasonAbort
	reasonError
	reasonRepetition
	numReasons
)

var reasonNames = [numReasons]string{"stop", "length", "abort", "error", "repetition"}

// engineStats is everything one engine's part of a /metrics page shows: gauges as they are now,
// counters and histograms since the engine (re)started. Only the engine's owner writes it.
type engineStats struct {
	running, waiting int
	kvUsage          float64
	// recorded is set at the engine's first iteration since it (re)started: vLLM's frontend has
	// scheduler stats of it, and has set its scheduler gauges, from then on. A multiprocess
	// page shows those gauges only once set (multiproc.go).
	recorded bool
	// res is the engine's scheduler and memory state, as vLLM's sleep families show it; its
	// zero value is an engine fully awake.
	res resources
	// snapshot is set once the engine has sent vLLM a sleep-state snapshot (at its first sleep or
	// pause), at snapshotAt: the sleep resource families have its children from then on.
	snapshot   bool
	snapshotAt time.Duration
	// rl is what vLLM's dev-mode RL families show of the engine's weight loads.
	rl rlStats
	// version is the weight version of the engine's last load, if it had one (hasVersion) since
	// it (re)started.
	version    int
	hasVersion bool

	prefixQueries, prefixHits int64
	preemptions               int64
	promptTokens              int64
	promptComputed            int64 // prompt tokens of first-time prefills not served by the cache
	promptCached              int64 // prompt tokens served by the local prefix cache
	promptExternal            int64 // prompt tokens loaded from the external prefix cache
	generationTokens          int64
	success                   [numReasons]int64
	// aborted are the requests their client aborted and abortedPrompt their prompt tokens:
	// the simulator's own count, which no vLLM page shows (see Engine.abort).
	aborted, abortedPrompt int64

	// The external prefix cache of a KV connector, in tokens.
	externalQueries, externalHits int64

	// Speculative decoding: drafts, their tokens, the accepted ones in all and by position.
	specDrafts, specDraftTokens, specAccepted int64
	specAcceptedPerPos                        [maxSpecTokens]int64

	ttft, itl, e2e, queue, inference, prefill, decode, reqTPOT  histogram
	reqPrompt, reqGeneration, reqMaxGeneration, paramsMaxTokens histogram
	paramsN, iterationTokens                                    histogram
	// prefillKVComputed is observed at a request's finish with its prompt tokens not served by
	// a cache, local or external (vLLM 0.20's request_prefill_kv_computed_tokens).
	prefillKVComputed histogram

	// shape is what the request shape and compute families show (see compute.go).
	shape shapeStats

	// sg is what an SGLang page shows (Config.Engine "sglang"); zero on a vLLM fleet.
	sg sglangStats
}

// addCounters adds o's counters and histograms to s, leaving the gauges alone. It is how a
// restarted engine's earlier life is kept for Totals.
func (s *engineStats) addCounters(o *engineStats) {
	s.prefixQueries += o.prefixQueries
	s.prefixHits += o.prefixHits
	s.preemptions += o.preemptions
	s.promptTokens += o.promptTokens
	s.promptComputed += o.promptComputed
	s.promptCached += o.promptCached
	s.promptExternal += o.promptExternal
	s.externalQueries += o.externalQueries
	s.externalHits += o.externalHits
	s.generationTokens += o.generationTokens
	for i := range s.success {
		s.success[i] += o.success[i]
	}
	s.aborted += o.aborted
	s.abortedPrompt += o.abortedPrompt
	s.specDrafts += o.specDrafts
	s.specDraftTokens += o.specDraftTokens
	s.specAccepted += o.specAccepted
	for i := range s.specAcceptedPerPos {
		s.specAcceptedPerPos[i] += o.specAcceptedPerPos[i]
	}
	for _, f := range histogramFields {
		f.get(s).add(f.get(o))
	}
	s.sg.addCounters(&o.sg)
	s.shape.add(&o.shape)
}

// histogramField names one engineStats histogram by its vLLM family name (without "vllm:") and
// carries its Totals keys, built once so that Totals, which the fleet computes every tick, does
// not build strings.
type histogramField struct {
	name, countKey, sumKey string
	get                    func(*engineStats) *histogram
}

var histogramFields = func() []histogramField {
	fs := []histogramField{
		{name: "time_to_first_token_seconds", get: func(s *engineStats) *histogram { return &s.ttft }},
		{name: "inter_token_latency_seconds", get: func(s *engineStats) *histogram { return &s.itl }},
		{name: "e2e_request_latency_seconds", get: func(s *engineStats) *histogram { return &s.e2e }},
		{name: "request_queue_time_seconds", get: func(s *engineStats) *histogram { return &s.queue }},
		{name: "request_inference_time_seconds", get: func(s *engineStats) *histogram { return &s.inference }},
		{name: "request_prefill_time_seconds", get: func(s *engineStats) *histogram { return &s.prefill }},
		{name: "request_decode_time_seconds", get: func(s *engineStats) *histogram { return &s.decode }},
		{name: "request_time_per_output_token_seconds", get: func(s *engineStats) *histogram { return &s.reqTPOT }},
		{name: "request_prompt_tokens", get: func(s *engineStats) *histogram { return &s.reqPrompt }},
		{name: "request_generation_tokens", get: func(s *engineStats) *histogram { return &s.reqGeneration }},
		{name: "request_max_num_generation_tokens", get: func(s *engineStats) *histogram { return &s.reqMaxGeneration }},
		{name: "request_params_max_tokens", get: func(s *engineStats) *histogram { return &s.paramsMaxTokens }},
		{name: "request_params_n", get: func(s *engineStats) *histogram { return &s.paramsN }},
		{name: "iteration_tokens_total", get: func(s *engineStats) *histogram { return &s.iterationTokens }},
		{name: "request_prefill_kv_computed_tokens", get: func(s *engineStats) *histogram { return &s.prefillKVComputed }},
	}
	for i := range fs {
		fs[i].countKey, fs[i].sumKey = fs[i].name+"_count", fs[i].name+"_sum"
	}
	return fs
}()

var successKeys = func() (k [numReasons]string) {
	for i, r := range reasonNames {
		k[i] = "request_success/" + r
	}
	return k
}()

// addTotals adds s's counters to a Totals map under the keys documented on Fleet.Totals.
func (s *engineStats) addTotals(m map[string]float64) {
	m["prefix_cache_queries"] += float64(s.prefixQueries)
	m["prefix_cache_hits"] += float64(s.prefixHits)
	m["num_preemptions"] += float64(s.preemptions)
	m["prompt_tokens"] += float64(s.promptTokens)
	m["prompt_tokens_cached"] += float64(s.promptCached + s.promptExternal)
	m["prompt_tokens_by_source/local_compute"] += float64(s.promptComputed)
	m["prompt_tokens_by_source/local_cache_hit"] += float64(s.promptCached)
	m["prompt_tokens_by_source/external_kv_transfer"] += float64(s.promptExternal)
	m["external_prefix_cache_queries"] += float64(s.externalQueries)
	m["external_prefix_cache_hits"] += float64(s.externalHits)
	m["generation_tokens"] += float64(s.generationTokens)
	for i, n := range s.success {
		m[successKeys[i]] += float64(n)
	}
	m["requests_aborted"] += float64(s.aborted)
	m["aborted_prompt_tokens"] += float64(s.abortedPrompt)
	if s.specDrafts > 0 { // only engines that decode speculatively have the keys
		m["spec_decode_num_drafts"] += float64(s.specDrafts)
		m["spec_decode_num_draft_tokens"] += float64(s.specDraftTokens)
		m["spec_decode_num_accepted_tokens"] += float64(s.specAccepted)
	}
	for _, f := range histogramFields {
		h := f.get(s)
		m[f.countKey] += float64(h.count)
		m[f.sumKey] += h.sum
	}
}

// bucketSet holds the bucket bounds of an engine's histograms; they depend on the configuration
// (max_model_len) but not on the engine, so all engines of a fleet share one.
type bucketSet struct {
	ttft, perToken, requestPhase, tokens, n, iteration []float64
}

func newBucketSet(maxModelLen int) *bucketSet {
	return &bucketSet{
		ttft: []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
			2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0},
		perToken: []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
			2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0},
		requestPhase: []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
			40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0},
		tokens:    buckets125(maxModelLen),
		n:         []float64{1, 2, 5, 10, 20},
		iteration: []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384},
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
func (b *bucketSet) bounds(name string) []float64 {
	switch name {
	case "time_to_first_token_seconds":
		return b.ttft
	case "inter_token_latency_seconds", "time_per_output_token_seconds", "request_time_per_output_token_seconds":
		return b.perToken
	case "e2e_request_latency_seconds", "request_queue_time_seconds", "request_inference_time_seconds",
		"request_prefill_time_seconds", "request_decode_time_seconds":
		return b.requestPhase
	case "request_prompt_tokens", "request_generation_tokens", "request_max_num_generation_tokens",
		"request_params_max_tokens", "request_prefill_kv_computed_tokens":
		return b.tokens
	case "request_params_n":
		return b.n
	case "iteration_tokens_total":
		return b.iteration
	case "kv_block_lifetime_seconds", "kv_block_idle_before_evict_seconds", "kv_block_reuse_gap_seconds":
		return kvResidencyBounds
	}
	panic("sim: no buckets for histogram " + name)
}
