// Package vllm is the one description of the metric families vllmstat reads: how each is
// spelled on a page across vLLM versions and on SGLang's and TensorRT-LLM's pages (see Engines), how its series
// combine within a worker, which per-step statistics and derived metrics it gets, and how it is
// titled and grouped. The parser (page), the step tracker (step), plots, the report, the
// Prometheus names of step gauges and the command-line views all take their names from here.
//
// Adding a family is one entry in Gauges, Counters or Hists (plus a Ratio or Rate if it derives
// one), and an ID constant beside the others. A family that means the same on SGLang's (or
// TensorRT-LLM's) pages lists that engine's spellings and shares its keys; a family of SGLang
// alone is SGLangOnly and keeps SGLang's name, one of TensorRT-LLM alone TRTLLMOnly.
package vllm

import "strings"

// Prefix is the default first part of every step metric key ("vllm/prefix_cache_hit_rate"),
// which a run's metric prefix replaces.
const Prefix = "vllm"

// Namespaces are the spellings of vLLM's namespace on a page, best first: its own, and the ones
// Ray's exporter produces after sanitising the colon and adding "ray_" (older Ray versions kept
// the colon). Per page and family, only the best spelling present is read.
var Namespaces = []string{"vllm:", "vllm_", "ray_vllm_", "ray_vllm:"}

// Combine says how the series of one gauge family that one worker exposes (several model_name
// values, say) make the worker's value.
type Combine uint8

const (
	Sum  Combine = iota // counts of requests add up
	Mean                // a fraction of one cache is averaged
)

// Stat names of the per-step statistics, the last part of a key.
const (
	StatMean = "mean"
	StatMax  = "max"
	StatP50  = "p50"
	StatP95  = "p95"
	StatP99  = "p99"
)

// Quantile is one histogram quantile a step record gets. Lo and Hi name the statistics of the
// range it is known to lie in, which a record gives where the buckets tell no more than that
// range (package step, boundedQuantile).
type Quantile struct {
	Stat   string
	Q      float64
	Lo, Hi string
}

// HistQuantiles are the quantiles every histogram family gets per step, besides its mean
// (sum/count, when the page has _sum).
var HistQuantiles = []Quantile{{StatP50, 0.5, "p50_lo", "p50_hi"}, {StatP95, 0.95, "p95_lo", "p95_hi"}, {StatP99, 0.99, "p99_lo", "p99_hi"}}

// IntervalStats are the statistics of the per-interval samples of a family with Scalars: the
// mean, max and p95 over all samples of the step.
var IntervalStats = []string{StatMean, StatMax, StatP95}

// Report groups, in page order.
const (
	GroupPrefixCache = "Prefix cache"
	GroupPreemptions = "Preemptions"
	GroupKVCache     = "KV cache"
	GroupQueue       = "Queue"
	GroupThroughput  = "Throughput"
	GroupSpecDecode  = "Speculative decoding"
	GroupBalance     = "Fleet balance" // step's own balance keys, not vLLM families
	GroupLatency     = "Latency"
	GroupRequests    = "Requests"
	GroupPD          = "PD disaggregation"
	GroupOther       = "Other"
)

// Groups lists the report's groups in page order.
var Groups = []string{GroupPrefixCache, GroupPreemptions, GroupKVCache, GroupQueue, GroupThroughput, GroupSpecDecode, GroupBalance, GroupLatency, GroupRequests, GroupPD,
	GroupOther}

// Family describes one metric family vllmstat reads.
type Family struct {
	// Name is the family's current name without namespace and without _total: the name of its
	// keys ("prefix_cache_queries" gives vllm/prefix_cache_queries).
	Name string
	// PageName is the family's current name on vLLM's pages where it is not Name.
	PageName string
	// Old lists older spellings, best first, read only when no better one is on a page (vLLM
	// 0.9.2 to 0.10 export old and new with equal values; reading both would count twice).
	Old []string
	// SGLang lists the family's spellings on SGLang pages, best first; none when SGLang exports
	// no such family. SGLangOnly marks a family that vLLM does not export: Name and Old are then
	// read from no vLLM page (TensorRT-LLM's pages may still have it, under TRTLLM).
	SGLang     []string
	SGLangOnly bool
	// TRTLLM lists the family's spellings on TensorRT-LLM's pages, best first; none when
	// TensorRT-LLM exports no such family. TRTLLMOnly marks a family of TensorRT-LLM's alone:
	// Name and Old are then read from no vLLM page.
	TRTLLM     []string
	TRTLLMOnly bool
	// Split names a label whose values make one key each ("request_success/stop"); its series
	// are added up by value within a worker. "" for families read as one value.
	Split string
	// SplitWith names a second label of a gauge whose state set has two labels: a series' split
	// value is then Split's value, ":" and SplitWith's ("weights:offloaded").
	SplitWith string
	// StateOnly marks a family read for the time ledger's states alone: it gets no keys, and
	// its labels name no label of vllmstat's series.
	StateOnly bool
	// Parts names a label whose values other than "" split a summed gauge's series into parts of
	// the series whose value is "" (or which lacks the label): SGLang's priority, under which a
	// server with --enable-priority-scheduling exports its running and queue gauges per priority
	// and as a total under priority="". A worker's value is that of its total series, or the sum
	// of its parts when it has none, never both; the parts' values are kept by the label's value
	// (page.EnginePage.SplitGauges) and make no keys.
	Parts string
	// Combine is how a gauge's series add up within a worker (by Split value if it has one).
	Combine Combine
	// Total gives a counter a step-total key.
	Total bool
	// Scalars gives the family mean/max/p95 of its per-interval samples (gauge values,
	// counter increases) when a tracker has scalars on.
	Scalars bool
	// Timeline keeps the family's per-interval samples in timelines, interval values and plots.
	Timeline bool
	// Title, Unit (of a per-interval sample) and Fraction (values in 0..1) label its plot.
	Title, Unit string
	Fraction    bool
	// Group is the report group of its keys.
	Group string
}

