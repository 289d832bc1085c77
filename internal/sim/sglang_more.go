package sim

import "slices"

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
var sglangTokenBuckets = []float64{100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000,
	12500, 15000, 17500, 20000, 22500, 25000, 27500, 30000, 35000, 40000, 60000, 80000, 100000, 200000, 300000, 400000,
	600000, 800000, 1000000, 1100000}

var sglangTokenLes = leStrings(sglangTokenBuckets)

// sglangEffectiveModes are prefill_effective_tokens_total's modes, in SGLang's order.
var sglangEffectiveModes = [...]string{"input", "device_hit", "host_hit", "storage_hit"}

// sglangMore are an engine's counts of these families.
type sglangMore struct {
	retractedIn, retractedOut int64
	effective                 [len(sglangEffectiveModes)]int64
	verifyCalls               int64
	promptLen, genLen         histogram // the tokenizer's, per finished request
}

func (m *sglangMore) add(o *sglangMore) {
	m.retractedIn += o.retractedIn
	m.retractedOut += o.retractedOut
	for i := range m.effective {
		m.effective[i] += o.effective[i]
	}
	m.verifyCalls += o.verifyCalls
	m.promptLen.add(&o.promptLen)
	m.genLen.add(&o.genLen)
}

// retract counts a retraction of a request with prompt and output tokens.
func (m *sglangMore) retract(prompt, output int) {
	m.retractedIn += int64(prompt)
	m.retractedOut += int64(output)
}

// firstPrefill counts a request's first prefill of tokens, once its cache hits (cached in the
// local cache, external in the external one) are known.
func (m *sglangMore) firstPrefill(tokens, cached, external int) {
	m.effective[0] += int64(tokens - cached - external)
	m.effective[1] += int64(cached)
	m.effective[2] += int64(external)
}

// finish counts a finished request as the tokenizer does: its prompt and output lengths, and the
// speculative verify calls it took.
func (m *sglangMore) finish(prompt, output, verifies int) {
	m.promptLen.observe(sglangTokenBuckets, float64(prompt))
	m.genLen.observe(sglangTokenBuckets, float64(output))
	m.verifyCalls += int64(verifies)
}

func (m *sglangMore) addTotals(t map[string]float64) {
	t["num_retracted_input_tokens"] += float64(m.retractedIn)
	t["num_retracted_output_tokens"] += float64(m.retractedOut)
	for i, mode := range sglangEffectiveModes {
		t["prefill_effective_tokens/"+mode] += float64(m.effective[i])
	}
	t["spec_verify_calls"] += float64(m.verifyCalls)
	t["prompt_tokens_histogram_count"] += float64(m.promptLen.count)
	t["prompt_tokens_histogram_sum"] += m.promptLen.sum
	t["generation_tokens_histogram_count"] += float64(m.genLen.count)
	t["generation_tokens_histogram_sum"] += m.genLen.sum
}

// sgLogPool sets the KV pool's gauges at a log point: the free blocks that hold a cached block
// are evictable, the others available.
func (e *Engine) sgLogPool(g *sglangGauges) {
	p := e.pool
	evictable := 0
	for b := range p.ref {
		if p.ref[b] == 0 && p.hashed[b] && p.cached[p.hash[b]] == int32(b) {
			evictable++
		}
	}
	g.kvEvictable = evictable * BlockSize
	g.kvAvailable = (p.numFree() - evictable) * BlockSize
}

