// Package window turns successive scrapes of a vLLM engine into windowed values: gauge samples,
// counter increases that survive engine restarts, and histogram bucket increases.
//
// It is pure logic: no clock, no I/O. The step package pools its output per training step.
package window

import "strings"

// Gauge identifies a gauge family vllmstat reads.
type Gauge int

// The gauges, in key order.
const (
	Running Gauge = iota
	Waiting
	KVUsage
	NumGauges
)

// Counter identifies a counter family vllmstat reads.
type Counter int

// The counters, in key order.
const (
	PrefixQueries Counter = iota
	PrefixHits
	Preemptions
	PromptTokens
	GenerationTokens
	RequestSuccess // split by finished_reason
	NumCounters
)

// Hist identifies a histogram family vllmstat reads.
type Hist int

// The histograms, in key order.
const (
	TTFT Hist = iota
	ITL
	E2E
	QueueTime
	NumHists
)

// Names used in metric keys (vLLM's current family names without the "vllm:" prefix).
var (
	GaugeNames   = [NumGauges]string{"num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"}
	CounterNames = [NumCounters]string{"prefix_cache_queries", "prefix_cache_hits", "num_preemptions", "prompt_tokens", "generation_tokens", "request_success"}
	HistNames    = [NumHists]string{"time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds", "request_queue_time_seconds"}
)

// Deprecated names, read only when the current name is absent from a page. vLLM 0.9.2 to 0.10
// export both spellings with equal values, so reading both would count everything twice.
var (
	oldGauge   = map[Gauge]string{KVUsage: "gpu_cache_usage_perc"}
	oldCounter = map[Counter]string{PrefixQueries: "gpu_prefix_cache_queries", PrefixHits: "gpu_prefix_cache_hits"}
	oldHist    = map[Hist]string{ITL: "time_per_output_token_seconds"}
)

// prefixes are the spellings of vLLM's namespace: its own, and the ones Ray's exporter produces
// after sanitising the colon and adding "ray_" (older Ray versions kept the colon).
var prefixes = []string{"vllm:", "vllm_", "ray_vllm_", "ray_vllm:"}

type kind uint8

const (
	kGauge kind = iota
	kCounter
	kHist
)

type role uint8

const (
	rValue role = iota // gauge value, counter value
	rCreated
	rBucket
	rSum
	rCount
)

// meta describes one exact sample name. rank orders the spellings of one family: per page, only
// the spelling with the lowest rank present is read. group ties a _created sample to the value
// samples of the same spelling.
type meta struct {
	kind  kind
	fam   int
	role  role
	rank  int
	group int
}

// nameTable lists every exact sample name vllmstat reads, in a fixed order.
type nameTable struct {
	names []string
	metas []meta
}

func (t *nameTable) add(name string, m meta) {
	t.names = append(t.names, name)
	t.metas = append(t.metas, m)
}

func buildNames() *nameTable {
	t := &nameTable{}
	spellings := func(cur, old string) []string {
		if old == "" {
			return []string{cur}
		}
		return []string{cur, old}
	}
	for g := Gauge(0); g < NumGauges; g++ {
		for i, base := range spellings(GaugeNames[g], oldGauge[g]) {
			for j, p := range prefixes {
				grp := i*len(prefixes) + j
				t.add(p+base, meta{kind: kGauge, fam: int(g), role: rValue, rank: grp, group: grp})
			}
		}
	}
	for c := Counter(0); c < NumCounters; c++ {
		for i, base := range spellings(CounterNames[c], oldCounter[c]) {
			for j, p := range prefixes {
				grp := i*len(prefixes) + j
				t.add(p+base+"_total", meta{kind: kCounter, fam: int(c), role: rValue, rank: 2 * grp, group: grp})
				t.add(p+base+"_created", meta{kind: kCounter, fam: int(c), role: rCreated, rank: 2 * grp, group: grp})
				if strings.HasPrefix(p, "ray_") {
					// Some Ray versions export counters without _total, typed gauge.
					t.add(p+base, meta{kind: kCounter, fam: int(c), role: rValue, rank: 2*grp + 1, group: grp})
				}
			}
		}
	}
	for h := Hist(0); h < NumHists; h++ {
		for i, base := range spellings(HistNames[h], oldHist[h]) {
			for j, p := range prefixes {
				grp := i*len(prefixes) + j
				for _, s := range histSuffixes {
					t.add(p+base+s.suffix, meta{kind: kHist, fam: int(h), role: s.role, rank: grp, group: grp})
				}
			}
		}
	}
	return t
}

var histSuffixes = []struct {
	suffix string
	role   role
}{{"_bucket", rBucket}, {"_sum", rSum}, {"_count", rCount}, {"_created", rCreated}}