// Ratio is a metric derived from two counters: Offset + Num/Den over the step (and per interval
// when Timeline is set), absent when Den did not move or Num is not on the page. A Num with a
// Split gives one key per value of its label, over the same Den.
type Ratio struct {
	Name     string
	Num, Den Counter
	Offset   float64
	Scalars  bool // mean/max/p95 of the per-interval ratios
	Timeline bool
	Title    string
	Unit     string
	Fraction bool
	Group    string
	// Paired leaves the ratio out of a pool of workers when one of them has the numerator's
	// family without the denominator's: that worker's numerator is no part of what the
	// denominator counts (a server without speculative decoding generates tokens but verifies no
	// drafts).
	Paired bool
}

// CounterSum is a key that adds up the step totals of counters that count one quantity in parts; it
// is present when any of them is on a page.
type CounterSum struct {
	Name        string
	Of          []Counter
	Title, Unit string
	Group       string
}

// Part is a key made of some values of a split counter's label: their step total, or with Share
// their share of the family's total over the step (absent when it did not move). A total is
// present when the family is on a page, 0 when none of the values came.
type Part struct {
	Name   string
	Of     Counter
	Values []string
	Share  bool
	// Whole, with AddsUp, is the counter whose increase the values of Of add up to: a pool's
	// part is then given only where every worker that counts Whole counts Of too, so that the
	// parts of a fleet with an engine older than Of never stand beside the whole of all.
	Whole       Counter
	AddsUp      bool
	Title, Unit string
	Group       string
}

// Unfinished is what requests that never finished added to a counter in the step: the
// counter's increase less the increase of the sum of a histogram that observes the same count
// of each request at its finish. It is exact only where no request was in flight at either end
// of the step (see the step tracker), and vLLM's only: SGLang counts at the finish.
type Unfinished struct {
	Name        string
	Of          Counter
	Less        Hist
	Title, Unit string
	Group       string
}

// SumRatio is the quotient of two histograms' sum increases over the step, histograms that
// observe the same requests at their finish: given only where every worker's two counts rose
// alike, so that both sums are of the same requests.
type SumRatio struct {
	Name        string
	Num, Den    Hist
	Title, Unit string
	Group       string
}

// Rate is a counter's increase per second over the step (and per interval).
type Rate struct {
	Of    Counter
	Group string
}

// Name is the rate's key name: the counter's name plus "_per_s".
func (r Rate) Name() string { return Counters[r.Of].Name + "_per_s" }

// Gauge identifies a gauge family.
type Gauge int

// The gauges, in key order.
const (
	Running Gauge = iota
	Waiting
	KVUsage
	WaitingByReason
	SleepState
	UsedTokens
	GenThroughput
	SpecAcceptLength
	SpecAcceptRate
	PausedReqs
	KVAvailableTokens
	KVEvictableTokens
	KVUsedTokens
	MaxTotalTokens
	TRTLLMPausedReqs
	ResourceState
	FullyAwake
	PauseState
	WeightUpdateActive
	WeightLoad
	NumGauges

	// NumKeyedGauges counts the gauges before the families read for the time ledger's states
	// alone (StateOnly, from ResourceState on): only these may have keys, so a step keeps
	// samples of these alone.
	NumKeyedGauges = ResourceState
)

// Counter identifies a counter family.
type Counter int

// The counters, in key order.
const (
	PrefixQueries Counter = iota
	PrefixHits
	Preemptions
	PromptTokens
	GenerationTokens
	RequestSuccess
	ExternalQueries
	ExternalHits
	MMQueries
	MMHits
	SpecDrafts
	SpecDraftTokens
	SpecAccepted
	SpecAcceptedPerPos
	Corrupted
	CachedTokens
	NumRequests
	AbortedRequests
	RealtimeTokens
	RetractedInputTokens
	RetractedOutputTokens
	SpecVerifyCalls
	PrefillEffectiveTokens
	ForwardSeconds
	BootstrapFailed
	TransferFailed
	PrefillRetries
	PromptBySource
	RecomputedExecutions
	SchedulerStageSeconds
	SchedulerIdleSeconds
	EstFlops
	EstReadBytes
	EstWriteBytes
	NumCounters
)

// Hist identifies a histogram family.
type Hist int

// The histograms, in key order.
const (
	TTFT Hist = iota
	ITL
	E2E
	QueueTime
	PrefillKVComputed
	KVTransferLatency
	KVTransferSpeed
	KVTransferSize
	KVTransferBootstrap
	KVTransferAlloc
	ReqPromptTokens
	ReqGenerationTokens
	ReqMaxGenerationTokens
	ReqParamsMaxTokens
	ReqPrefillTime
	ReqDecodeTime
	ReqInferenceTime
	ReqTPOT
	IterationTokens
	KVBlockLifetime
	KVBlockIdleBeforeEvict
	KVBlockReuseGap
	NumHists
)

