package sim

import (
	"slices"
	"sort"
	"strconv"
	"time"
)

// An SGLang fleet (Config.Engine "sglang") runs the same engines and workload as a vLLM fleet
// and shows them on pages laid out as SGLang's: the families of its SchedulerMetricsCollector
// and TokenizerMetricsCollector (python/sglang/srt/observability/metrics_collector.py), with
// their names, types, labels, HELP texts and buckets, rendered as Python's prometheus_client
// renders a multiprocess registry: labels sorted, no _created series, no process or Python
// families. What the engine model does is counted as SGLang counts it:
//   - the scheduler's gauges are set at its log points only (scheduler_metrics_mixin.py): at
//     every prefill batch, every DecodeLogInterval decode batches, and every 30 s while idle, so
//     a page repeats the last log point's values in between (Config.SGLangEagerGauges sets them
//     after every iteration instead, as a control);
//   - with Config.SGLangStageMetrics, the scheduler's scheduler_stage_seconds_total{category}
//     and scheduler_idle_seconds_total (scheduler_stage_metrics.py, metrics_reporter.py), from
//     the engine's ground truth: exact at every page, where SGLang adds to them at most once a
//     second;
//   - a retraction is SGLang's preemption (num_retracted_requests_total);
//   - the tokenizer counts a request's prompt, generated and cached tokens, and the request, when
//     it finishes, once per server, without a rank;
//   - realtime_tokens_total counts the prefill batch's computed and cached tokens at the batch
//     and the decode tokens at every decode batch.
//
// A server of DP engines labels each engine's scheduler series dp_rank, as SGLang does with
// data parallelism.

// sglangIdleLog is how often an idle SGLang scheduler sets its gauges
// (self_check_during_idle: every 30 s without a log point).
const sglangIdleLog = 30 * time.Second

// defaultDecodeLogInterval is SGLang's --decode-log-interval default.
const defaultDecodeLogInterval = 40

// sglangGauges are the gauges an SGLang scheduler sets at a log point.
type sglangGauges struct {
	running, queue, usedTokens int
	usage                      float64
	genThroughput              float64
	specLen, specRate          float64
	cacheHitRate               float64
	// paused is the number of requests an asynchronous weight sync holds (see Engine.pause).
	paused int
	// With priority scheduling: the running and waiting requests by priority; the priorities
	// seen so far (SchedulerMetricsCollector._known_priorities), whose series each gauge sets
	// at every log point from then on; and which of those series each gauge has set.
	runningBy, queueBy   [numPriorities]int
	known                [numPriorities]bool
	hasRunning, hasQueue [numPriorities]bool
	// The KV pool's free and evictable (cached, unused) token slots (see sgLogPool).
	kvAvailable, kvEvictable int
}

// numPriorities is how many priorities the simulated requests have (Config.Priority).
const numPriorities = 2

// priority is a request's priority under priority scheduling.
func (r *request) priority() int { return int(r.ID % numPriorities) }

// sglangStats are an SGLang engine's figures of its page: the last log point's gauges, the
// scheduler's counters and queue-time histogram, and the tokenizer's counts of the engine's
// requests, which a server's page shows summed over its engines.
type sglangStats struct {
	logged sglangGauges

	// The tokenizer's, counted at a request's finish.
	prompt, generation, requests int64
	aborted                      int64 // num_aborted_requests_total: one per abort call
	cachedDevice, cachedHost     int64 // prefix-cache hits, local and from the external cache
	ttft, itl, e2e               histogram

	// The scheduler's.
	prefillCompute, prefillCache, decode int64 // realtime_tokens_total by mode
	queue                                histogram
	// weightLoad is the duration of the last weight load, in seconds, once there was one
	// (weightLoaded): SGLang sets weight_load_duration_seconds at the end of each load.
	weightLoad   float64
	weightLoaded bool
	more         sglangMore // the families of sglang_more.go
	// stage is the scheduler's wall time by stage category (sglangStages) and idle its time
	// with nothing to run, in wall seconds, set when a page is filled (Config.SGLangStageMetrics).
	stage [len(sglangStages)]float64
	idle  float64
}

