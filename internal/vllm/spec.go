// Package vllm is the one description of the vLLM metric families vllmstat reads: how each is
// spelled on a page across vLLM versions, how its series combine within a worker, which
// per-step statistics and derived metrics it gets, and how it is titled and grouped. The parser
// (window), the step tracker (step), plots, the report, the Prometheus names of step gauges and
// the command-line views all take their names from here.
//
// Adding a family is one entry in Gauges, Counters or Hists (plus a Ratio or Rate if it derives
// one), and an ID constant beside the others.
package vllm

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

// Quantile is one histogram quantile a step record gets.
type Quantile struct {
	Stat string
	Q    float64
}

// HistQuantiles are the quantiles every histogram family gets per step, besides its mean
// (sum/count, when the page has _sum).
var HistQuantiles = []Quantile{{StatP50, 0.5}, {StatP95, 0.95}, {StatP99, 0.99}}

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
	GroupOther       = "Other"
)

// Groups lists the report's groups in page order.
var Groups = []string{GroupPrefixCache, GroupPreemptions, GroupKVCache, GroupQueue, GroupThroughput, GroupSpecDecode, GroupBalance, GroupLatency, GroupOther}

// Family describes one metric family vllmstat reads.
type Family struct {
	// Name is the family's current name without namespace and without _total: the name of its
	// keys ("prefix_cache_queries" gives vllm/prefix_cache_queries).
	Name string
	// Old lists older spellings, best first, read only when no better one is on a page (vLLM
	// 0.9.2 to 0.10 export old and new with equal values; reading both would count twice).
	Old []string
	// Split names a label whose values make one key each ("request_success/stop"); its series
	// are added up by value within a worker. "" for families read as one value.
	Split string
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
	NumGauges
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
	NumHists
)

// Gauges are the gauge families, by Gauge.
var Gauges = [NumGauges]Family{
	Running: {Name: "num_requests_running", Combine: Sum, Scalars: true, Timeline: true,
		Title: "Requests running", Unit: "requests", Group: GroupQueue},
	Waiting: {Name: "num_requests_waiting", Combine: Sum, Scalars: true, Timeline: true,
		Title: "Requests waiting", Unit: "requests", Group: GroupQueue},
	KVUsage: {Name: "kv_cache_usage_perc", Old: []string{"gpu_cache_usage_perc"}, Combine: Mean, Scalars: true, Timeline: true,
		Title: "KV cache usage", Unit: "fraction of KV cache in use (0–1)", Fraction: true, Group: GroupKVCache},
}

// Counters are the counter families, by Counter. On a page each is <name>_total with a
// <name>_created; Ray's exporter may drop _total, read only when no _total spelling is there.
var Counters = [NumCounters]Family{
	PrefixQueries: {Name: "prefix_cache_queries", Old: []string{"gpu_prefix_cache_queries"}, Total: true, Scalars: true, Timeline: true,
		Title: "Prefix cache queries", Unit: "tokens per interval", Group: GroupPrefixCache},
	PrefixHits: {Name: "prefix_cache_hits", Old: []string{"gpu_prefix_cache_hits"}, Total: true, Scalars: true, Timeline: true,
		Title: "Prefix cache hits", Unit: "tokens per interval", Group: GroupPrefixCache},
	Preemptions: {Name: "num_preemptions", Total: true, Scalars: true, Timeline: true,
		Title: "Preemptions", Unit: "preemptions per interval", Group: GroupPreemptions},
	PromptTokens: {Name: "prompt_tokens", Total: true, Timeline: true,
		Title: "Prompt tokens", Unit: "tokens per interval", Group: GroupThroughput},
	GenerationTokens: {Name: "generation_tokens", Total: true, Scalars: true, Timeline: true,
		Title: "Generation tokens", Unit: "tokens per interval", Group: GroupThroughput},
	RequestSuccess: {Name: "request_success", Split: "finished_reason", Total: true,
		Title: "Requests finished", Unit: "requests", Group: GroupThroughput},
}

// Hists are the histogram families, by Hist; each gets HistQuantiles and a mean per step.
var Hists = [NumHists]Family{
	TTFT:      {Name: "time_to_first_token_seconds", Title: "Time to first token", Unit: "seconds", Group: GroupLatency},
	ITL:       {Name: "inter_token_latency_seconds", Old: []string{"time_per_output_token_seconds"}, Title: "Inter-token latency", Unit: "seconds", Group: GroupLatency},
	E2E:       {Name: "e2e_request_latency_seconds", Title: "End-to-end request latency", Unit: "seconds", Group: GroupLatency},
	QueueTime: {Name: "request_queue_time_seconds", Title: "Queue time", Unit: "seconds", Group: GroupQueue},
}

// The derived metrics.
var (
	// PrefixHitRate is the token-weighted prefix-cache hit rate.
	PrefixHitRate = Ratio{Name: "prefix_cache_hit_rate", Num: PrefixHits, Den: PrefixQueries, Scalars: true, Timeline: true,
		Title: "Prefix cache hit rate", Unit: "hits / queries per interval (0–1)", Fraction: true, Group: GroupPrefixCache}

	// Ratios are every ratio a step record gets.
	Ratios = []Ratio{PrefixHitRate}

	// Rates are the per-second throughputs.
	Rates = []Rate{{Of: GenerationTokens, Group: GroupThroughput}, {Of: PromptTokens, Group: GroupThroughput}}
)
