package vllm

import (
	"cmp"
	"strings"
)

// Engine is a kind of inference engine whose pages vllmstat reads. A family of the spec is read
// from the pages of every engine that exports it (see Family.Spellings); a worker is of one kind,
// and its values get that kind's keys.
type Engine uint8

// The engine kinds, in the order records list them.
const (
	VLLM Engine = iota
	SGLang
	TRTLLM
	NumEngines
)

// EngineSpec describes how one engine kind's pages are read.
type EngineSpec struct {
	// Name is the engine's name in messages and docs.
	Name string
	// Prefix is the first part of its workers' keys under the default metric prefix.
	Prefix string
	// Namespaces are the spellings of its namespace on a page, best first (see Namespaces).
	Namespaces []string
	// WorkerLabels tell the engine's workers apart on one page, besides the engine label and
	// the configured worker labels: SGLang's data-parallel rank, and the worker address a
	// router's merged page adds.
	WorkerLabels []string
	// RankLabels name the ranks of processes that export copies of one worker's figures. Their
	// series count once: a worker reads one copy, the lowest ranks' (in the order listed) when
	// first seen, and keeps to it while the page has it (see package page's EnginePage.Copies
	// and package window's Worker.Pick); the labels are no part of series keys.
	RankLabels []string
	// HitRate is the ratio that is the engine's prefix_cache_hit_rate, which fleet balance
	// compares workers by.
	HitRate *Ratio
}

// Engines describes every engine kind.
//
// SGLang's names, types and labels are those of python/sglang/srt/observability/
// metrics_collector.py (formerly python/sglang/srt/metrics/collector.py): SchedulerMetricsCollector
// labels its series model_name, engine_type, tp_rank, pp_rank, moe_ep_rank and, with data
// parallelism, dp_rank; TokenizerMetricsCollector labels its own model_name and engine_type
// only, so a server's token and request counters and its latency histograms carry no rank. The
// router's /engine_metrics (sgl-model-gateway, core/metrics_aggregator.rs, SGLang PR #11456)
// merges every worker's page and adds worker_addr, with every ':' of the pages replaced by '_'.
var Engines = [NumEngines]EngineSpec{
	VLLM: {Name: "vLLM", Prefix: Prefix, Namespaces: Namespaces, HitRate: &PrefixHitRate},
	SGLang: {
		// Through Ray (SGLang 0.5.15 and later can record its metrics with Ray's), the names are
		// sglang_… and Ray's exporter prefixes ray_, as for vLLM's (see Namespaces).
		Name: "SGLang", Prefix: "sglang", Namespaces: []string{"sglang:", "sglang_", "ray_sglang_", "ray_sglang:"},
		WorkerLabels: []string{"dp_rank", "worker_addr"},
		// SGLang's schedulers of one DP rank (its TP and PP ranks) run the same scheduling
		// over the same batch; only attn_tp_rank 0 exports unless the server runs with
		// --enable-metrics-for-all-schedulers (scheduler_metrics_mixin.py,
		// current_scheduler_metrics_enabled), and then every rank exports a copy. A worker first
		// reads the lowest pp_rank, then the lowest tp_rank (attn_tp_rank 0 of the first stage).
		RankLabels: []string{"pp_rank", "tp_rank"},
		HitRate:    &SGLangPrefixHitRate,
	},
	// TensorRT-LLM's names, types and labels are those of tensorrt_llm/metrics/collector.py
	// (MetricsCollector, prefix trtllm_), which trtllm-serve (tensorrt_llm/serve/
	// openai_server.py) creates with return_perf_metrics and serves at /prometheus/metrics from a
	// multiprocess registry. Its series carry model_name and engine_type only, and its gauges
	// the pid of the one process that sets them (prometheus_client's multiprocess mode "all"),
	// which stays in their series keys: a page is one worker, with no worker or rank labels of
	// its own. Dynamo re-exports the families on its own page, spelled trtllm: by its older
	// releases.
	TRTLLM: {
		Name: "TensorRT-LLM", Prefix: "trtllm", Namespaces: []string{"trtllm_", "trtllm:"},
		// The cached over prompt tokens of the requests that finished, as SGLang's (see
		// SGLangPrefixHitRate and docs/trtllm.md).
		HitRate: &SGLangPrefixHitRate,
	},
}

// EnginePrefix is the first part of the keys of an engine kind's workers in a run whose metric
// prefix is prefix: prefix itself for vLLM; for another engine, prefix with its last part
// "vllm" replaced by the engine's own ("vllm" gives "sglang", "rollout/vllm" gives
// "rollout/sglang"), or prefix itself when its last part is not "vllm": a metric prefix of
// one's own names every engine's keys alike (a fleet of two engine kinds then needs a prefix
// ending in "vllm" to keep them apart).
func EnginePrefix(prefix string, e Engine) string {
	if e == VLLM || e >= NumEngines {
		return prefix
	}
	if prefix == Prefix {
		return Engines[e].Prefix
	}
	if head, ok := strings.CutSuffix(prefix, "/"+Prefix); ok {
		return head + "/" + Engines[e].Prefix
	}
	return prefix
}

// Spellings lists a family's names on engine e's pages (without namespace and _total), best
// first; none when e does not export it.
func (f Family) Spellings(e Engine) []string {
	switch e {
	case VLLM:
		if f.SGLangOnly || f.TRTLLMOnly {
			return nil
		}
		return append([]string{cmp.Or(f.PageName, f.Name)}, f.Old...)
	case SGLang:
		return f.SGLang
	case TRTLLM:
		return f.TRTLLM
	}
	return nil
}