// sglangStages are the categories of scheduler_stage_seconds_total the engine model spends
// time in: the loop's time with a batch (run_batch, which here holds the whole busy loop), in a
// weight update (handled among the input requests) and in on_idle, which the loop runs while it
// has no batch: idle, or paused with the requests held.
var sglangStages = [...]string{"run_batch", "process_input_requests", "idle"}

// sglangStageTimes fills the stage counters of e's page as of now: its ground truth's time in
// each state since its server started, in wall seconds. scheduler_idle_seconds_total counts
// the idle state only: SGLang's scheduler is not fully idle while it holds paused requests.
func (e *Engine) sglangStageTimes(st *sglangStats, now time.Duration, speed float64) {
	t := e.led.total(now)
	sec := func(s ...State) float64 {
		var d time.Duration
		for _, x := range s {
			d += t[x] - e.sg.base[x]
		}
		return d.Seconds() / speed
	}
	st.stage = [len(sglangStages)]float64{sec(StateGenerating), sec(StateLoadingWeights), sec(StateIdle, StatePaused)}
	st.idle = sec(StateIdle)
}

func (s *sglangStats) addCounters(o *sglangStats) {
	s.more.add(&o.more)
	s.prompt += o.prompt
	s.generation += o.generation
	s.requests += o.requests
	s.aborted += o.aborted
	s.cachedDevice += o.cachedDevice
	s.cachedHost += o.cachedHost
	s.prefillCompute += o.prefillCompute
	s.prefillCache += o.prefillCache
	s.decode += o.decode
	for _, h := range []struct{ a, b *histogram }{{&s.ttft, &o.ttft}, {&s.itl, &o.itl}, {&s.e2e, &o.e2e}, {&s.queue, &o.queue}} {
		h.a.add(h.b)
	}
}

// sglangEngine is an SGLang scheduler's logging state, which no page shows.
type sglangEngine struct {
	lastLog       time.Duration // the last log point
	lastDecodeLog time.Duration
	decodeBatches int   // decode batches since the last decode log point
	genSinceLog   int64 // tokens generated since the last decode log point
	specAccepted  int64 // accepted draft tokens since the last decode log point, plus one per draft
	specDrafts    int64
	// This iteration's prefill batch: new requests' tokens to compute and found cached.
	prefillInput, prefillHit int
	prefill                  bool
	// base is the engine's time in each state when its server last started, where its stage
	// counters start from (see sglangStageTimes).
	base [NumStates]time.Duration
}

// sglangBuckets are SGLang's default bucket bounds (metrics_collector.py).
var sglangBuckets = struct{ ttft, itl, e2e, queue []float64 }{
	ttft: []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400},
	itl: []float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
		0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000},
	e2e: []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400},
	queue: []float64{0.0, 0.001, 0.005, 0.010, 0.050, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
		200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000},
}

