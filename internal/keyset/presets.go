package keyset

// The presets' globs, over the part of a key after its engine prefix (vllm/, sglang/, trtllm/,
// or a run's own metric prefix, see vllm.EnginePrefix); Globs puts every prefix in front. A
// phase's keys have the phase after the prefix: rollout/... is the rollout phase's, */... every
// phase's. TestPresetsMatchRealKeys checks that each glob matches a key of real records, so
// that a preset holds only keys that exist.

// summary are the headline figures: those of the step summary line (hit rate and the share of
// prompt tokens computed, preemptions, KV usage mean and max, running and waiting requests,
// generation rate, TTFT p50, the straggler tail, the clipped share and MFU, and the rollout
// phase's rate, hit rate and KV usage) and of the report's tiles (all hits over all queries,
// token totals and rates, the generating share of the engines' time, the stale-token share,
// TTFT p95). At most 40 keys per engine kind.
var summary = []string{
	"prefix_cache_hit_rate",
	"prefix_cache_hits",
	"prefix_cache_queries",
	"prompt_tokens_computed",
	"prompt_tokens_cached",
	"prompt_tokens_transferred",
	"num_preemptions",
	"kv_cache_usage_perc/mean",
	"kv_cache_usage_perc/max",
	"num_requests_running/mean",
	"num_requests_waiting/mean",
	"generation_tokens",
	"generation_tokens_per_s",
	"prompt_tokens",
	"prompt_tokens_per_s",
	"time_to_first_token_seconds/p50",
	"time_to_first_token_seconds/p95",
	"straggler_tail_s",
	"truncated_fraction",
	"mfu",
	"achieved_tflops_per_gpu",
	"time/engine_s",
	"time/generating_s",
	"time/generating_fraction",
	"policy/stale_generation_tokens",
	"policy/stale_token_fraction",
	"rollout/generation_tokens_per_s",
	"rollout/prefix_cache_hit_rate",
	"rollout/kv_cache_usage_perc/mean",
	"rollout/kv_cache_usage_perc/max",
	"rollout/mfu",
}

// standard are, per engine kind, the figures an RL run is read by week to week: tokens and
// throughput, requests and how they ended, the prefix-cache hit rate, preemptions, KV-cache
// usage, running and waiting requests, the latency quantiles, speculative decoding, the time
// ledger's shares, the compute estimates, the policy versions and staleness, and the fleet
// balance headline; for every phase, its throughput, hit rate, KV usage, queues, TTFT and
// generating share. No raw counts behind a ratio's statistics per worker, no quantile bounds
// (p50_lo, p50_hi), no per-position acceptance rates.
var standard = []string{
	// tokens and throughput
	"prompt_tokens",
	"generation_tokens",
	"prompt_tokens_computed",
	"prompt_tokens_cached",
	"prompt_tokens_transferred",
	"cached_tokens",
	"recomputed_tokens",
	"prompt_tokens_per_s",
	"generation_tokens_per_s",
	"prompt_tokens_per_generating_s",
	"generation_tokens_per_generating_s",
	"truncated_fraction",
	// requests
	"finished_requests",
	"num_requests",
	"request_success/*",
	// the prefix cache
	"prefix_cache_hit_rate",
	"prefix_cache_hit_rate/mean",
	"prefix_cache_hit_rate/max",
	"prefix_cache_hits",
	"prefix_cache_queries",
	"external_prefix_cache_hit_rate",
	// preemptions
	"num_preemptions",
	"num_retracted_*_tokens",
	// KV cache, running and waiting requests
	"kv_cache_usage_perc/mean",
	"kv_cache_usage_perc/max",
	"kv_cache_usage_perc/p95",
	"num_requests_running/mean",
	"num_requests_running/max",
	"num_requests_waiting/mean",
	"num_requests_waiting/max",
	// latency quantiles
	"time_to_first_token_seconds/p[0-9][0-9]",
	"inter_token_latency_seconds/p[0-9][0-9]",
	"e2e_request_latency_seconds/p[0-9][0-9]",
	"request_queue_time_seconds/p[0-9][0-9]",
	// speculative decoding
	"spec_decode_acceptance_rate",
	"spec_decode_mean_acceptance_length",
	"spec_accept_rate/mean",
	"spec_accept_length/mean",
	// the time ledger's shares
	"time/engine_s",
	"time/*_fraction",
	// compute estimates
	"mfu",
	"mbu",
	"achieved_tflops_per_gpu",
	// policy versions and staleness
	"policy/*",
	"policy/publish_lag_s/*",
	// fleet balance
	"straggler_tail_s",
	"generation_tokens_imbalance",
	"worker_idle_fraction/max",
	"prefix_cache_hit_rate/worst_worker",
	// every phase's headline
	"*/generation_tokens_per_s",
	"*/prefix_cache_hit_rate",
	"*/kv_cache_usage_perc/mean",
	"*/kv_cache_usage_perc/max",
	"*/num_requests_running/mean",
	"*/num_requests_waiting/mean",
	"*/time_to_first_token_seconds/p50",
	"*/time/generating_fraction",
}
