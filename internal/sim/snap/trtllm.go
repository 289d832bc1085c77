package snap

// A TensorRT-LLM server (Config.Engine "trtllm") logs what its page shows at two moments only
// (tensorrt_llm/metrics/collector.py, MetricsCollector, driven by tensorrt_llm/serve/
// openai_server.py): a request's own figures when it finishes, and right after, the latest
// iteration statistics of the executor, which a finished request wakes the server to drain.
// TrtllmStats keeps both as the engine model counts them, and when each kind of series was
// first logged, which is where trtllm-serve's multiprocess page creates it.

// TrtllmReason indexes TrtllmStats.Success: the finish reasons of a TensorRT-LLM output
// (CompletionOutput.finish_reason) that the simulated requests end with.
type TrtllmReason int

const (
	TrtllmStop      TrtllmReason = iota // the model's end token
	TrtllmLength                        // max_tokens reached
	TrtllmCancelled                     // the client aborted the request
	NumTrtllmReasons
)

var TrtllmReasonNames = [NumTrtllmReasons]string{"stop", "length", "cancelled"}

// TrtllmIteration is one iteration's statistics as the server logs them (the executor's
// IterationStats, in the engine model's terms).
type TrtllmIteration struct {
	Active, Queued int     // requests in the running batch and waiting for it
	Latency        float64 // the iteration's duration, in seconds
	UsedBlocks     int     // KV blocks in use after the iteration
	// ReusedBlocks and MissedBlocks are the engine's blocks found in, and missing from, the
	// prefix cache at every prefill allocation since it started.
	ReusedBlocks, MissedBlocks int64
	Context, Generation        int // requests the iteration prefilled and decoded
	Paused                     int // running requests the iteration preempted for KV space
	ContextTokens              int // prompt tokens the iteration prefilled
}

// HitRate is the iteration's cacheHitRate: reused over reused and missed blocks, 0 before any.
func (it *TrtllmIteration) HitRate() float64 {
	if it.ReusedBlocks == 0 {
		return 0
	}
	return float64(it.ReusedBlocks) / float64(it.ReusedBlocks+it.MissedBlocks)
}

// TrtllmFirst numbers the logs (a finished request's, an iteration's) from 1 and keeps the
// number of the first log of each kind of series: 0 means never. A page lists the series of a
// kind in the order they were created, which these give.
type TrtllmFirst struct {
	Logs                                 uint64 // logs so far
	Reason                               [NumTrtllmReasons]uint64
	Prompt, Generation, CachedPerRequest uint64
	E2e, Ttft, Tpot, Queue, Prefill      uint64
	Decode, Inference                    uint64
	Iteration, Completed, Reused, Missed uint64
	PrefillBatchTokens                   uint64
}

// TrtllmStats is what a TensorRT-LLM page shows of one engine.
type TrtllmStats struct {
	// Logged is the last logged iteration; there was one once First.Iteration is set.
	Logged TrtllmIteration
	// Completed sums the logged iterations' completed requests (numCompletedRequests), and
	// PrefillBatchTokens their prefilled tokens (observed when above 0).
	Completed          int64
	PrefillBatchTokens Histogram

	// A request's figures, logged at its finish.
	Success                    [NumTrtllmReasons]int64
	Prompt, Generation, Cached int64
	// The latency histograms observe only values above 0, as the server logs them; Tpot a
	// request of more than one output token only.
	E2e, Ttft, Tpot, Queue, Prefill, Decode, Inference Histogram
	CachedPerRequest                                   Histogram

	First TrtllmFirst
}

// TrtllmBuckets are MetricsCollector's default bucket bounds.
var TrtllmBuckets = struct {
	Phase, Ttft, Tpot, Prefill, CachedTokens, BatchTokens []float64
}{
	Phase: []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
		120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0},
	Ttft: []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
		10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0},
	Tpot: []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
		10.0, 20.0, 40.0, 80.0},
	Prefill: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0,
		80.0, 160.0, 640.0, 2560.0},
	CachedTokens: []float64{0, 64, 128, 256, 512, 1024, 2048, 4096, 8192},
	BatchTokens:  []float64{64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768},
}

// AddTRTLLMTotals adds s's counts to a Totals map of a TensorRT-LLM fleet, under the names of
// the page's families without the prefix (see Fleet.Totals).
func (s *EngineStats) AddTRTLLMTotals(m map[string]float64) {
	t := &s.Trt
	for i, n := range t.Success {
		m["request_success/"+TrtllmReasonNames[i]] += float64(n)
	}
	m["prompt_tokens"] += float64(t.Prompt)
	m["generation_tokens"] += float64(t.Generation)
	m["prompt_cached_tokens"] += float64(t.Cached)
	m["requests_aborted"] += float64(s.Aborted)
	m["num_preemptions"] += float64(s.Preemptions)
	for _, h := range [...]struct {
		name string
		h    *Histogram
	}{{"e2e_request_latency_seconds", &t.E2e}, {"time_to_first_token_seconds", &t.Ttft},
		{"time_per_output_token_seconds", &t.Tpot}, {"request_queue_time_seconds", &t.Queue},
		{"request_prefill_time_seconds", &t.Prefill}, {"request_decode_time_seconds", &t.Decode},
		{"request_inference_time_seconds", &t.Inference}} {
		m[h.name+"_count"] += float64(h.h.Count)
		m[h.name+"_sum"] += h.h.Sum
	}
}

// AddCounters adds o's counts and histograms to s, as EngineStats.AddCounters does.
func (s *TrtllmStats) AddCounters(o *TrtllmStats) {
	for i := range s.Success {
		s.Success[i] += o.Success[i]
	}
	s.Prompt += o.Prompt
	s.Generation += o.Generation
	s.Cached += o.Cached
	s.Completed += o.Completed
	for _, h := range [...]struct{ a, b *Histogram }{{&s.E2e, &o.E2e}, {&s.Ttft, &o.Ttft}, {&s.Tpot, &o.Tpot},
		{&s.Queue, &o.Queue}, {&s.Prefill, &o.Prefill}, {&s.Decode, &o.Decode}, {&s.Inference, &o.Inference},
		{&s.CachedPerRequest, &o.CachedPerRequest}, {&s.PrefillBatchTokens, &o.PrefillBatchTokens}} {
		h.a.Add(h.b)
	}
}