// Gauges are the gauge families, by Gauge.
//
// SGLang's scheduler sets its gauges at its log points only: at every prefill batch and every
// decode_log_interval decode batches (scheduler_metrics_mixin.py, log_prefill_stats and
// log_decode_stats), so a sample repeats the value of the last log point.
var Gauges = [NumGauges]Family{
	//
	// TensorRT-LLM sets its gauges from the engine's iteration statistics (collector.py,
	// log_iteration_stats, with enable_iter_perf_stats), which trtllm-serve drains only when a
	// request finishes (openai_server.py, _extract_metrics waking
	// _iteration_stats_collector_loop): a sample repeats the last drained iteration's values.
	Running: {Name: "num_requests_running", SGLang: []string{"num_running_reqs"}, TRTLLM: []string{"num_requests_running"}, Parts: "priority", Combine: Sum, Scalars: true, Timeline: true,
		Title: "Requests running", Unit: "requests", Group: GroupQueue},
	Waiting: {Name: "num_requests_waiting", SGLang: []string{"num_queue_reqs"}, TRTLLM: []string{"num_requests_waiting"}, Parts: "priority", Combine: Sum, Scalars: true, Timeline: true,
		Title: "Requests waiting", Unit: "requests", Group: GroupQueue},
	// SGLang's token_usage is the largest fraction in use of its memory pools (full-attention KV,
	// SWA, Mamba: SchedulerStats.token_usage in metrics_collector.py). TensorRT-LLM's
	// kv_cache_utilization is its used over its maximum KV blocks (kvCacheStats' usedNumBlocks
	// over maxNumBlocks).
	KVUsage: {Name: "kv_cache_usage_perc", Old: []string{"gpu_cache_usage_perc"}, SGLang: []string{"token_usage"},
		TRTLLM: []string{"kv_cache_utilization"}, Combine: Mean, Scalars: true, Timeline: true,
		Title: "KV cache usage", Unit: "fraction of KV cache in use (0–1)", Fraction: true, Group: GroupKVCache},
	// vLLM 0.20: the waiting requests by why they wait (capacity, deferred); they add up to
	// num_requests_waiting.
	WaitingByReason: {Name: "num_requests_waiting_by_reason", Split: "reason", Combine: Sum, Scalars: true,
		Title: "Requests waiting by reason", Unit: "requests", Group: GroupQueue},
	// The engine's sleep state (LLM.sleep() between a colocated trainer's rollouts): awake is 1
	// while awake and 0 while asleep; weights_offloaded or discard_all is 1 at sleep level 1 or
	// 2. Read for Asleep only: it gets no keys of its own.
	SleepState: {Name: "engine_sleep_state", Split: "sleep_state", Combine: Sum,
		Title: "Engine sleep state", Unit: "state", Group: GroupOther},

	// SGLang's own gauges, under its names.
	UsedTokens: {Name: "num_used_tokens", SGLang: []string{"num_used_tokens"}, SGLangOnly: true, Combine: Sum, Scalars: true,
		Title: "KV tokens in use", Unit: "tokens", Group: GroupKVCache},
	// The tokens generated per second since the previous decode log point.
	GenThroughput: {Name: "gen_throughput", SGLang: []string{"gen_throughput"}, SGLangOnly: true, Combine: Sum, Scalars: true,
		Title: "Generation throughput (engine's gauge)", Unit: "tokens per second", Group: GroupThroughput},
	// Speculative decoding: the mean acceptance length and rate of the batches since the previous
	// decode log point; 0 without a speculative algorithm. SGLang has no counters of drafts.
	SpecAcceptLength: {Name: "spec_accept_length", SGLang: []string{"spec_accept_length"}, SGLangOnly: true, Combine: Mean, Scalars: true,
		Title: "Acceptance length (engine's gauge)", Unit: "tokens per draft", Group: GroupSpecDecode},
	SpecAcceptRate: {Name: "spec_accept_rate", SGLang: []string{"spec_accept_rate"}, SGLangOnly: true, Combine: Mean, Scalars: true,
		Title: "Acceptance rate (engine's gauge)", Unit: "accepted / draft tokens (0–1)", Fraction: true, Group: GroupSpecDecode},
	// Requests held by an asynchronous weight sync since the previous log point.
	PausedReqs: {Name: "num_paused_reqs", SGLang: []string{"num_paused_reqs"}, SGLangOnly: true, Combine: Sum, Scalars: true,
		Title: "Requests paused by a weight sync", Unit: "requests", Group: GroupQueue},
	// The full-attention KV pool's token slots, set at the log points: free, holding
	// radix-cached data that may be evicted, and locked by running requests; their sum stays at
	// or below max_total_num_tokens, the pool's size, set once at start (SGLang's
	// SchedulerStats and emit_constants).
	KVAvailableTokens: {Name: "kv_available_tokens", SGLang: []string{"kv_available_tokens"}, SGLangOnly: true, Combine: Sum, Scalars: true,
		Title: "KV pool: free token slots", Unit: "tokens", Group: GroupKVCache},
	KVEvictableTokens: {Name: "kv_evictable_tokens", SGLang: []string{"kv_evictable_tokens"}, SGLangOnly: true, Combine: Sum, Scalars: true,
		Title: "KV pool: evictable (cached) token slots", Unit: "tokens", Group: GroupKVCache},
	KVUsedTokens: {Name: "kv_used_tokens", SGLang: []string{"kv_used_tokens"}, SGLangOnly: true, Combine: Sum, Scalars: true,
		Title: "KV pool: token slots in use", Unit: "tokens", Group: GroupKVCache},
	MaxTotalTokens: {Name: "max_total_num_tokens", SGLang: []string{"max_total_num_tokens"}, SGLangOnly: true, Combine: Sum, Scalars: true,
		Title: "KV pool size", Unit: "tokens", Group: GroupKVCache},

	// TensorRT-LLM's own gauges. Its paused requests (inflightBatchingStats' numPausedRequests)
	// are those its capacity scheduler paused in the iteration, their KV cache freed to be
	// computed again: its nearest figure to preemption, which its page does not count. Only the
	// MAX_UTILIZATION scheduler policy pauses; no weight sync does, so it is no ledger state.
	TRTLLMPausedReqs: {Name: "num_paused_requests", TRTLLM: []string{"num_paused_requests"}, TRTLLMOnly: true, Combine: Sum, Scalars: true,
		Title: "Requests paused by the capacity scheduler", Unit: "requests", Group: GroupPreemptions},

	// The families below give the time ledger's states (package step) and no keys of their own.
	//
	// vLLM's resource states (docs/design/engine_sleep_state.md): 1 for the current state of
	// each resource, 0 for its others; resource scheduler is running or paused, weights
	// resident, offloaded, discarded or unknown, kv_cache resident, released or unknown. One
	// set per engine (data parallelism too); the series appear at the engine's first snapshot,
	// in practice its first sleep or pause. Read by "resource:state".
	ResourceState: {Name: "engine_sleep_resource_state", Split: "resource", SplitWith: "state", Combine: Sum, StateOnly: true,
		Title: "Engine resource state", Unit: "state", Group: GroupOther},
	// vLLM: 1 when scheduling runs and the weights and KV cache are resident (same document).
	FullyAwake: {Name: "engine_fully_awake", Combine: Sum, StateOnly: true,
		Title: "Engine fully awake", Unit: "state", Group: GroupOther},
	// vLLM's pause state, proposed in vLLM PR #45524 (not merged when this was written): a
	// value above 0 is paused.
	PauseState: {Name: "engine_pause_state", Combine: Sum, StateOnly: true,
		Title: "Engine pause state", Unit: "state", Group: GroupOther},
	// vLLM's dev mode (VLLM_SERVER_DEV_MODE=1, vllm/entrypoints/serve/dev/rlhf/metrics.py): 1
	// between start_weight_update and finish_weight_update, a weight load in progress.
	WeightUpdateActive: {Name: "rl_weight_update_active", Combine: Sum, StateOnly: true,
		Title: "Weight update in progress", Unit: "state", Group: GroupOther},
	// SGLang (PR #27363, observability/metrics_collector.py observe_weight_load): set at the
	// end of each update_weights_from_{disk,distributed,tensor,ipc} call to its duration, per
	// source; the engine is paused meanwhile. Kept by source: a new load shows as a series
	// appearing or a value changing.
	WeightLoad: {Name: "weight_load_duration_seconds", SGLang: []string{"weight_load_duration_seconds"}, SGLangOnly: true,
		Split: "source", Combine: Sum, StateOnly: true,
		Title: "Weight load duration (engine's gauge)", Unit: "seconds", Group: GroupOther},
}

