package vllmpage

import (
	"slices"
	"strconv"
	"strings"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// famKind is how a family is exposed.
type famKind int

const (
	famGauge     famKind = iota
	famCounter           // <name>_total, then a <name>_created gauge family
	famHistogram         // _bucket/_count/_sum per child, then a <name>_created gauge family
	famInfo              // vllm:cache_config_info: a gauge fixed at 1 whose labels carry the data
	famCustom            // written by its own function, for children that come and go
)

// family is one vLLM metric family as a page version shows it. Every family has one child per
// engine, times the values of its extra label if it has one.
type family struct {
	name string // as vLLM registers it: counters without "_total"
	help string
	kind famKind

	// extraLabel and extraValues give a counter a second dimension (finished_reason, source).
	extraLabel  string
	extraValues []string

	// value reads a gauge or counter, child i of the extra dimension if it has one.
	value func(s *snap.EngineStats, i int) float64
	// hist reads a histogram; buckets names its bucket bounds in bucketSet.
	hist    func(s *snap.EngineStats) *snap.Histogram
	buckets string

	// write writes a famCustom family.
	write func(r *renderer, dst []byte, f *family, st *snap.PageState) []byte
}

// version is one vLLM release style of the /metrics page.
type version struct {
	// release's sleepState puts vllm:engine_sleep_state on every page and, when the fleet syncs
	// weights, the sleep resource families and the dev-mode RL families (see withOptions).
	snap.Release
	families []family
	python   pythonInfo
}

type pythonInfo struct{ major, minor, patch string }

// parseVersion maps a --vllm-version value to a page layout.
func parseVersion(s string) (*version, error) {
	r, err := snap.ParseRelease(s)
	if err != nil {
		return nil, err
	}
	switch r.Name {
	case v020.Name:
		return &v020, nil
	case v010.Name:
		return &v010, nil
	}
	return &v08, nil
}

func gauge(name, help string, v func(*snap.EngineStats) float64) family {
	return family{name: name, help: help, kind: famGauge, value: func(s *snap.EngineStats, _ int) float64 { return v(s) }}
}

func counter(name, help string, v func(*snap.EngineStats) int64) family {
	return family{name: name, help: help, kind: famCounter, value: func(s *snap.EngineStats, _ int) float64 { return float64(v(s)) }}
}

func hist(name, help string, h func(*snap.EngineStats) *snap.Histogram) family {
	return family{name: name, help: help, kind: famHistogram, hist: h, buckets: strings.TrimPrefix(name, "vllm:")}
}

// histAs is a histogram family that shows another family's observations under an older name
// (time_per_output_token_seconds repeats inter_token_latency_seconds, as vLLM does while both
// names exist).
func histAs(name, help, buckets string, h func(*snap.EngineStats) *snap.Histogram) family {
	return family{name: name, help: help, kind: famHistogram, hist: h, buckets: buckets}
}

func successFamily(reasons int) family {
	return family{
		name: "vllm:request_success", help: "Count of successfully processed requests.", kind: famCounter,
		extraLabel: "finished_reason", extraValues: snap.ReasonNames[:reasons],
		value: func(s *snap.EngineStats, i int) float64 { return float64(s.Success[i]) },
	}
}

// The families below are listed in the order the reference pages print them; the HELP texts
// are vLLM's own.
var (
	famRunning = gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
		func(s *snap.EngineStats) float64 { return float64(s.Running) })
	famWaiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
		func(s *snap.EngineStats) float64 { return float64(s.Waiting) })
	// famWaitingByReason splits num_requests_waiting (vLLM PR #38435, in the 0.20 logger):
	// "capacity" is the scheduler's num_waiting_reqs, "deferred" its num_skipped_waiting_reqs
	// (LoRA budget, KV transfer, blocked requests). The simulated scheduler defers nothing, so
	// every waiting request waits for capacity and the two add up to num_requests_waiting.
	famWaitingByReason = family{
		name: "vllm:num_requests_waiting_by_reason",
		help: "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; " +
			"'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). " +
			"Sum of all reasons equals vllm:num_requests_waiting.",
		kind: famGauge, extraLabel: "reason", extraValues: []string{"capacity", "deferred"},
		value: func(s *snap.EngineStats, i int) float64 {
			if i == 0 {
				return float64(s.Waiting)
			}
			return 0
		},
	}
	famKVUsage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
		func(s *snap.EngineStats) float64 { return s.KvUsage })
	famPrefixQueries = counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
		func(s *snap.EngineStats) int64 { return s.PrefixQueries })
	famPrefixHits = counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
		func(s *snap.EngineStats) int64 { return s.PrefixHits })
	famExternalQueries = counter("vllm:external_prefix_cache_queries",
		"External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.",
		func(s *snap.EngineStats) int64 { return s.ExternalQueries })
	famExternalHits = counter("vllm:external_prefix_cache_hits",
		"External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.",
		func(s *snap.EngineStats) int64 { return s.ExternalHits })
	famMMQueries = counter("vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items.",
		func(*snap.EngineStats) int64 { return 0 })
	famMMHits = counter("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.",
		func(*snap.EngineStats) int64 { return 0 })
	famPreemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
		func(s *snap.EngineStats) int64 { return s.Preemptions })
	famPromptTokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
		func(s *snap.EngineStats) int64 { return s.PromptTokens })
	famPromptBySource = family{
		name: "vllm:prompt_tokens_by_source", help: "Number of prompt tokens by source.", kind: famCounter,
		extraLabel: "source", extraValues: []string{"local_compute", "local_cache_hit", "external_kv_transfer"},
		value: func(s *snap.EngineStats, i int) float64 {
			switch i {
			case 0:
				return float64(s.PromptComputed)
			case 1:
				return float64(s.PromptCached)
			}
			return float64(s.PromptExternal)
		},
	}
	famPromptCached = counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).",
		func(s *snap.EngineStats) int64 { return s.PromptCached + s.PromptExternal })
	famGenerationTokens = counter("vllm:generation_tokens", "Number of generation tokens processed.",
		func(s *snap.EngineStats) int64 { return s.GenerationTokens })

	famTTFT = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.Ttft })
	famITL = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.Itl })
	famE2E = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.E2e })
	famQueue = hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.Queue })
	famInference = hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.Inference })
	famPrefill = hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.Prefill })
	famDecode = hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.Decode })
	// famPrefillKVComputed is observed at each request's finish with its prompt tokens minus
	// the cached ones, local and external (vLLM PR #30189; PrometheusStatLogger.record).
	famPrefillKVComputed = hist("vllm:request_prefill_kv_computed_tokens",
		"Histogram of new KV tokens computed during prefill (excluding cached tokens).",
		func(s *snap.EngineStats) *snap.Histogram { return &s.PrefillKVComputed })
	famReqTPOT = hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.ReqTPOT })
	famReqPrompt = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.ReqPrompt })
	famReqGeneration = hist("vllm:request_generation_tokens", "Number of generation tokens processed.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.ReqGeneration })
	famReqMaxGeneration = hist("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.ReqMaxGeneration })
	famParamsMaxTokens = hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.ParamsMaxTokens })
	famParamsN = hist("vllm:request_params_n", "Histogram of the n request parameter.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.ParamsN })
	famIterationTokens = hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
		func(s *snap.EngineStats) *snap.Histogram { return &s.IterationTokens })
	famCacheConfig = family{name: "vllm:cache_config_info", help: "Information of the LLMEngine CacheConfig", kind: famInfo}

	// famSleepState is vLLM's legacy sleep state, one child per state and engine, which vLLM
	// creates state by state when its logger starts, awake (PrometheusStatLogger.__init__), so
	// a page lists them that way. It follows the resource state (docs/design/engine_sleep_state.md):
	// awake is the fully-awake predicate, weights_offloaded is set while the weights are
	// offloaded, discard_all while they are discarded and the KV cache released.
	famSleepState = family{
		name: "vllm:engine_sleep_state",
		help: "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; " +
			"weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
		kind: famGauge, extraLabel: "sleep_state", extraValues: []string{"awake", "weights_offloaded", "discard_all"},
		value: func(s *snap.EngineStats, i int) float64 {
			var on bool
			switch i {
			case 0:
				on = s.Res.FullyAwake()
			case 1:
				on = s.Res.Weights == snap.WeightsOffloaded
			default:
				on = s.Res.Weights == snap.WeightsDiscarded && s.Res.Kv == snap.KvReleased
			}
			if on {
				return 1
			}
			return 0
		},
	}
)

