package core

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/snap"
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
const SglangIdleLog = 30 * time.Second

// defaultDecodeLogInterval is SGLang's --decode-log-interval default.
const DefaultDecodeLogInterval = 40

// priority is a request's priority under priority scheduling.
func (r *Request) priority() int { return int(r.ID % snap.NumPriorities) }

// sglangStageTimes fills the stage counters of e's page as of now: its ground truth's time in
// each state since its server started, in wall seconds. scheduler_idle_seconds_total counts
// the idle state only: SGLang's scheduler is not fully idle while it holds paused requests.
func (e *Engine) SglangStageTimes(st *snap.SglangStats, now time.Duration, speed float64) {
	t := e.Led.total(now)
	sec := func(s ...State) float64 {
		var d time.Duration
		for _, x := range s {
			d += t[x] - e.Sg.base[x]
		}
		return d.Seconds() / speed
	}
	st.Stage = [len(snap.SglangStages)]float64{sec(StateGenerating), sec(StateLoadingWeights), sec(StateIdle, StatePaused)}
	st.Idle = sec(StateIdle)
}

// sglangEngine is an SGLang scheduler's logging state, which no page shows.
type sglangEngine struct {
	LastLog       time.Duration // the last log point
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

// sgLog sets the scheduler's gauges at a log point at time at.
func (e *Engine) sgLog(at time.Duration, decode bool) {
	g := &e.Stats.Sg.Logged
	g.Running = len(e.Running)
	g.Queue = e.Waiting.Len()
	g.Usage = e.Pool.usage()
	g.UsedTokens = e.Pool.NumUsed() * snap.BlockSize
	e.sgLogPool(g)
	g.CacheHitRate = 0 // a decode log point sets it to 0
	if e.cfg.Priority {
		g.RunningBy, g.QueueBy = [snap.NumPriorities]int{}, [snap.NumPriorities]int{}
		for _, r := range e.Running {
			g.RunningBy[r.priority()]++
		}
		for i := range e.Waiting.Len() {
			g.QueueBy[e.Waiting.at(i).priority()]++
		}
		// _log_gauge_queue_count learns the running requests' priorities, sets the running
		// gauge's series of every priority known, then does the same for the queue: a priority
		// first seen in the queue gets its running series at the next log point.
		for p := range snap.NumPriorities {
			g.Known[p] = g.Known[p] || g.RunningBy[p] > 0
			g.HasRunning[p] = g.HasRunning[p] || g.Known[p]
		}
		for p := range snap.NumPriorities {
			g.Known[p] = g.Known[p] || g.QueueBy[p] > 0
			g.HasQueue[p] = g.HasQueue[p] || g.Known[p]
		}
	}
	if decode {
		if d := at - e.Sg.lastDecodeLog; d > 0 {
			g.GenThroughput = float64(e.Sg.genSinceLog) / d.Seconds()
		}
		g.SpecLen, g.SpecRate = 0, 0
		if e.cfg.SpecTokens > 0 && e.Sg.specDrafts > 0 {
			// The accept length counts the bonus token of each forward, the rate does not: it is
			// accepted drafts over proposed drafts (metrics_collector.py's HELP texts).
			g.SpecLen = float64(e.Sg.specAccepted) / float64(e.Sg.specDrafts)
			g.SpecRate = float64(e.Sg.specAccepted-e.Sg.specDrafts) / float64(e.Sg.specDrafts*int64(e.cfg.SpecTokens))
		}
		e.Sg.genSinceLog, e.Sg.specAccepted, e.Sg.specDrafts, e.Sg.decodeBatches = 0, 0, 0, 0
		e.Sg.lastDecodeLog = at
	} else if total := e.Sg.prefillInput + e.Sg.prefillHit; total > 0 {
		g.CacheHitRate = float64(e.Sg.prefillHit) / float64(total)
	}
	e.Sg.LastLog = at
}

// sgPrefill notes a request of this iteration's prefill batch: its tokens to compute and the
// tokens found cached, and its time in the queue.
func (e *Engine) sgPrefill(r *Request, compute, hit int) {
	e.Sg.prefill = true
	e.Sg.prefillInput += compute
	e.Sg.prefillHit += hit
	e.Stats.Sg.Queue.Observe(snap.SglangBuckets.Queue, (e.Time - r.Arrival).Seconds())
}

// sgPrefillLog ends the scheduling of an iteration with a prefill batch: the batch's log point.
func (e *Engine) sgPrefillLog() {
	if !e.Sg.prefill {
		return
	}
	e.Stats.Sg.PrefillCompute += int64(e.Sg.prefillInput)
	e.Stats.Sg.PrefillCache += int64(e.Sg.prefillHit)
	e.sgLog(e.Time, false)
	e.Sg.prefill, e.Sg.prefillInput, e.Sg.prefillHit = false, 0, 0
}

// sgDecodeBatch counts an iteration that decoded, tokens generated by its decoding requests,
// and logs every DecodeLogInterval-th.
func (e *Engine) sgDecodeBatch(tokens int) {
	e.Stats.Sg.Decode += int64(tokens)
	e.Sg.decodeBatches++
	if e.Sg.decodeBatches >= e.cfg.DecodeLogInterval {
		e.sgLog(e.Time, true)
	}
}

// sgIdle sets the gauges of a scheduler idle since e.now at the first moment sglangIdleLog
// after its last log point, and every sglangIdleLog after, up to t: through t itself when no
// request arrives at t.
func (e *Engine) sgIdle(t time.Duration, through bool) {
	for {
		at := max(e.Sg.LastLog+SglangIdleLog, e.Time)
		if at > t || at == t && !through {
			return
		}
		e.sgLog(at, false)
	}
}

// sgFinish counts a finished request as SGLang's tokenizer does.
func (e *Engine) sgFinish(r *Request) {
	s := &e.Stats.Sg
	s.Prompt += int64(r.PromptLen)
	s.Generation += int64(r.NumOutput)
	s.Requests++
	s.CachedDevice += int64(r.CachedTokens)
	s.CachedHost += int64(r.ExternalTokens)
	s.E2e.Observe(snap.SglangBuckets.E2e, (r.lastTokenAt - r.Arrival).Seconds())
	s.More.Finish(r.PromptLen, r.NumOutput, r.verifies)
}