// Load lists the gauges that measure an engine's load: a sample taken while it sleeps is no
// sample of them, so that a fleet asleep while the policy trains does not drag their means down.
var Load = [NumGauges]bool{Running: true, Waiting: true, KVUsage: true, WaitingByReason: true}

// Asleep reports whether an engine's sleep-state values (SleepState's by label value) say it
// sleeps: awake is 0, or, without awake, a sleep level is set.
func Asleep(state map[string]float64) bool {
	if awake, ok := state["awake"]; ok {
		return awake == 0
	}
	return state["weights_offloaded"] > 0 || state["discard_all"] > 0
}

// EngineAsleep reports whether an engine sleeps, from its resource states when its page has
// them, else from the legacy sleep state. vLLM's design (docs/design/engine_sleep_state.md) sets
// the legacy awake flag to the fully-awake predicate, so it reads 0 during a scheduler pause or a
// partial wake too: only the weights' state tells a sleep from those.
func EngineAsleep(sleepState, resources map[string]float64) bool {
	if len(resources) > 0 {
		return WeightsAsleep(resources)
	}
	return Asleep(sleepState)
}

// WeightsAsleep reports whether an engine's resource states (ResourceState's by
// "resource:state") say it sleeps: its weights are offloaded (sleep level 1) or discarded
// (level 2).
func WeightsAsleep(rs map[string]float64) bool {
	return rs["weights:offloaded"] > 0 || rs["weights:discarded"] > 0
}

// NotAllBack reports whether an engine's resource states show a resource that is not back:
// a current state other than running (the scheduler's) or resident (the weights' and KV
// cache's). Without the family nothing shows.
func NotAllBack(rs map[string]float64) bool {
	for k, v := range rs {
		if v > 0 && !strings.HasSuffix(k, ":running") && !strings.HasSuffix(k, ":resident") {
			return true
		}
	}
	return false
}

// SchedulerPaused reports whether an engine's resource states show its scheduler paused with
// its weights resident: a pause, or sleep(level=0), rather than a sleep that moved the weights.
func SchedulerPaused(rs map[string]float64) bool {
	return rs["scheduler:paused"] > 0 && rs["weights:resident"] > 0
}

// LedgerGauges are the gauges whose presence on a worker's page makes it an engine in the time
// ledger: the running requests and the state families. A worker without any of them is no
// engine: SGLang's tokenizer of a data-parallel server is a worker of its own (its series
// carry no dp_rank) that counts tokens and requests but schedules nothing, and its time is no
// engine's.
var LedgerGauges = [NumGauges]bool{Running: true, SleepState: true, PausedReqs: true, ResourceState: true, FullyAwake: true,
	PauseState: true, WeightUpdateActive: true, WeightLoad: true}