// specDecodeFamilies are the counters vLLM adds when it decodes speculatively with k tokens
// (SpecDecodingProm); pages of engines without a speculative config have none of them.
func specDecodeFamilies(k int) []family {
	pos := make([]string, k)
	for i := range pos {
		pos[i] = strconv.Itoa(i)
	}
	return []family{
		counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", func(s *snap.EngineStats) int64 { return s.SpecDrafts }),
		counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", func(s *snap.EngineStats) int64 { return s.SpecDraftTokens }),
		counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", func(s *snap.EngineStats) int64 { return s.SpecAccepted }),
		{
			name: "vllm:spec_decode_num_accepted_tokens_per_pos", help: "Accepted tokens per draft position.", kind: famCounter,
			extraLabel: "position", extraValues: pos,
			value: func(s *snap.EngineStats, i int) float64 { return float64(s.SpecAcceptedPerPos[i]) },
		},
	}
}

// withOptions returns v with the families of cfg's optional features: in a fleet that syncs
// weights (the colocated or the async loop), which runs vLLM's sleep mode and its dev-mode RL
// endpoints, the sleep resource families after the legacy sleep state and the RL families after
// vLLM's own; and the speculative decoding counters after v's own.
func (v *version) withOptions(cfg fleetconfig.Config) *version {
	rl := cfg.SyncsWeights() && v.SleepState
	if cfg.SpecDecode == 0 && !rl {
		return v
	}
	o := *v
	o.families = slices.Clone(v.families)
	if rl {
		i := slices.IndexFunc(o.families, func(f family) bool { return f.name == famSleepState.name })
		o.families = slices.Insert(o.families, i+1, famSleepResources, famFullyAwake)
	}
	if cfg.SpecDecode > 0 {
		o.families = append(o.families, specDecodeFamilies(cfg.SpecDecode)...)
	}
	if rl {
		o.families = append(o.families, rlFamilies...)
	}
	return &o
}

