package trtllmpage

import (
	"strconv"

	"github.com/vllmstat/vllmstat/internal/sim/promtext"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// gauge writes a gauge of the last logged iteration, labelled with the server's pid.
func (r *renderer) gauge(v func(it *snap.TrtllmIteration) float64) func([]byte, string, *snap.EngineStats, *snap.PageState) []byte {
	return func(dst []byte, name string, e *snap.EngineStats, st *snap.PageState) []byte {
		ls := r.labels()
		ls.Add("pid", pid(st))
		return promtext.AppendSample(dst, name, "", &ls, "", v(&e.Trt.Logged))
	}
}

// info writes a *_config_info gauge: 1, with the configuration as labels.
func (r *renderer) info(config func() [][2]string) func([]byte, string, *snap.EngineStats, *snap.PageState) []byte {
	return func(dst []byte, name string, _ *snap.EngineStats, st *snap.PageState) []byte {
		labels := append([][2]string{{"engine_type", engineType}, {"model_name", r.model}}, config()...)
		return promtext.AppendSampleLabels(dst, name, append(labels, [2]string{"pid", pid(st)}), 1)
	}
}

// logged is the creation of the iteration gauges, all set at the first logged iteration.
func logged(t *snap.TrtllmStats) (uint64, bool) { return t.First.Iteration, t.First.Iteration > 0 }

func constant(v float64) func(*snap.TrtllmIteration) float64 {
	return func(*snap.TrtllmIteration) float64 { return v }
}

// gauges are the collector's gauges in the order log_config_info and log_iteration_stats set
// them. The configuration is trtllm-serve's defaults for the simulated model (OpenAIServer.
// _log_config_info_metrics): dtype and the KV cache's dtype "auto", no quantization, one GPU,
// block reuse and partial reuse on, 0.9 of the free memory for the KV cache; no speculative
// decoding, so no speculative_config_info. The executor's pytorch backend reports 0 for the
// static and runtime batch and token limits, the CPU and pinned memory, and the decoded tokens
// per iteration.
func (r *renderer) gauges() []family {
	maxBlocks := float64(r.maxBlocks)
	return []family{
		{"model_config_info", "Model configuration info", atStart, r.info(func() [][2]string {
			return [][2]string{{"model", r.model}, {"served_model_name", r.model}, {"dtype", "auto"}, {"quantization", "none"},
				{"max_model_len", strconv.Itoa(r.maxModelLen)}, {"gpu_type", gpuType}}
		})},
		{"parallel_config_info", "Parallelism configuration info", atStart, r.info(func() [][2]string {
			return [][2]string{{"tensor_parallel_size", "1"}, {"pipeline_parallel_size", "1"}, {"context_parallel_size", "1"}, {"gpu_count", "1"}}
		})},
		{"kv_cache_config_info", "KV cache configuration info", atStart, r.info(func() [][2]string {
			return [][2]string{{"enable_block_reuse", "True"}, {"enable_partial_reuse", "True"}, {"free_gpu_memory_fraction", "0.9"}, {"cache_dtype", "auto"}}
		})},
		{"num_requests_running", "Number of active requests", logged, r.gauge(func(it *snap.TrtllmIteration) float64 { return float64(it.Active) })},
		{"num_requests_waiting", "Number of queued requests", logged, r.gauge(func(it *snap.TrtllmIteration) float64 { return float64(it.Queued) })},
		{"max_num_active_requests", "Maximum number of active requests", logged, r.gauge(constant(float64(r.maxActive)))},
		{"iteration_latency_seconds", "Iteration latency in seconds", logged, r.gauge(func(it *snap.TrtllmIteration) float64 { return it.Latency })},
		{"gpu_memory_usage_bytes", "GPU memory usage in bytes", logged, r.gauge(constant(gpuMemoryUsed))},
		{"cpu_memory_usage_bytes", "CPU memory usage in bytes", logged, r.gauge(constant(0))},
		{"pinned_memory_usage_bytes", "Pinned memory usage in bytes", logged, r.gauge(constant(0))},
		{"max_batch_size_static", "Static maximum batch size", logged, r.gauge(constant(0))},
		{"max_batch_size_runtime", "Runtime maximum batch size", logged, r.gauge(constant(0))},
		{"max_num_tokens_runtime", "Runtime maximum number of tokens", logged, r.gauge(constant(0))},
		{"kv_cache_hit_rate", "KV cache hit rate", logged, r.gauge((*snap.TrtllmIteration).HitRate)},
		{"kv_cache_utilization", "KV cache utilization", logged, r.gauge(func(it *snap.TrtllmIteration) float64 { return float64(it.UsedBlocks) / maxBlocks })},
		{"kv_cache_max_blocks", "Maximum number of KV cache blocks", logged, r.gauge(constant(maxBlocks))},
		{"kv_cache_free_blocks", "Number of free KV cache blocks", logged, r.gauge(func(it *snap.TrtllmIteration) float64 { return maxBlocks - float64(it.UsedBlocks) })},
		{"kv_cache_used_blocks", "Number of used KV cache blocks", logged, r.gauge(func(it *snap.TrtllmIteration) float64 { return float64(it.UsedBlocks) })},
		{"kv_cache_tokens_per_block", "Number of tokens per KV cache block", logged, r.gauge(constant(snap.BlockSize))},
		{"num_context_requests", "Number of context (prefill) requests", logged, r.gauge(func(it *snap.TrtllmIteration) float64 { return float64(it.Context) })},
		{"num_generation_requests", "Number of generation (decode) requests", logged, r.gauge(func(it *snap.TrtllmIteration) float64 { return float64(it.Generation) })},
		{"num_paused_requests", "Number of paused requests", logged, r.gauge(func(it *snap.TrtllmIteration) float64 { return float64(it.Paused) })},
		{"num_scheduled_requests", "Number of scheduled requests", logged, r.gauge(func(it *snap.TrtllmIteration) float64 { return float64(it.Context + it.Generation) })},
		{"total_context_tokens", "Total number of context tokens", logged, r.gauge(func(it *snap.TrtllmIteration) float64 { return float64(it.ContextTokens) })},
		{"avg_decoded_tokens_per_iter", "Average number of decoded tokens per iteration", logged, r.gauge(constant(0))},
		{"prefill_batch_occupancy", "Fraction of max active slots occupied by context requests.", logged,
			r.gauge(func(it *snap.TrtllmIteration) float64 { return float64(it.Context) / float64(r.maxActive) })},
	}
}

func (r *renderer) histogram(les *[]string, h func(t *snap.TrtllmStats) *snap.Histogram) func([]byte, string, *snap.EngineStats, *snap.PageState) []byte {
	return func(dst []byte, name string, e *snap.EngineStats, _ *snap.PageState) []byte {
		ls := r.labels()
		return promtext.AppendMultiprocessHistogram(dst, name, &ls, *les, h(&e.Trt))
	}
}

// histograms are the collector's histograms in the order log_request_metrics_dict and
// log_iteration_stats observe them.
func (r *renderer) histograms() []family {
	l := &r.les
	return []family{
		{"e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", at(func(t *snap.TrtllmStats) uint64 { return t.First.E2e }),
			r.histogram(&l.phase, func(t *snap.TrtllmStats) *snap.Histogram { return &t.E2e })},
		{"time_to_first_token_seconds", "Histogram of time to first token in seconds.", at(func(t *snap.TrtllmStats) uint64 { return t.First.Ttft }),
			r.histogram(&l.ttft, func(t *snap.TrtllmStats) *snap.Histogram { return &t.Ttft })},
		{"time_per_output_token_seconds", "Histogram of time per output token in seconds.", at(func(t *snap.TrtllmStats) uint64 { return t.First.Tpot }),
			r.histogram(&l.tpot, func(t *snap.TrtllmStats) *snap.Histogram { return &t.Tpot })},
		{"request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", at(func(t *snap.TrtllmStats) uint64 { return t.First.Queue }),
			r.histogram(&l.phase, func(t *snap.TrtllmStats) *snap.Histogram { return &t.Queue })},
		{"request_prefill_time_seconds", "Histogram of prefill (context) phase duration in seconds (first_token_time - first_scheduled_time).",
			at(func(t *snap.TrtllmStats) uint64 { return t.First.Prefill }), r.histogram(&l.prefill, func(t *snap.TrtllmStats) *snap.Histogram { return &t.Prefill })},
		{"request_decode_time_seconds", "Histogram of decode (generation) phase duration in seconds (last_token_time - first_token_time).",
			at(func(t *snap.TrtllmStats) uint64 { return t.First.Decode }), r.histogram(&l.phase, func(t *snap.TrtllmStats) *snap.Histogram { return &t.Decode })},
		{"request_inference_time_seconds", "Histogram of total inference duration in seconds (last_token_time - first_scheduled_time).",
			at(func(t *snap.TrtllmStats) uint64 { return t.First.Inference }), r.histogram(&l.phase, func(t *snap.TrtllmStats) *snap.Histogram { return &t.Inference })},
		{"prompt_cached_tokens_per_request", "Histogram of cached prompt tokens per request.", at(func(t *snap.TrtllmStats) uint64 { return t.First.CachedPerRequest }),
			r.histogram(&l.cached, func(t *snap.TrtllmStats) *snap.Histogram { return &t.CachedPerRequest })},
		{"prefill_batch_tokens", "Histogram of total context tokens per iteration.", at(func(t *snap.TrtllmStats) uint64 { return t.First.PrefillBatchTokens }),
			r.histogram(&l.batch, func(t *snap.TrtllmStats) *snap.Histogram { return &t.PrefillBatchTokens })},
	}
}