// sgLog sets the scheduler's gauges at a log point at time at.
func (e *Engine) sgLog(at time.Duration, decode bool) {
	g := &e.stats.sg.logged
	g.running = len(e.running)
	g.queue = e.waiting.len()
	g.usage = e.pool.usage()
	g.usedTokens = e.pool.numUsed() * BlockSize
	e.sgLogPool(g)
	g.cacheHitRate = 0 // a decode log point sets it to 0
	if e.cfg.Priority {
		g.runningBy, g.queueBy = [numPriorities]int{}, [numPriorities]int{}
		for _, r := range e.running {
			g.runningBy[r.priority()]++
		}
		for i := range e.waiting.len() {
			g.queueBy[e.waiting.at(i).priority()]++
		}
		// _log_gauge_queue_count learns the running requests' priorities, sets the running
		// gauge's series of every priority known, then does the same for the queue: a priority
		// first seen in the queue gets its running series at the next log point.
		for p := range numPriorities {
			g.known[p] = g.known[p] || g.runningBy[p] > 0
			g.hasRunning[p] = g.hasRunning[p] || g.known[p]
		}
		for p := range numPriorities {
			g.known[p] = g.known[p] || g.queueBy[p] > 0
			g.hasQueue[p] = g.hasQueue[p] || g.known[p]
		}
	}
	if decode {
		if d := at - e.sg.lastDecodeLog; d > 0 {
			g.genThroughput = float64(e.sg.genSinceLog) / d.Seconds()
		}
		g.specLen, g.specRate = 0, 0
		if e.cfg.SpecTokens > 0 && e.sg.specDrafts > 0 {
			// The accept length counts the bonus token of each forward, the rate does not: it is
			// accepted drafts over proposed drafts (metrics_collector.py's HELP texts).
			g.specLen = float64(e.sg.specAccepted) / float64(e.sg.specDrafts)
			g.specRate = float64(e.sg.specAccepted-e.sg.specDrafts) / float64(e.sg.specDrafts*int64(e.cfg.SpecTokens))
		}
		e.sg.genSinceLog, e.sg.specAccepted, e.sg.specDrafts, e.sg.decodeBatches = 0, 0, 0, 0
		e.sg.lastDecodeLog = at
	} else if total := e.sg.prefillInput + e.sg.prefillHit; total > 0 {
		g.cacheHitRate = float64(e.sg.prefillHit) / float64(total)
	}
	e.sg.lastLog = at
}

// sgPrefill notes a request of this iteration's prefill batch: its tokens to compute and the
// tokens found cached, and its time in the queue.
func (e *Engine) sgPrefill(r *request, compute, hit int) {
	e.sg.prefill = true
	e.sg.prefillInput += compute
	e.sg.prefillHit += hit
	e.stats.sg.queue.observe(sglangBuckets.queue, (e.now - r.Arrival).Seconds())
}

// sgPrefillLog ends the scheduling of an iteration with a prefill batch: the batch's log point.
func (e *Engine) sgPrefillLog() {
	if !e.sg.prefill {
		return
	}
	e.stats.sg.prefillCompute += int64(e.sg.prefillInput)
	e.stats.sg.prefillCache += int64(e.sg.prefillHit)
	e.sgLog(e.now, false)
	e.sg.prefill, e.sg.prefillInput, e.sg.prefillHit = false, 0, 0
}

// sgDecodeBatch counts an iteration that decoded, tokens generated by its decoding requests,
// and logs every DecodeLogInterval-th.
func (e *Engine) sgDecodeBatch(tokens int) {
	e.stats.sg.decode += int64(tokens)
	e.sg.decodeBatches++
	if e.sg.decodeBatches >= e.cfg.DecodeLogInterval {
		e.sgLog(e.now, true)
	}
}

// sgIdle sets the gauges of a scheduler idle since e.now at the first moment sglangIdleLog
// after its last log point, and every sglangIdleLog after, up to t: through t itself when no
// request arrives at t.
func (e *Engine) sgIdle(t time.Duration, through bool) {
	for {
		at := max(e.sg.lastLog+sglangIdleLog, e.now)
		if at > t || at == t && !through {
			return
		}
		e.sgLog(at, false)
	}
}

// sgFinish counts a finished request as SGLang's tokenizer does.
func (e *Engine) sgFinish(r *request) {
	s := &e.stats.sg
	s.prompt += int64(r.PromptLen)
	s.generation += int64(r.numOutput)
	s.requests++
	s.cachedDevice += int64(r.cachedTokens)
	s.cachedHost += int64(r.externalTokens)
	s.e2e.observe(sglangBuckets.e2e, (r.lastTokenAt - r.Arrival).Seconds())
	s.more.finish(r.PromptLen, r.numOutput, r.verifies)
}

