package core

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// A TensorRT-LLM fleet (Config.Engine "trtllm") runs the same engines and workload as a vLLM
// fleet and counts what trtllm-serve's MetricsCollector logs (snap.TrtllmStats):
//   - at a request's finish, its finish reason, prompt, generated and cached prompt tokens and
//     its latencies, each latency but the queue time only when above 0 (the server drops the
//     others; it keeps any queue time a scheduled request has), the time per
//     output token only for a request of more than one token; an aborted request finishes with
//     reason "cancelled" and is counted the same way;
//   - the iterations, from the one a request finished in: a request's finish wakes the
//     server's collector, which drains the executor's iteration statistics, logging each, until
//     none came for half a second (_iteration_stats_collector_loop in tensorrt_llm/serve/
//     openai_server.py, get_stats_async(timeout=0.5)). So from a busy period's first finish on
//     every iteration is logged; after it the gauges hold the last iteration's figures, and the
//     iterations of the next busy period wait in the executor's queue until its first finish,
//     when they are logged at once (their prefilled tokens observed then).
//
// The mapping to the model: the running batch is numActiveRequests, the waiting queue
// numQueuedRequests, a preemption pauses the request (numPausedRequests of the iteration that
// preempted it), and every prefill allocation counts its blocks found in the prefix cache as
// reused and the rest of its sequence's blocks as missed, as the KV cache manager does when it
// adds a sequence.

// trtllmEngine is a TensorRT-LLM engine's state within one iteration, which no page shows.
type trtllmEngine struct {
	finished int // requests that finished in the iteration
	paused   int // requests the iteration preempted
	// reused and missed are the engine's KV blocks counted so far; a log copies them.
	reused, missed int64
	// draining is whether the server's collector drains the executor's statistics, lastEnd the
	// end of the previous iteration: the drain stops once no iteration came for trtDrainTimeout.
	draining bool
	lastEnd  time.Duration
	// queued are the prefilled tokens of the iterations not yet drained.
	queued []int
}

// trtDrainTimeout is how long the server's collector waits for the executor's next iteration
// statistics before its drain ends (the timeout it gives get_stats_async).
const trtDrainTimeout = 500 * time.Millisecond

// trtAdmit counts r's blocks at a prefill allocation: hit blocks reused, the rest missed.
func (e *Engine) trtAdmit(r *Request, hit int) {
	blocks := (r.numTokens() + snap.BlockSize - 1) / snap.BlockSize
	e.Trt.reused += int64(hit)
	e.Trt.missed += int64(blocks - hit)
}

// trtFinish logs r's figures at its finish for reason.
func (e *Engine) trtFinish(r *Request, reason snap.TrtllmReason) {
	t := &e.Stats.Trt
	f := &t.First
	f.Logs++
	first := func(at *uint64) {
		if *at == 0 {
			*at = f.Logs
		}
	}
	e.Trt.finished++
	t.Success[reason]++
	first(&f.Reason[reason])
	b := &snap.TrtllmBuckets
	observe := func(h *snap.Histogram, at *uint64, bounds []float64, d time.Duration) {
		if d > 0 {
			h.Observe(bounds, d.Seconds())
			first(at)
		}
	}
	// A request aborted before its first token has no token times: the server's differences of
	// them are 0 or below, which it drops.
	firstToken, lastToken := r.firstTokenAt, r.lastTokenAt
	if r.NumOutput == 0 {
		firstToken, lastToken = r.Arrival, r.Arrival
	}
	observe(&t.E2e, &f.E2e, b.Phase, lastToken-r.Arrival)
	observe(&t.Ttft, &f.Ttft, b.Ttft, firstToken-r.Arrival)
	if r.NumOutput > 1 {
		observe(&t.Tpot, &f.Tpot, b.Tpot, (lastToken-firstToken)/time.Duration(r.NumOutput-1))
	}
	if r.everScheduled {
		// The queue time is kept whatever its value (it is not None), 0 for a request scheduled
		// as it arrived.
		t.Queue.Observe(b.Phase, (r.scheduledAt - r.Arrival).Seconds())
		first(&f.Queue)
		observe(&t.Prefill, &f.Prefill, b.Prefill, firstToken-r.scheduledAt)
		observe(&t.Decode, &f.Decode, b.Phase, lastToken-firstToken)
		observe(&t.Inference, &f.Inference, b.Phase, lastToken-r.scheduledAt)
	}
	if r.PromptLen > 0 {
		t.Prompt += int64(r.PromptLen)
		first(&f.Prompt)
	}
	if r.NumOutput > 0 {
		t.Generation += int64(r.NumOutput)
		first(&f.Generation)
	}
	cached := r.CachedTokens + r.ExternalTokens
	t.Cached += int64(cached)
	t.CachedPerRequest.Observe(b.CachedTokens, float64(cached))
	first(&f.CachedPerRequest)
}

// trtIteration is what the iteration just run did, counted before its outputs change the
// requests.
type trtIteration struct {
	active, queued, context, generation, contextTokens int
}

func (e *Engine) trtScheduled(sched []scheduledReq) trtIteration {
	it := trtIteration{active: len(e.Running), queued: e.Waiting.Len()}
	for _, s := range sched {
		if s.r.NumOutput == 0 || s.tokens > 1+s.draft {
			it.context++
			it.contextTokens += s.tokens
		} else {
			it.generation++
		}
	}
	return it
}

// trtLog logs the iteration that took d, ending now, if the server's collector drains it: a
// request finished in it, or the drain a finish began goes on (the previous iteration ended at
// most trtDrainTimeout before); an iteration it does not drain waits in the executor's queue.
// Then it starts the next.
func (e *Engine) trtLog(it trtIteration, d time.Duration) {
	finished, paused := e.Trt.finished, e.Trt.paused
	e.Trt.finished, e.Trt.paused = 0, 0
	if e.Time-e.Trt.lastEnd > trtDrainTimeout {
		e.Trt.draining = false
	}
	e.Trt.lastEnd = e.Time
	e.Trt.draining = e.Trt.draining || finished > 0
	if !e.Trt.draining {
		if it.contextTokens > 0 {
			e.Trt.queued = append(e.Trt.queued, it.contextTokens)
		}
		return
	}
	t := &e.Stats.Trt
	f := &t.First
	f.Logs++
	first := func(at *uint64) {
		if *at == 0 {
			*at = f.Logs
		}
	}
	first(&f.Iteration)
	t.Logged = snap.TrtllmIteration{
		Active: it.active, Queued: it.queued, Latency: d.Seconds(), UsedBlocks: e.Pool.NumUsed(),
		ReusedBlocks: e.Trt.reused, MissedBlocks: e.Trt.missed,
		Context: it.context, Generation: it.generation, Paused: paused, ContextTokens: it.contextTokens,
	}
	t.Completed += int64(finished)
	first(&f.Completed)
	if e.Trt.reused > 0 {
		first(&f.Reused)
	}
	if e.Trt.missed > 0 {
		first(&f.Missed)
	}
	// The queued iterations are drained first, in order, then this one.
	for _, tokens := range append(e.Trt.queued, it.contextTokens) {
		if tokens > 0 {
			t.PrefillBatchTokens.Observe(snap.TrtllmBuckets.BatchTokens, float64(tokens))
			first(&f.PrefillBatchTokens)
		}
	}
	e.Trt.queued = e.Trt.queued[:0]
}