// appendMoreScheduler writes the scheduler's families of these, one series per engine.
func (r *sglangRenderer) appendMoreScheduler(dst []byte, st *pageState) []byte {
	gauge := func(name, help string, v func(i int) int) {
		dst = appendHelp(dst, "sglang:"+name, help, "gauge")
		for i := range st.engines {
			ls := r.schedulerLabels(i)
			dst = appendSample(dst, "sglang:"+name, "", &ls, "", float64(v(i)))
		}
	}
	logged := func(i int) *sglangGauges { return &st.engines[i].sg.logged }
	gauge("kv_available_tokens", "Number of free token slots in the KV cache pool.", func(i int) int { return logged(i).kvAvailable })
	gauge("kv_evictable_tokens", "Number of evictable (radix-cached) token slots in the KV cache pool.",
		func(i int) int { return logged(i).kvEvictable })
	gauge("kv_used_tokens", "Number of actively used token slots in the KV cache pool.", func(i int) int { return logged(i).usedTokens })
	gauge("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", func(int) int { return r.maxTotal })
	counter := func(name, help string, v func(i int) int64) {
		dst = appendHelp(dst, "sglang:"+name+"_total", help, "counter")
		for i := range st.engines {
			if st.engines[i].preemptions == 0 {
				continue // the engine's series comes with its first retraction
			}
			ls := r.schedulerLabels(i)
			dst = appendSample(dst, "sglang:"+name, "_total", &ls, "", float64(v(i)))
		}
	}
	more := func(i int) *sglangMore { return &st.engines[i].sg.more }
	if slices.ContainsFunc(st.engines, func(e engineStats) bool { return e.preemptions > 0 }) {
		counter("num_retracted_input_tokens", "Total number of retracted input tokens.", func(i int) int64 { return more(i).retractedIn })
		counter("num_retracted_output_tokens", "Total number of retracted output tokens.", func(i int) int64 { return more(i).retractedOut })
	}
	for _, c := range []struct {
		name, help string
		v          func(s *shapeStats) float64
	}{
		{"estimated_flops_per_gpu", "Estimated number of floating point operations per GPU (for Model FLOPs Utilization calculations).",
			func(s *shapeStats) float64 { return s.flops }},
		{"estimated_read_bytes_per_gpu", "Estimated number of bytes read from memory per GPU (for Model FLOPs Utilization calculations).",
			func(s *shapeStats) float64 { return s.readBytes }},
		{"estimated_write_bytes_per_gpu", "Estimated number of bytes written to memory per GPU (for Model FLOPs Utilization calculations).",
			func(s *shapeStats) float64 { return s.writeBytes }},
	} {
		help := false
		for i := range st.engines {
			v := c.v(&st.engines[i].shape)
			if v <= 0 {
				continue
			}
			if !help {
				dst = appendHelp(dst, "sglang:"+c.name+"_total", c.help, "counter")
				help = true
			}
			ls := r.schedulerLabels(i)
			dst = appendSample(dst, "sglang:"+c.name, "_total", &ls, "", v)
		}
	}
	dst = appendHelp(dst, "sglang:prefill_effective_tokens_total", "Effective prefill tokens with retracted-request re-counts "+
		"excluded, updated on each log interval. mode: device_hit, host_hit, storage_hit, input. Windowed prefix cache hit "+
		"rate = rate(sum of *_hit) / rate(sum of all modes); per-tier rate uses a single *_hit mode in the numerator.", "counter")
	for i := range st.engines {
		for j, mode := range sglangEffectiveModes {
			ls := r.schedulerLabels(i)
			ls.add("mode", mode)
			dst = appendSample(dst, "sglang:prefill_effective_tokens", "_total", &ls, "", float64(more(i).effective[j]))
		}
	}
	return dst
}

// appendMoreTokenizer writes the tokenizer's families of these, from the first finished request
// (the verify calls from the first that had one).
func (r *sglangRenderer) appendMoreTokenizer(dst []byte, tok *sglangStats, tl *labelSet) []byte {
	m := &tok.more
	if m.verifyCalls > 0 {
		dst = appendHelp(dst, "sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.", "counter")
		dst = appendSample(dst, "sglang:spec_verify_calls", "_total", tl, "", float64(m.verifyCalls))
	}
	if tok.requests > 0 {
		dst = appendHelp(dst, "sglang:prompt_tokens_histogram", "Histogram of prompt token length.", "histogram")
		dst = appendMultiprocessHistogram(dst, "sglang:prompt_tokens_histogram", tl, sglangTokenLes, &m.promptLen)
		dst = appendHelp(dst, "sglang:generation_tokens_histogram", "Histogram of generation token length.", "histogram")
		dst = appendMultiprocessHistogram(dst, "sglang:generation_tokens_histogram", tl, sglangTokenLes, &m.genLen)
	}
	return dst
}