func kvUsage(s *snap.EngineStats) float64 { return s.KvUsage }

func prefixQueries(s *snap.EngineStats) int64 { return s.PrefixQueries }

func prefixHits(s *snap.EngineStats) int64 { return s.PrefixHits }

func itlHistogram(s *snap.EngineStats) *snap.Histogram { return &s.Itl }

// v020 is the current layout: new names only, engine label, the sleep state, five finish
// reasons, prompt tokens by source.
var v020 = version{
	Release: snap.Release{Name: "0.20", EngineLabel: true, SleepState: true}, python: pythonInfo{"3", "12", "11"},
	families: []family{
		famRunning, famWaiting, famWaitingByReason, famSleepState, famKVUsage, famPrefixQueries, famPrefixHits,
		famExternalQueries, famExternalHits, famMMQueries, famMMHits,
		famPreemptions, famPromptTokens, famPromptBySource, famPromptCached, famGenerationTokens,
		successFamily(5),
		famTTFT, famITL, famE2E, famQueue,
		famInference, famPrefill, famDecode, famPrefillKVComputed, famReqTPOT,
		famReqPrompt, famReqGeneration, famReqMaxGeneration, famParamsMaxTokens, famParamsN,
		famIterationTokens, famCacheConfig,
	},
}

// v010 exports the deprecated gpu_* names beside the new ones with the same values, and the old
// time_per_output_token_seconds beside inter_token_latency_seconds (0.10.2 and later 0.10.x).
// The deprecated HELP texts, typo included, are the ones real 0.10 servers print.
var v010 = version{
	Release: snap.Release{Name: "0.10", EngineLabel: true}, python: pythonInfo{"3", "12", "11"},
	families: []family{
		famRunning, famWaiting,
		gauge("vllm:gpu_cache_usage_perc",
			"GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.", kvUsage),
		counter("vllm:gpu_prefix_cache_queries",
			"GPU prefix cache queries, in terms of number of queriedtokens. DEPRECATED: Use vllm:prefix_cache_queries instead.", prefixQueries),
		counter("vllm:gpu_prefix_cache_hits",
			"GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.", prefixHits),
		famKVUsage, famPrefixQueries, famPrefixHits,
		famExternalQueries, famExternalHits, famMMQueries, famMMHits,
		famPreemptions, famPromptTokens, famGenerationTokens,
		successFamily(3),
		famTTFT, famITL, famE2E, famQueue,
		histAs("vllm:time_per_output_token_seconds",
			"Histogram of time per output token in seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.",
			"inter_token_latency_seconds", itlHistogram),
		famInference, famPrefill, famDecode, famReqTPOT,
		famReqPrompt, famReqGeneration, famReqMaxGeneration, famParamsMaxTokens, famParamsN,
		famIterationTokens, famCacheConfig,
	},
}

// v08 is the early V1 layout: old names only and no engine label (one engine per server).
var v08 = version{
	Release: snap.Release{Name: "0.8"}, python: pythonInfo{"3", "12", "9"},
	families: []family{
		famRunning, famWaiting,
		gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", kvUsage),
		counter("vllm:gpu_prefix_cache_queries", "GPU prefix cache queries, in terms of number of queried tokens.", prefixQueries),
		counter("vllm:gpu_prefix_cache_hits", "GPU prefix cache hits, in terms of number of cached tokens.", prefixHits),
		famPreemptions, famPromptTokens, famGenerationTokens,
		successFamily(3),
		famTTFT, famITL, famE2E, famQueue,
		histAs("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
			"inter_token_latency_seconds", itlHistogram),
		famInference, famPrefill, famDecode, famReqTPOT,
		famReqPrompt, famReqGeneration, famReqMaxGeneration, famParamsMaxTokens, famParamsN,
		famIterationTokens, famCacheConfig,
	},
}