// observeTokens is SGLang's inter-token latency: the interval since a request's previous output
// is added to the sum once, and its tokens to the bucket of the interval per token
// (TokenizerMetricsCollector.observe_inter_token_latency), so the count is of tokens.
func (h *histogram) observeTokens(bounds []float64, interval float64, tokens int) {
	h.counts[sort.SearchFloat64s(bounds, interval/float64(tokens))] += uint64(tokens)
	h.sum += interval
	h.count += uint64(tokens)
}

// addSGLangTotals adds s's counts to a Totals map of an SGLang fleet under the keys of SGLang's
// families (see Fleet.Totals).
func (s *engineStats) addSGLangTotals(m map[string]float64) {
	g := &s.sg
	m["prompt_tokens"] += float64(g.prompt)
	m["generation_tokens"] += float64(g.generation)
	m["cached_tokens"] += float64(g.cachedDevice + g.cachedHost)
	m["num_requests"] += float64(g.requests)
	m["num_aborted_requests"] += float64(g.aborted)
	m["requests_aborted"] += float64(s.aborted)
	m["aborted_prompt_tokens"] += float64(s.abortedPrompt)
	m["num_retracted_requests"] += float64(s.preemptions)
	m["realtime_tokens/prefill_compute"] += float64(g.prefillCompute)
	m["realtime_tokens/prefill_cache"] += float64(g.prefillCache)
	m["realtime_tokens/decode"] += float64(g.decode)
	g.more.addTotals(m)
	for _, c := range [...]struct {
		key string
		v   float64
	}{{"estimated_flops_per_gpu", s.shape.flops}, {"estimated_read_bytes_per_gpu", s.shape.readBytes},
		{"estimated_write_bytes_per_gpu", s.shape.writeBytes}} {
		if c.v > 0 { // SGLang's series come with their first increment
			m[c.key] += c.v
		}
	}
	for _, h := range []struct {
		name string
		h    *histogram
	}{{"time_to_first_token_seconds", &g.ttft}, {"inter_token_latency_seconds", &g.itl}, {"e2e_request_latency_seconds", &g.e2e}, {"queue_time_seconds", &g.queue}} {
		m[h.name+"_count"] += float64(h.h.count)
		m[h.name+"_sum"] += h.h.sum
	}
}

// sglangRenderer writes one server's page in SGLang's layout.
type sglangRenderer struct {
	model    string
	dp       int
	priority bool // --enable-priority-scheduling (Config.Priority)
	maxTotal int  // an engine's KV pool in tokens, max_total_num_tokens
	// stageMetrics serves the scheduler's stage and idle seconds (Config.SGLangStageMetrics).
	stageMetrics bool
	les          struct{ ttft, itl, e2e, queue []string }
}

func newSGLangRenderer(model string, dp int, priority bool) *sglangRenderer {
	r := &sglangRenderer{model: model, dp: dp, priority: priority}
	r.les.ttft = leStrings(sglangBuckets.ttft)
	r.les.itl = leStrings(sglangBuckets.itl)
	r.les.e2e = leStrings(sglangBuckets.e2e)
	r.les.queue = leStrings(sglangBuckets.queue)
	return r
}

// schedulerLabels are the labels of engine i's scheduler series (SchedulerMetricsCollector's
// init_new): dp_rank only with data parallelism, priority="" with priority scheduling; one
// scheduler per DP rank exports.
func (r *sglangRenderer) schedulerLabels(i int) labelSet { return r.priorityLabels(i, "") }

// priorityLabels are engine i's scheduler labels with priority's value (one of a gauge's
// priorities, or "" for every series) when priority scheduling is on.
func (r *sglangRenderer) priorityLabels(i int, priority string) labelSet {
	var ls labelSet
	if r.priority {
		ls.add("priority", priority)
	}
	if r.dp > 1 {
		ls.add("dp_rank", strconv.Itoa(i))
	}
	ls.add("engine_type", "unified")
	ls.add("model_name", r.model)
	ls.add("moe_ep_rank", "0")
	ls.add("pp_rank", "0")
	ls.add("tp_rank", "0")
	return ls
}