// Counters are the counter families, by Counter. On a page each is <name>_total with a
// <name>_created; Ray's exporter may drop _total, read only when no _total spelling is there.
var Counters = [NumCounters]Family{
	PrefixQueries: {Name: "prefix_cache_queries", Old: []string{"gpu_prefix_cache_queries"}, Total: true, Scalars: true, Timeline: true,
		Title: "Prefix cache queries", Unit: "tokens per interval", Group: GroupPrefixCache},
	PrefixHits: {Name: "prefix_cache_hits", Old: []string{"gpu_prefix_cache_hits"}, Total: true, Scalars: true, Timeline: true,
		Title: "Prefix cache hits", Unit: "tokens per interval", Group: GroupPrefixCache},
	// SGLang's preemption is the retraction of a running request (its scheduler's counter
	// num_retracted_requests, named so beside the gauge num_retracted_reqs).
	Preemptions: {Name: "num_preemptions", SGLang: []string{"num_retracted_requests"}, Total: true, Scalars: true, Timeline: true,
		Title: "Preemptions", Unit: "preemptions per interval", Group: GroupPreemptions},
	// SGLang counts a request's prompt and generated tokens when it finishes
	// (TokenizerMetricsCollector.observe_one_finished_request), vLLM as it computes them.
	// TensorRT-LLM counts them, its finished requests by finished_reason and its cached prompt
	// tokens (CachedTokens) at a request's finish too (collector.py, log_request_metrics_dict,
	// with return_perf_metrics; once per candidate of a request with several).
	PromptTokens: {Name: "prompt_tokens", SGLang: []string{"prompt_tokens"}, TRTLLM: []string{"prompt_tokens"}, Total: true, Timeline: true,
		Title: "Prompt tokens", Unit: "tokens per interval", Group: GroupThroughput},
	GenerationTokens: {Name: "generation_tokens", SGLang: []string{"generation_tokens"}, TRTLLM: []string{"generation_tokens"}, Total: true,
		Scalars: true, Timeline: true,
		Title: "Generation tokens", Unit: "tokens per interval", Group: GroupThroughput},
	RequestSuccess: {Name: "request_success", TRTLLM: []string{"request_success"}, Split: "finished_reason", Total: true,
		Title: "Requests finished", Unit: "requests", Group: GroupThroughput},
	// A KV connector's cross-instance cache (LMCache, NIXL, ...): tokens asked of it and served.
	ExternalQueries: {Name: "external_prefix_cache_queries", Total: true,
		Title: "External prefix cache queries", Unit: "tokens", Group: GroupPrefixCache},
	ExternalHits: {Name: "external_prefix_cache_hits", Total: true,
		Title: "External prefix cache hits", Unit: "tokens", Group: GroupPrefixCache},
	// The multi-modal cache counts items; only its hit rate is kept.
	MMQueries: {Name: "mm_cache_queries", Title: "Multi-modal cache queries", Unit: "items", Group: GroupPrefixCache},
	MMHits:    {Name: "mm_cache_hits", Title: "Multi-modal cache hits", Unit: "items", Group: GroupPrefixCache},
	// Speculative decoding, on pages of engines started with a speculative config.
	SpecDrafts: {Name: "spec_decode_num_drafts", Total: true,
		Title: "Speculative drafts", Unit: "drafts", Group: GroupSpecDecode},
	// TensorRT-LLM's two of the same names count per iteration (specDecodingStats' numDraftTokens
	// and numAcceptedTokens, logged at each drain of the iteration statistics).
	SpecDraftTokens: {Name: "spec_decode_num_draft_tokens", TRTLLM: []string{"spec_decode_num_draft_tokens"}, Total: true,
		Title: "Draft tokens", Unit: "tokens", Group: GroupSpecDecode},
	SpecAccepted: {Name: "spec_decode_num_accepted_tokens", TRTLLM: []string{"spec_decode_num_accepted_tokens"}, Total: true,
		Title: "Accepted draft tokens", Unit: "tokens", Group: GroupSpecDecode},
	SpecAcceptedPerPos: {Name: "spec_decode_num_accepted_tokens_per_pos", Split: "position",
		Title: "Accepted draft tokens by position", Unit: "tokens", Group: GroupSpecDecode},
	// Requests with NaNs in their logits (only with VLLM_COMPUTE_NANS_IN_LOGITS=1).
	Corrupted: {Name: "corrupted_requests", Total: true, Title: "Corrupted requests", Unit: "requests", Group: GroupOther},

	// SGLang's own counters, under its names. Its prompt tokens found in a prefix cache, counted
	// at the request's finish like its prompt tokens; series by cache_source (device, host,
	// storage_<backend>, or total from a server that does not tell) add up. TensorRT-LLM's
	// prompt_cached_tokens_total counts the same at the same moment (collector.py,
	// log_request_metrics_dict), its one series created at 0 with the collector.
	CachedTokens: {Name: "cached_tokens", SGLang: []string{"cached_tokens"}, TRTLLM: []string{"prompt_cached_tokens"}, SGLangOnly: true, Total: true,
		Title: "Cached prompt tokens", Unit: "tokens", Group: GroupPrefixCache},
	NumRequests: {Name: "num_requests", SGLang: []string{"num_requests"}, SGLangOnly: true, Total: true,
		Title: "Requests processed", Unit: "requests", Group: GroupThroughput},
	AbortedRequests: {Name: "num_aborted_requests", SGLang: []string{"num_aborted_requests"}, SGLangOnly: true, Total: true,
		Title: "Requests aborted", Unit: "requests", Group: GroupThroughput},
	// The tokens the scheduler computed, by mode: prefill_compute, prefill_cache, decode.
	RealtimeTokens: {Name: "realtime_tokens", SGLang: []string{"realtime_tokens"}, SGLangOnly: true, Split: "mode", Total: true,
		Title: "Tokens processed by mode", Unit: "tokens", Group: GroupThroughput},
	// A retraction frees a running request's KV cache; the request's input tokens and the
	// output tokens it had are computed again when it is scheduled again
	// (SchedulerMetricsCollector.increment_retracted_reqs). See RecomputedTokens.
	RetractedInputTokens: {Name: "num_retracted_input_tokens", SGLang: []string{"num_retracted_input_tokens"}, SGLangOnly: true, Total: true,
		Title: "Retracted input tokens", Unit: "tokens", Group: GroupPreemptions},
	RetractedOutputTokens: {Name: "num_retracted_output_tokens", SGLang: []string{"num_retracted_output_tokens"}, SGLangOnly: true, Total: true,
		Title: "Retracted output tokens", Unit: "tokens", Group: GroupPreemptions},
	// The verify passes of speculative decoding, counted by the tokenizer at a request's finish
	// (observe_one_finished_request's spec_verify_ct); no series without speculative decoding.
	SpecVerifyCalls: {Name: "spec_verify_calls", SGLang: []string{"spec_verify_calls"}, SGLangOnly: true, Total: true,
		Title: "Speculative verify calls", Unit: "calls", Group: GroupSpecDecode},
	// The prefill tokens by where they came from, a retracted request's second prefill left out:
	// input (computed), device_hit, host_hit and storage_hit (found in one of the cache's tiers).
	// Every mode's series is there from the start (increment_effective_prefill_tokens).
	PrefillEffectiveTokens: {Name: "prefill_effective_tokens", SGLang: []string{"prefill_effective_tokens"}, SGLangOnly: true, Split: "mode", Total: true,
		Title: "Effective prefill tokens by tier", Unit: "tokens", Group: GroupPrefixCache},
	// The time the GPU executed forward passes, by category "forward_" and the forward mode
	// (forward_extend, forward_decode, ...); exported with SGLANG_ENABLE_METRICS_DEVICE_TIMER
	// (utils/device_timer.py).
	ForwardSeconds: {Name: "forward_execution_seconds", SGLang: []string{"forward_execution_seconds"}, SGLangOnly: true, Split: "category", Total: true,
		Title: "GPU busy in forward passes", Unit: "seconds", Group: GroupThroughput},
	// The scheduler's own clock (SGLang PR #37636, merged September 2026, on PR #37461's
	// accounting; observability/scheduler_stage_metrics.py
	// SchedulerStageMetricsRecorder): its loop's wall time by mutually exclusive stage, category
	// one of other, recv_requests, process_input_requests, get_next_batch_to_run, process_queue,
	// run_batch, process_batch_result, sanity_check_cache and idle (on_idle's housekeeping and
	// sleep); the categories add up to the loop's wall time. With metrics on only, and added to
	// in seconds at the scheduler's periodic update (at most once a second, at a busy or idle
	// transition). A later recorder also keys the time by forward overlap (full, partial,
	// none): series that a second label splits are summed by category. The time ledger takes
	// an interval's length on the engine's clock from it.
	SchedulerStageSeconds: {Name: "scheduler_stage_seconds", SGLang: []string{"scheduler_stage_seconds"}, SGLangOnly: true, Split: "category", Total: true,
		Title: "Scheduler wall time by stage", Unit: "seconds", Group: GroupThroughput},
	// The scheduler's wall time with nothing to run (SGLang PR #37461, the metrics reporter's
	// record_scheduler_idle and record_scheduler_active: from a fully idle loop to the next
	// active one), published with the stage seconds. The time ledger's idle time where a page has it.
	SchedulerIdleSeconds: {Name: "scheduler_idle_seconds", SGLang: []string{"scheduler_idle_seconds"}, SGLangOnly: true, Total: true,
		Title: "Scheduler idle time", Unit: "seconds", Group: GroupThroughput},
	// PD disaggregation: requests whose bootstrap or KV transfer failed, and prefill retries.
	BootstrapFailed: {Name: "num_bootstrap_failed_reqs", SGLang: []string{"num_bootstrap_failed_reqs"}, SGLangOnly: true, Total: true,
		Title: "Requests whose bootstrap failed", Unit: "requests", Group: GroupPD},
	TransferFailed: {Name: "num_transfer_failed_reqs", SGLang: []string{"num_transfer_failed_reqs"}, SGLangOnly: true, Total: true,
		Title: "Requests whose KV transfer failed", Unit: "requests", Group: GroupPD},
	PrefillRetries: {Name: "num_prefill_retries", SGLang: []string{"num_prefill_retries"}, SGLangOnly: true, Total: true,
		Title: "Prefill retries", Unit: "retries", Group: GroupPD},

	// vLLM's prompt tokens by where their KV came from: local_compute, local_cache_hit,
	// external_kv_transfer (vLLM PR #33290, 0.16 on); they add up to prompt_tokens. Read for
	// its parts (PromptComputed, PromptCached, PromptTransferred).
	PromptBySource: {Name: "prompt_tokens_by_source", Split: "source",
		Title: "Prompt tokens by source", Unit: "tokens", Group: GroupPrefixCache},
	// vLLM after 0.20: token positions executed again after a preemption (see RecomputedTokens).
	RecomputedExecutions: {Name: "recomputed_token_executions",
		Title: "Token positions executed again", Unit: "tokens", Group: GroupPreemptions},
	// The engines' estimates of their floating point operations and memory traffic per GPU,
	// with --enable-mfu-metrics (vLLM PR #30950, vllm/v1/metrics/perf.py; SGLang's
	// SchedulerMetricsCollector, same names). Read for the compute keys (package step).
	EstFlops: {Name: "estimated_flops_per_gpu", SGLang: []string{"estimated_flops_per_gpu"},
		Title: "Estimated FLOPs per GPU", Unit: "FLOPs", Group: GroupThroughput},
	EstReadBytes: {Name: "estimated_read_bytes_per_gpu", SGLang: []string{"estimated_read_bytes_per_gpu"},
		Title: "Estimated bytes read per GPU", Unit: "bytes", Group: GroupThroughput},
	EstWriteBytes: {Name: "estimated_write_bytes_per_gpu", SGLang: []string{"estimated_write_bytes_per_gpu"},
		Title: "Estimated bytes written per GPU", Unit: "bytes", Group: GroupThroughput},
}

