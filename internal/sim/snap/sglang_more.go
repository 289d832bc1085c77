package snap

// SGLang's families beyond the core ones, as its collectors declare and count them
// (python/sglang/srt/observability/metrics_collector.py):
//   - the scheduler's num_retracted_input_tokens_total and num_retracted_output_tokens_total: a
//     retraction (the simulator's preemption) adds the request's prompt and its output so far,
//     which it computes again when it is scheduled again (increment_retracted_reqs);
//   - the scheduler's prefill_effective_tokens_total{mode}: a request's first prefill only, its
//     computed prompt tokens as input, its local cache hits as device_hit and the external
//     cache's as host_hit (increment_effective_prefill_tokens); every mode's series is there from
//     the start, as SGLang creates them at 0;
//   - the scheduler's kv_available_tokens, kv_evictable_tokens and kv_used_tokens at its log
//     points, and max_total_num_tokens, set once at start (emit_constants);
//   - the scheduler's estimated_flops_per_gpu_total, estimated_read_bytes_per_gpu_total and
//     estimated_write_bytes_per_gpu_total with Config.MFUMetrics, from the engine's compute model
//     (compute.go), each engine's series from its first increment (increment_estimated_perf);
//   - the tokenizer's prompt_tokens_histogram and generation_tokens_histogram of each finished
//     request, and spec_verify_calls_total, the request's verify passes, with speculative
//     decoding only (observe_one_finished_request).
//
// forward_execution_seconds_total needs SGLANG_ENABLE_METRICS_DEVICE_TIMER and is not served.

// sglangTokenBuckets are the default bounds of SGLang's prompt and generation length histograms
// (TokenizerMetricsCollector's default_bucket_prompt_tokens).
var SglangTokenBuckets = []float64{100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000,
	12500, 15000, 17500, 20000, 22500, 25000, 27500, 30000, 35000, 40000, 60000, 80000, 100000, 200000, 300000, 400000,
	600000, 800000, 1000000, 1100000}

// sglangEffectiveModes are prefill_effective_tokens_total's modes, in SGLang's order.
var SglangEffectiveModes = [...]string{"input", "device_hit", "host_hit", "storage_hit"}

// sglangMore are an engine's counts of these families.
type SglangMore struct {
	RetractedIn, RetractedOut int64
	Effective                 [len(SglangEffectiveModes)]int64
	VerifyCalls               int64
	PromptLen, GenLen         Histogram // the tokenizer's, per finished request
}

func (m *SglangMore) Add(o *SglangMore) {
	m.RetractedIn += o.RetractedIn
	m.RetractedOut += o.RetractedOut
	for i := range m.Effective {
		m.Effective[i] += o.Effective[i]
	}
	m.VerifyCalls += o.VerifyCalls
	m.PromptLen.Add(&o.PromptLen)
	m.GenLen.Add(&o.GenLen)
}

// retract counts a retraction of a request with prompt and output tokens.
func (m *SglangMore) Retract(prompt, output int) {
	m.RetractedIn += int64(prompt)
	m.RetractedOut += int64(output)
}

// firstPrefill counts a request's first prefill of tokens, once its cache hits (cached in the
// local cache, external in the external one) are known.
func (m *SglangMore) FirstPrefill(tokens, cached, external int) {
	m.Effective[0] += int64(tokens - cached - external)
	m.Effective[1] += int64(cached)
	m.Effective[2] += int64(external)
}

// finish counts a finished request as the tokenizer does: its prompt and output lengths, and the
// speculative verify calls it took.
func (m *SglangMore) Finish(prompt, output, verifies int) {
	m.PromptLen.Observe(SglangTokenBuckets, float64(prompt))
	m.GenLen.Observe(SglangTokenBuckets, float64(output))
	m.VerifyCalls += int64(verifies)
}

func (m *SglangMore) AddTotals(t map[string]float64) {
	t["num_retracted_input_tokens"] += float64(m.RetractedIn)
	t["num_retracted_output_tokens"] += float64(m.RetractedOut)
	for i, mode := range SglangEffectiveModes {
		t["prefill_effective_tokens/"+mode] += float64(m.Effective[i])
	}
	t["spec_verify_calls"] += float64(m.VerifyCalls)
	t["prompt_tokens_histogram_count"] += float64(m.PromptLen.Count)
	t["prompt_tokens_histogram_sum"] += m.PromptLen.Sum
	t["generation_tokens_histogram_count"] += float64(m.GenLen.Count)
	t["generation_tokens_histogram_sum"] += m.GenLen.Sum
}