func (r *sglangRenderer) tokenizerLabels() labelSet {
	var ls labelSet
	ls.add("engine_type", "unified")
	ls.add("model_name", r.model)
	return ls
}

// sglangGaugeFamilies are the scheduler gauges a page shows, in SchedulerMetricsCollector's
// order, with its HELP texts; pid marks the ones without multiprocess_mode, which
// prometheus_client renders per process.
var sglangGaugeFamilies = []struct {
	name, help string
	pid        bool
	value      func(g *sglangGauges) float64
	// byPriority gives a gauge's series per priority under priority scheduling: which it has
	// set, and their values.
	byPriority func(g *sglangGauges) (has *[numPriorities]bool, v *[numPriorities]int)
}{
	{"num_running_reqs", "The number of running requests.", false, func(g *sglangGauges) float64 { return float64(g.running) },
		func(g *sglangGauges) (*[numPriorities]bool, *[numPriorities]int) { return &g.hasRunning, &g.runningBy }},
	{"num_used_tokens", "The number of used tokens.", false, func(g *sglangGauges) float64 { return float64(g.usedTokens) }, nil},
	{"token_usage", "The token usage.", false, func(g *sglangGauges) float64 { return g.usage }, nil},
	{"gen_throughput", "The generation throughput (token/s).", false, func(g *sglangGauges) float64 { return g.genThroughput }, nil},
	{"num_queue_reqs", "The number of requests in the waiting queue.", false, func(g *sglangGauges) float64 { return float64(g.queue) },
		func(g *sglangGauges) (*[numPriorities]bool, *[numPriorities]int) { return &g.hasQueue, &g.queueBy }},
	{"cache_hit_rate", "The prefix cache hit rate.", false, func(g *sglangGauges) float64 { return g.cacheHitRate }, nil},
	{"spec_accept_length", "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).", false,
		func(g *sglangGauges) float64 { return g.specLen }, nil},
	{"spec_accept_rate", "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).", false,
		func(g *sglangGauges) float64 { return g.specRate }, nil},
	{"num_retracted_reqs", "The number of retracted requests.", true, func(*sglangGauges) float64 { return 0 }, nil},
	{"num_paused_reqs", "The number of paused requests by async weight sync.", true, func(g *sglangGauges) float64 { return float64(g.paused) }, nil},
}