// Hists are the histogram families, by Hist; each gets HistQuantiles and a mean per step.
var Hists = [NumHists]Family{
	// TensorRT-LLM observes its latencies at a request's finish (collector.py,
	// log_request_metrics_dict), a zero TTFT, prefill, decode or inference time not at all.
	TTFT: {Name: "time_to_first_token_seconds", SGLang: []string{"time_to_first_token_seconds"}, TRTLLM: []string{"time_to_first_token_seconds"},
		Title: "Time to first token", Unit: "seconds", Group: GroupLatency},
	ITL: {Name: "inter_token_latency_seconds", Old: []string{"time_per_output_token_seconds"}, SGLang: []string{"inter_token_latency_seconds"},
		Title: "Inter-token latency", Unit: "seconds", Group: GroupLatency},
	E2E: {Name: "e2e_request_latency_seconds", SGLang: []string{"e2e_request_latency_seconds"}, TRTLLM: []string{"e2e_request_latency_seconds"},
		Title: "End-to-end request latency", Unit: "seconds", Group: GroupLatency},
	QueueTime: {Name: "request_queue_time_seconds", SGLang: []string{"queue_time_seconds"}, TRTLLM: []string{"request_queue_time_seconds"},
		Title: "Queue time", Unit: "seconds", Group: GroupQueue},
	// New KV tokens computed in a request's prefill, cached tokens excluded.
	PrefillKVComputed: {Name: "request_prefill_kv_computed_tokens", Title: "Prefill KV tokens computed", Unit: "tokens", Group: GroupPrefixCache},
	// SGLang's PD disaggregation, per KV transfer (SchedulerMetricsCollector's
	// observe_kv_transfer_metrics and observe_kv_transfer_bootstrap), in SGLang's units.
	KVTransferLatency: {Name: "kv_transfer_latency_ms", SGLang: []string{"kv_transfer_latency_ms"}, SGLangOnly: true,
		Title: "KV transfer latency", Unit: "milliseconds", Group: GroupPD},
	KVTransferSpeed: {Name: "kv_transfer_speed_gb_s", SGLang: []string{"kv_transfer_speed_gb_s"}, SGLangOnly: true,
		Title: "KV transfer speed", Unit: "GB per second", Group: GroupPD},
	KVTransferSize: {Name: "kv_transfer_total_mb", SGLang: []string{"kv_transfer_total_mb"}, SGLangOnly: true,
		Title: "KV transfer size", Unit: "MB", Group: GroupPD},
	KVTransferBootstrap: {Name: "kv_transfer_bootstrap_ms", SGLang: []string{"kv_transfer_bootstrap_ms"}, SGLangOnly: true,
		Title: "KV transfer bootstrap time", Unit: "milliseconds", Group: GroupPD},
	KVTransferAlloc: {Name: "kv_transfer_alloc_ms", SGLang: []string{"kv_transfer_alloc_ms"}, SGLangOnly: true,
		Title: "KV transfer allocation wait", Unit: "milliseconds", Group: GroupPD},

	// The shape of the requests that finished (vllm/v1/metrics/loggers.py, observed at a
	// request's finish): its prompt and generated tokens (SGLang's TokenizerMetricsCollector
	// observes the same at the same moment), the longest generation among its n samples
	// (request_max_num_generation_tokens, observed once all n finished:
	// ParentRequest.observe_finished_request in vllm/v1/engine/parallel_sampling.py; for n=1
	// the request's generated tokens, not the max_tokens it asked for), the max_tokens it asked
	// for (request_params_max_tokens, observed per finished request that set it: vLLM's V0
	// engine from vllm-project/vllm#9881, 0.6.4; the V1 engine from #14055, 0.8.0), and its
	// time in prefill (first scheduled to first token), decode (first to last token) and
	// running (first scheduled to last token).
	ReqPromptTokens: {Name: "request_prompt_tokens", SGLang: []string{"prompt_tokens_histogram"},
		Title: "Prompt length", Unit: "tokens per request", Group: GroupRequests},
	ReqGenerationTokens: {Name: "request_generation_tokens", SGLang: []string{"generation_tokens_histogram"},
		Title: "Generation length", Unit: "tokens per request", Group: GroupRequests},
	ReqMaxGenerationTokens: {Name: "request_max_num_generation_tokens",
		Title: "Longest generation of a request's samples", Unit: "tokens per request", Group: GroupRequests},
	ReqParamsMaxTokens: {Name: "request_params_max_tokens",
		Title: "Requested max tokens", Unit: "tokens per request", Group: GroupRequests},
	// TensorRT-LLM's three of the same names measure the same spans (collector.py: first
	// scheduled to first token, first to last token, first scheduled to last token).
	ReqPrefillTime: {Name: "request_prefill_time_seconds", TRTLLM: []string{"request_prefill_time_seconds"},
		Title: "Prefill time per request", Unit: "seconds", Group: GroupRequests},
	ReqDecodeTime: {Name: "request_decode_time_seconds", TRTLLM: []string{"request_decode_time_seconds"},
		Title: "Decode time per request", Unit: "seconds", Group: GroupRequests},
	ReqInferenceTime: {Name: "request_inference_time_seconds", TRTLLM: []string{"request_inference_time_seconds"},
		Title: "Running time per request", Unit: "seconds", Group: GroupRequests},
	// TensorRT-LLM's time_per_output_token_seconds: one observation per finished request, its
	// mean time per generated token, where vLLM's inter-token latency observes every token; so
	// it keeps a name of its own.
	ReqTPOT: {Name: "request_time_per_output_token_seconds", TRTLLM: []string{"time_per_output_token_seconds"}, TRTLLMOnly: true,
		Title: "Time per output token per request", Unit: "seconds", Group: GroupLatency},
	// The tokens of each engine step: the batch size in tokens. vLLM names the histogram
	// iteration_tokens_total, a name the key leaves out: it is no counter's total. Up to 0.20 it
	// counts prompt and generated tokens, after it computed prompt tokens only (PR #43346).
	IterationTokens: {Name: "iteration_tokens", PageName: "iteration_tokens_total",
		Title: "Tokens per engine step", Unit: "tokens", Group: GroupRequests},
	// With --kv-cache-metrics, sampled KV blocks: from allocation to eviction, idle before
	// eviction, and between two reuses.
	KVBlockLifetime: {Name: "kv_block_lifetime_seconds", Title: "KV block lifetime", Unit: "seconds", Group: GroupKVCache},
	KVBlockIdleBeforeEvict: {Name: "kv_block_idle_before_evict_seconds", Title: "KV block idle before eviction", Unit: "seconds",
		Group: GroupKVCache},
	KVBlockReuseGap: {Name: "kv_block_reuse_gap_seconds", Title: "KV block reuse gap", Unit: "seconds", Group: GroupKVCache},
}

// The derived metrics.
var (
	// PrefixHitRate is the token-weighted prefix-cache hit rate.
	PrefixHitRate = Ratio{Name: "prefix_cache_hit_rate", Num: PrefixHits, Den: PrefixQueries, Scalars: true, Timeline: true,
		Title: "Prefix cache hit rate", Unit: "hits / queries per interval (0–1)", Fraction: true, Group: GroupPrefixCache}

	// SGLangPrefixHitRate is SGLang's token-weighted prefix-cache hit rate: the cached prompt
	// tokens over the prompt tokens of the requests that finished. SGLang's cache_hit_rate
	// gauge is the last prefill batch's ratio, and decode log points set it to 0, so it is not
	// read. It is TensorRT-LLM's too: its two counters count the same requests at their finish,
	// where its reused and missed KV block counters move only when the iteration statistics are
	// drained, count whole blocks, and count requests as they are scheduled, those later
	// aborted too.
	SGLangPrefixHitRate = Ratio{Name: "prefix_cache_hit_rate", Num: CachedTokens, Den: PromptTokens, Scalars: true, Timeline: true,
		Title: "Prefix cache hit rate", Unit: "cached / prompt tokens per interval (0–1)", Fraction: true, Group: GroupPrefixCache}

	ExternalHitRate = Ratio{Name: "external_prefix_cache_hit_rate", Num: ExternalHits, Den: ExternalQueries,
		Title: "External prefix cache hit rate", Unit: "hits / queries (0–1)", Fraction: true, Group: GroupPrefixCache}
	MMHitRate = Ratio{Name: "mm_cache_hit_rate", Num: MMHits, Den: MMQueries,
		Title: "Multi-modal cache hit rate", Unit: "hits / queries (0–1)", Fraction: true, Group: GroupPrefixCache}

	// SpecAcceptanceRate is the fraction of draft tokens accepted.
	SpecAcceptanceRate = Ratio{Name: "spec_decode_acceptance_rate", Num: SpecAccepted, Den: SpecDraftTokens,
		Title: "Draft acceptance rate", Unit: "accepted / draft tokens (0–1)", Fraction: true, Group: GroupSpecDecode}
	// SpecMeanAcceptanceLength is the tokens a draft yields on average: the accepted ones
	// plus the one the target model always adds.
	SpecMeanAcceptanceLength = Ratio{Name: "spec_decode_mean_acceptance_length", Num: SpecAccepted, Den: SpecDrafts, Offset: 1,
		Title: "Mean acceptance length", Unit: "tokens per draft", Group: GroupSpecDecode}
	// SpecAcceptanceRatePerPos is, per draft position, the fraction of drafts whose token at
	// that position was accepted: one key per position.
	SpecAcceptanceRatePerPos = Ratio{Name: "spec_decode_acceptance_rate_per_pos", Num: SpecAcceptedPerPos, Den: SpecDrafts,
		Title: "Acceptance rate by draft position", Unit: "accepted / drafts (0–1)", Fraction: true, Group: GroupSpecDecode}

	// SGLangSpecAcceptLength is SGLang's mean acceptance length from its counters: the tokens
	// generated per verify pass, as SGLang's own server log computes it. It counts each
	// request's first token, which its prefill made, so it exceeds the accepted tokens per draft
	// plus one by the requests over the verify calls. Exact over a step, where the gauge
	// spec_accept_length is the last log interval's.
	SGLangSpecAcceptLength = Ratio{Name: "spec_decode_mean_acceptance_length", Num: GenerationTokens, Den: SpecVerifyCalls, Paired: true,
		Title: "Mean acceptance length", Unit: "tokens per verify pass", Group: GroupSpecDecode}
	// PrefillTierShare is each mode's share of SGLang's effective prefill tokens: device_hit,
	// host_hit and storage_hit are the hit rates of the cache's tiers, input the share
	// computed. Their sum over the hit modes is the step's prefix-cache hit rate with
	// retracted requests' second prefills left out.
	PrefillTierShare = Ratio{Name: "prefill_effective_share", Num: PrefillEffectiveTokens, Den: PrefillEffectiveTokens,
		Title: "Effective prefill tokens by tier (share)", Unit: "tier tokens / prefill tokens (0–1)", Fraction: true, Group: GroupPrefixCache}

	// Ratios are every ratio a step record gets. Two may share a name when they are one
	// metric of two engines: a worker has the counters of one of them only.
	Ratios = []Ratio{PrefixHitRate, ExternalHitRate, MMHitRate, SpecAcceptanceRate, SpecMeanAcceptanceLength, SpecAcceptanceRatePerPos,
		SGLangPrefixHitRate, SGLangSpecAcceptLength, PrefillTierShare}

	// Rates are the per-second throughputs.
	Rates = []Rate{{Of: GenerationTokens, Group: GroupThroughput}, {Of: PromptTokens, Group: GroupThroughput},
		// engine-seconds of forward passes per second of the step: the fleet's busy GPUs
		{Of: ForwardSeconds, Group: GroupThroughput}}

	// RecomputedTokens are SGLang's tokens computed again because their request was retracted.
	// RecomputedTokens are the tokens computed again because their request was preempted:
	// vLLM's token positions executed again, SGLang's retracted input and output tokens.
	RecomputedTokens = CounterSum{Name: "recomputed_tokens", Of: []Counter{RetractedInputTokens, RetractedOutputTokens, RecomputedExecutions},
		Title: "Tokens computed again after a preemption", Unit: "tokens", Group: GroupPreemptions}
	// FinishedRequests are the requests that finished, for any reason (aborts included).
	FinishedRequests = CounterSum{Name: "finished_requests", Of: []Counter{RequestSuccess},
		Title: "Requests finished", Unit: "requests", Group: GroupRequests}

	// Sums are every sum of counters a step record gets.
	Sums = []CounterSum{RecomputedTokens, FinishedRequests}

	// TruncatedFraction is the share of the finished requests that stopped at their max_tokens
	// (or the model's length): the clip ratio a trainer needs, exact per step. No share of
	// aborted requests is taken from request_success: vLLM never counts an aborted request
	// there (its frontend drops the request's state without recording it as finished,
	// OutputProcessor.abort_requests in vllm/v1/engine/output_processor.py, on every version
	// up to 0.20), so finished_reason="abort" stays 0 whatever the trainer aborted.
	TruncatedFraction = Part{Name: "truncated_fraction", Of: RequestSuccess, Values: []string{"length"}, Share: true,
		Title: "Requests truncated at their length limit", Unit: "of finished requests (0–1)", Group: GroupRequests}
	// AbortedPromptTokens are the prompt tokens of the requests that were prefilled in the step
	// and did not finish: vLLM counts a request's prompt tokens in prompt_tokens_total at its
	// first token (IterationStats.update_from_output) and observes request_prompt_tokens only
	// when it finishes, which an aborted request never does. Requests aborted before their
	// first token count in neither.
	AbortedPromptTokens = Unfinished{Name: "aborted_prompt_tokens", Of: PromptTokens, Less: ReqPromptTokens,
		Title: "Prompt tokens of requests that did not finish", Unit: "tokens", Group: GroupRequests}
	// MaxTokensUsed is how much of the generation budget the step's finished requests asked for
	// they used: their generated tokens over their max_tokens, exact from the two histograms'
	// sums. truncated_fraction is the share of them that reached it.
	MaxTokensUsed = SumRatio{Name: "max_tokens_used_fraction", Num: ReqGenerationTokens, Den: ReqParamsMaxTokens,
		Title: "Generated tokens of the max_tokens asked", Unit: "generated / max_tokens (0–1)", Group: GroupRequests}
	// SumRatios are every SumRatio a step record gets.
	SumRatios = []SumRatio{MaxTokensUsed}
	// Unfinisheds are every Unfinished a step record gets.
	Unfinisheds = []Unfinished{AbortedPromptTokens}
	// The prefill split: the prompt tokens computed, found in the local prefix cache, brought
	// by a KV connector. They add up to prompt_tokens.
	PromptComputed = Part{Name: "prompt_tokens_computed", Of: PromptBySource, Values: []string{"local_compute"},
		Whole: PromptTokens, AddsUp: true,
		Title: "Prompt tokens computed", Unit: "tokens", Group: GroupPrefixCache}
	PromptCached = Part{Name: "prompt_tokens_cached", Of: PromptBySource, Values: []string{"local_cache_hit"},
		Whole: PromptTokens, AddsUp: true,
		Title: "Prompt tokens from the local prefix cache", Unit: "tokens", Group: GroupPrefixCache}
	PromptTransferred = Part{Name: "prompt_tokens_transferred", Of: PromptBySource, Values: []string{"external_kv_transfer"},
		Whole: PromptTokens, AddsUp: true,
		Title: "Prompt tokens transferred by a KV connector", Unit: "tokens", Group: GroupPrefixCache}

	// LabelParts are the keys made of parts of split counters.
	LabelParts = []Part{TruncatedFraction, PromptComputed, PromptCached, PromptTransferred}
)