func (r *sglangRenderer) render(dst []byte, st *pageState) []byte {
	// The tokenizer's families: the server's requests, summed over its engines.
	var tok sglangStats
	for i := range st.engines {
		tok.addCounters(&st.engines[i].sg)
	}
	// SGLang creates a tokenizer series at its first observation (a multiprocess registry shows
	// a child once .labels() made it): the token and request counters and e2e at the first
	// finished request, TTFT at the first token, ITL at the first later output, cached tokens
	// at the first hit of each source, aborted requests at the first abort. The simulated requests are not streamed (an RL rollout's are not):
	// is_streaming="false" on the five families that carry it.
	tl := r.tokenizerLabels()
	sl := tl
	sl.add("is_streaming", "false")
	counter := func(name string, ls *labelSet, extra, value string, v float64) {
		all := *ls
		if extra != "" {
			all.add(extra, value)
		}
		dst = appendSample(dst, "sglang:"+name, "_total", &all, "", v)
	}
	if tok.requests > 0 {
		dst = appendHelp(dst, "sglang:prompt_tokens_total", "Number of prefill tokens processed.", "counter")
		counter("prompt_tokens", &sl, "", "", float64(tok.prompt))
		dst = appendHelp(dst, "sglang:generation_tokens_total", "Number of generation tokens processed.", "counter")
		counter("generation_tokens", &sl, "", "", float64(tok.generation))
	}
	if tok.cachedDevice+tok.cachedHost > 0 {
		dst = appendHelp(dst, "sglang:cached_tokens_total", "Number of cached prompt tokens by source (device/host/storage).", "counter")
		if tok.cachedDevice > 0 {
			counter("cached_tokens", &tl, "cache_source", "device", float64(tok.cachedDevice))
		}
		if tok.cachedHost > 0 {
			counter("cached_tokens", &tl, "cache_source", "host", float64(tok.cachedHost))
		}
	}
	if tok.requests > 0 {
		dst = appendHelp(dst, "sglang:num_requests_total", "Number of requests processed.", "counter")
		counter("num_requests", &sl, "", "", float64(tok.requests))
	}
	if tok.aborted > 0 {
		dst = appendHelp(dst, "sglang:num_aborted_requests_total", "Number of requests aborted.", "counter")
		counter("num_aborted_requests", &tl, "", "", float64(tok.aborted))
	}

	// The schedulers' families, one series per engine (DP rank).
	pid := func(i int) string { return strconv.Itoa(2000 + 100*st.restarts + i) }
	for _, f := range sglangGaugeFamilies {
		dst = appendHelp(dst, "sglang:"+f.name, f.help, "gauge")
		for i := range st.engines {
			ls := r.schedulerLabels(i)
			if f.pid {
				ls.add("pid", pid(i))
			}
			g := &st.engines[i].sg.logged
			dst = appendSample(dst, "sglang:"+f.name, "", &ls, "", f.value(g))
			if !r.priority || f.byPriority == nil {
				continue
			}
			has, v := f.byPriority(g)
			for p := range numPriorities {
				if has[p] {
					pl := r.priorityLabels(i, strconv.Itoa(p))
					dst = appendSample(dst, "sglang:"+f.name, "", &pl, "", float64(v[p]))
				}
			}
		}
	}
	dst = r.appendWeightLoad(dst, st)
	// The scheduler's counters show an engine's series from its first increment, as SGLang
	// creates a labelled child then: the retractions' at the first retraction, each mode of
	// realtime_tokens at its first tokens.
	if slices.ContainsFunc(st.engines, func(e engineStats) bool { return e.preemptions > 0 }) {
		dst = appendHelp(dst, "sglang:num_retracted_requests_total", "Total number of retracted requests.", "counter")
		for i := range st.engines {
			if st.engines[i].preemptions > 0 {
				ls := r.schedulerLabels(i)
				counter("num_retracted_requests", &ls, "", "", float64(st.engines[i].preemptions))
			}
		}
	}
	if slices.ContainsFunc(st.engines, func(e engineStats) bool {
		return e.sg.prefillCompute+e.sg.prefillCache+e.sg.decode > 0
	}) {
		dst = appendHelp(dst, "sglang:realtime_tokens_total",
			"Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.", "counter")
	}
	for i := range st.engines {
		ls := r.schedulerLabels(i)
		s := &st.engines[i].sg
		for _, m := range []struct {
			mode string
			n    int64
		}{{"prefill_compute", s.prefillCompute}, {"prefill_cache", s.prefillCache}, {"decode", s.decode}} {
			if m.n > 0 {
				counter("realtime_tokens", &ls, "mode", m.mode, float64(m.n))
			}
		}
	}
	dst = r.appendMoreScheduler(dst, st)
	if r.stageMetrics {
		dst = r.appendStages(dst, st)
	}
	dst = appendHelp(dst, "sglang:queue_time_seconds", "Histogram of queueing time in seconds.", "histogram")
	for i := range st.engines {
		ls := r.schedulerLabels(i)
		dst = appendMultiprocessHistogram(dst, "sglang:queue_time_seconds", &ls, r.les.queue, &st.engines[i].sg.queue)
	}

	// The tokenizer's histograms.
	for _, h := range []struct {
		name, help string
		ls         *labelSet
		les        []string
		h          *histogram
		seen       bool
	}{
		{"time_to_first_token_seconds", "Histogram of time to first token in seconds.", &sl, r.les.ttft, &tok.ttft, tok.ttft.count > 0},
		{"inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &tl, r.les.itl, &tok.itl, tok.itl.count > 0},
		{"e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", &sl, r.les.e2e, &tok.e2e, tok.requests > 0},
	} {
		if h.seen {
			dst = appendHelp(dst, "sglang:"+h.name, h.help, "histogram")
			dst = appendMultiprocessHistogram(dst, "sglang:"+h.name, h.ls, h.les, h.h)
		}
	}
	return r.appendMoreTokenizer(dst, &tok, &tl)
}

// appendMultiprocessHistogram writes one histogram child as prometheus_client's multiprocess
// collector lists it: _sum, then the buckets (cumulative), then _count.
func appendMultiprocessHistogram(dst []byte, name string, ls *labelSet, les []string, h *histogram) []byte {
	dst = appendSample(dst, name, "_sum", ls, "", h.sum)
	var cum uint64
	for i, le := range les {
		cum += h.counts[i]
		dst = appendSample(dst, name, "_bucket", ls, le, float64(cum))
	}
	return appendSample(dst, name, "_count", ls, "", float64(cum))
}

// weightLoadHelp is SGLang's HELP text of weight_load_duration_seconds (SGLang PR #27363).
const weightLoadHelp = "Wall time of the most recent update_weights_from_<source> call on this scheduler rank (seconds). " +
	"`source` label is one of: disk, distributed, tensor, ipc. Event-detection via changes(...[<range>]) > 0 — no separate counter needed."

// appendWeightLoad writes weight_load_duration_seconds: one series per engine that has loaded
// weights, all from the trainer (source "distributed", update_weights_from_distributed). The
// multiprocess collector shows the family only once some scheduler has set it.
func (r *sglangRenderer) appendWeightLoad(dst []byte, st *pageState) []byte {
	help := false
	for i := range st.engines {
		sg := &st.engines[i].sg
		if !sg.weightLoaded {
			continue
		}
		if !help {
			dst = appendHelp(dst, "sglang:weight_load_duration_seconds", weightLoadHelp, "gauge")
			help = true
		}
		ls := r.schedulerLabels(i)
		ls.add("source", "distributed")
		dst = appendSample(dst, "sglang:weight_load_duration_seconds", "", &ls, "", sg.weightLoad)
	}
	return dst
}

// appendStages writes the scheduler's stage and idle seconds. Each series shows from its first
// increment, as SGLang adds to a labelled child only time it counted (the HELP texts are this
// simulator's).
func (r *sglangRenderer) appendStages(dst []byte, st *pageState) []byte {
	if slices.ContainsFunc(st.engines, func(e engineStats) bool { return e.sg.idle > 0 }) {
		dst = appendHelp(dst, "sglang:scheduler_idle_seconds_total", "Scheduler wall time with nothing to run, in seconds.", "counter")
		for i := range st.engines {
			if v := st.engines[i].sg.idle; v > 0 {
				ls := r.schedulerLabels(i)
				dst = appendSample(dst, "sglang:scheduler_idle_seconds", "_total", &ls, "", v)
			}
		}
	}
	if slices.ContainsFunc(st.engines, func(e engineStats) bool {
		return slices.ContainsFunc(e.sg.stage[:], func(v float64) bool { return v > 0 })
	}) {
		dst = appendHelp(dst, "sglang:scheduler_stage_seconds_total", "Scheduler loop wall time by stage, in seconds.", "counter")
		for i := range st.engines {
			for k, v := range st.engines[i].sg.stage {
				if v > 0 {
					ls := r.schedulerLabels(i)
					ls.add("category", sglangStages[k])
					dst = appendSample(dst, "sglang:scheduler_stage_seconds", "_total", &ls, "", v)
				}
			}
		}
	}
	return dst
}

// newSGLangPageWriter returns the writer of the pages of cfg's SGLang servers.
func newSGLangPageWriter(cfg Config) *sglangRenderer {
	r := newSGLangRenderer(cfg.Model, cfg.DP, cfg.Priority)
	r.maxTotal = cfg.BlocksPerEngine * BlockSize
	r.stageMetrics = cfg.SGLangStageMetrics
	return r
}
