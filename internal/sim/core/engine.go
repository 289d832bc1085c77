package core

import (
	"fmt"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// CostModel gives the duration of one engine iteration (one forward pass of the batch). The
// defaults are in the range of a 1–2B-parameter model on one modern GPU: a few thousand
// generated tokens per second per engine, inter-token latencies of 10–50 ms.
type CostModel struct {
	// StepOverhead is paid by every iteration: scheduling, sampling, kernel launches.
	StepOverhead time.Duration
	// PerPrefillToken is paid per prompt (or recomputed) token computed in the iteration.
	PerPrefillToken time.Duration
	// PerDecodeRequest is paid per request that decodes one token in the iteration.
	PerDecodeRequest time.Duration
	// PerContextToken is paid per token of context each scheduled request attends to.
	PerContextToken time.Duration
}

// DefaultCostModel returns the cost model DefaultConfig uses.
func DefaultCostModel() CostModel {
	return CostModel{
		StepOverhead:     5 * time.Millisecond,
		PerPrefillToken:  25 * time.Microsecond,
		PerDecodeRequest: 100 * time.Microsecond,
		PerContextToken:  40 * time.Nanosecond,
	}
}

// EngineConfig is the part of Config one engine needs.
type EngineConfig struct {
	NumBlocks           int // KV-cache blocks of BlockSize tokens
	MaxNumSeqs          int // cap on the running batch
	MaxNumBatchedTokens int // token budget of one iteration (chunked prefill)
	MaxModelLen         int // only sets the token-count histogram buckets
	Cost                CostModel
	SpecTokens          int // speculative tokens per decode step; 0 is off
	// SGLang makes the engine count what an SGLang page shows too (see sglang.go), with a
	// decode log point every DecodeLogInterval decode batches.
	SGLang            bool
	DecodeLogInterval int
	// EagerLog sets SGLang's gauges after every iteration and when the engine goes idle
	// (Config.SGLangEagerGauges).
	EagerLog bool
	// Priority counts the running and waiting requests by priority at each log point (Config.Priority).
	Priority bool
	// TRTLLM makes the engine count what a TensorRT-LLM page shows too (see trtllm.go).
	TRTLLM bool
	// MFU counts the work of each iteration by Compute; KVMetrics keeps the KV blocks'
	// residency (see compute.go).
	MFU       bool
	Compute   ComputeModel
	KVMetrics bool
}

func (c EngineConfig) Validate() error {
	switch {
	case c.NumBlocks < 1:
		return fmt.Errorf("blocks per engine must be positive, got %d", c.NumBlocks)
	case c.MaxNumSeqs < 1:
		return fmt.Errorf("max num seqs must be positive, got %d", c.MaxNumSeqs)
	case c.MaxNumBatchedTokens < 1:
		return fmt.Errorf("max num batched tokens must be positive, got %d", c.MaxNumBatchedTokens)
	case c.MaxModelLen < 1:
		return fmt.Errorf("max model len must be positive, got %d", c.MaxModelLen)
	case c.SpecTokens < 0 || c.SpecTokens > snap.MaxSpecTokens:
		return fmt.Errorf("speculative tokens must be 0 (off) to %d, got %d", snap.MaxSpecTokens, c.SpecTokens)
	case c.SGLang && c.DecodeLogInterval < 1:
		return fmt.Errorf("decode log interval must be positive, got %d", c.DecodeLogInterval)
	case c.NumBlocks*snap.BlockSize < c.MaxModelLen:
		// vLLM refuses to start in this case too: one request of max_model_len tokens must fit,
		// or it could be preempted forever.
		return fmt.Errorf("KV cache of %d blocks (%d tokens) cannot hold one request of max model len %d",
			c.NumBlocks, c.NumBlocks*snap.BlockSize, c.MaxModelLen)
	}
	return nil
}

// EventKind says what happened to a request.
type EventKind uint8

// The events an engine reports, in the order a request meets them.
const (
	EventArrive     EventKind = iota + 1 // admitted to the waiting queue
	EventSchedule                        // scheduled (again, after a preemption)
	EventPreempt                         // preempted: blocks freed, back to the waiting queue
	EventFirstToken                      // first output token
	EventFinish                          // finished (stop or length)
	EventLost                            // dropped by a server restart
	EventAbort                           // aborted by its client
)

// Event is one thing that happened in an engine, for tests that check the model step by step
// or compare two runs.
type Event struct {
	At      time.Duration
	Kind    EventKind
	Server  int
	Engine  int
	Request uint64
	// Cached is, for EventSchedule, the prompt tokens found in the prefix cache.
	Cached int
}

// Engine is one vLLM engine core: a KV-cache block pool with a prefix cache, a running batch,
// a waiting queue and the iteration loop of vLLM's V1 scheduler, on a simulated clock. It is not
// safe for concurrent use; its owner drives it with Step or RunUntil.
type Engine struct {
	cfg     EngineConfig
	buckets *snap.BucketSet
	Pool    *blockPool

	Time     time.Duration
	pending  []*Request // submitted, not yet arrived, in arrival order
	Waiting  requestQueue
	Running  []*Request
	LastBusy time.Duration // end of the last iteration that did anything

	Stats snap.EngineStats
	Sg    sglangEngine // an SGLang engine's logging state
	Trt   trtllmEngine // a TensorRT-LLM engine's iteration state

	// ext is the fleet's external prefix cache, nil without a KV connector.
	Ext *externalCache

	// server and index label events; onEvent, if set, sees every event.
	Server, Index int
	EventFn       func(Event)

	// led is the engine's ground truth (see ledger.go); showsSleep says that its pages have
	// vLLM's sleep families (and the RL families when the fleet syncs weights).
	Led        ledger
	ShowsSleep bool
	// trace, if set, sees the raw events the ground truth is made of, for tests that recompute it.
	Trace func(TraceEvent)
	// sync is the engine's part in the weight syncs (see weights.go and async.go).
	Sync engineSync
	// done, if set, sees every request that finishes (lost false) or that a restart loses.
	Done func(r *Request, lost bool)

	scheduled []scheduledReq // scratch, reused each step
}

type scheduledReq struct {
	r      *Request
	tokens int
	draft  int // speculative tokens verified with the decode token
	loaded int // prompt tokens loaded from the external prefix cache
}

// NewEngine returns an empty engine at simulated time 0.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return NewEngineWithBuckets(cfg, snap.NewBucketSet(cfg.MaxModelLen)), nil
}

func NewEngineWithBuckets(cfg EngineConfig, b *snap.BucketSet) *Engine {
	e := &Engine{cfg: cfg, buckets: b, Pool: newBlockPool(cfg.NumBlocks)}
	e.Led = ledger{Sched: &Schedule{}, State: StateIdle}
	if cfg.KVMetrics {
		e.Pool.kv = newKVResidency(cfg.NumBlocks, &e.Time, &e.Stats.Shape)
	}
	return e
}

// OnEvent makes fn see every event of the engine.
func (e *Engine) OnEvent(fn func(Event)) { e.EventFn = fn }

// Now is the engine's simulated clock: the end of its last iteration, or the time it idled to.
func (e *Engine) Now() time.Duration { return e.Time }

// Busy reports whether the engine has admitted requests it has not finished.
func (e *Engine) Busy() bool { return len(e.Running) > 0 || e.Waiting.Len() > 0 }

// Pending reports whether requests were submitted that have not arrived yet.
func (e *Engine) Pending() bool { return len(e.pending) > 0 }

// Submit hands the engine a request that arrives at spec.Arrival (it may be in the engine's past,
// then it is admitted at the next iteration).
func (e *Engine) Submit(spec RequestSpec) {
	r := newRequest(spec)
	i := len(e.pending)
	e.pending = append(e.pending, r)
	for i > 0 && e.pending[i-1].Arrival > r.Arrival {
		e.pending[i] = e.pending[i-1]
		i--
	}
	e.pending[i] = r
}

// RunUntil runs iterations until the clock reaches t, idling forward to arrivals in between. An
// iteration that starts before t may end after it, as a real forward pass would.
func (e *Engine) RunUntil(t time.Duration) {
	if e.Halted() {
		return
	}
	for e.Time < t {
		if !e.Busy() {
			idle := len(e.pending) == 0 || e.pending[0].Arrival > t
			if e.cfg.SGLang {
				next := t
				if !idle {
					next = e.pending[0].Arrival
				}
				e.sgIdle(next, idle)
			}
			if idle {
				return
			}
			e.Time = max(e.Time, e.pending[0].Arrival)
		}
		if e.Step() == 0 && !e.Busy() {
			return
		}
	}
}

// Step runs one scheduler iteration starting at Now and returns its duration; the clock moves
// by that much. With nothing to run it returns 0 and leaves the clock alone.
func (e *Engine) Step() time.Duration {
	e.admit()
	if !e.Busy() {
		return 0
	}
	sched := e.schedule()
	e.shapeStep(sched)
	if e.cfg.SGLang {
		e.sgPrefillLog()
	}
	var trt trtIteration
	if e.cfg.TRTLLM {
		trt = e.trtScheduled(sched)
	}
	d := e.cost(sched)
	e.Time += d
	e.LastBusy = e.Time
	decoded := e.complete(sched)
	if e.cfg.TRTLLM {
		e.trtLog(trt, d)
	}
	e.Stats.Running = len(e.Running)
	e.Stats.Waiting = e.Waiting.Len()
	e.Stats.KvUsage = e.Pool.usage()
	e.Stats.Recorded = true
	if e.cfg.SGLang && decoded > 0 {
		e.sgDecodeBatch(decoded)
	}
	if e.cfg.SGLang && e.cfg.EagerLog {
		e.sgLog(e.Time, decoded > 0)
	}
	e.Note(e.Time)
	return d
}

func (e *Engine) emit(kind EventKind, r *Request, at time.Duration) {
	if e.EventFn != nil {
		e.EventFn(Event{At: at, Kind: kind, Server: e.Server, Engine: e.Index, Request: r.ID})
	}
}

func (e *Engine) emitSchedule(r *Request, cached int) {
	if e.EventFn != nil {
		e.EventFn(Event{At: e.Time, Kind: EventSchedule, Server: e.Server, Engine: e.Index, Request: r.ID, Cached: cached})
	}
}

func (e *Engine) admit() {
	n := 0
	for n < len(e.pending) && e.pending[n].Arrival <= e.Time {
		r := e.pending[n]
		e.Waiting.pushBack(r)
		e.emit(EventArrive, r, r.Arrival)
		n++
	}
	if n > 0 {
		copy(e.pending, e.pending[n:])
		clear(e.pending[len(e.pending)-n:])
		e.pending = e.pending[:len(e.pending)-n]
	}
	e.Stats.Waiting = e.Waiting.Len()
}

// schedule picks this iteration's work the way vLLM's V1 scheduler does: running requests first,
// in order, each getting the tokens it still needs (one when decoding) within the token budget;
// a running request that cannot get a KV block preempts the newest running request, itself last.
// Only if nothing was preempted are waiting requests admitted, first come first served, while the
// batch has room, the budget lasts and blocks can be found.
func (e *Engine) schedule() []scheduledReq {
	sched := e.scheduled[:0]
	budget := e.cfg.MaxNumBatchedTokens
	preempted := false
	for i := 0; i < len(e.Running) && budget > 0; i++ {
		r := e.Running[i]
		n := min(r.numTokens()-r.numComputed, budget)
		draft := 0
		if n == 1 && r.NumOutput > 0 && e.cfg.SpecTokens > 0 {
			// A decoding request verifies the draft model's tokens in the same forward pass;
			// no draft runs past the request's last token.
			draft = max(0, min(e.cfg.SpecTokens, budget-1, r.OutputLen-r.NumOutput-1))
			n += draft
		}
		ok := false
		for {
			if e.allocate(r, 0, n) {
				ok = true
				break
			}
			victim := e.Running[len(e.Running)-1]
			e.Running = e.Running[:len(e.Running)-1]
			e.preempt(victim)
			preempted = true
			if victim == r {
				break
			}
		}
		if !ok {
			break
		}
		sched = append(sched, scheduledReq{r, n, draft, 0})
		budget -= n
	}
	for !preempted && e.Waiting.Len() > 0 && budget > 0 && len(e.Running) < e.cfg.MaxNumSeqs {
		r := e.Waiting.front()
		// Whole blocks only, and never the whole sequence: the last token must be computed to
		// produce logits.
		maxHit := (r.numTokens() - 1) / snap.BlockSize
		hit := e.Pool.lookup(r.hashes, maxHit)
		ext := 0
		if e.Ext != nil {
			ext = e.Ext.lookup(r.hashes, hit, maxHit)
		}
		n := min(r.numTokens()-(hit+ext)*snap.BlockSize, budget)
		// Loaded blocks take blocks of the local cache like computed ones, and are cached
		// locally from then on.
		if !e.allocate(r, hit, ext*snap.BlockSize+n) {
			break
		}
		e.Waiting.popFront()
		e.Running = append(e.Running, r)
		r.numComputed = (hit + ext) * snap.BlockSize
		if !r.everScheduled {
			// vLLM's exported prefix-cache counters cover first-time lookups only; lookups of
			// preempted requests go to separate, unexported fields.
			r.everScheduled = true
			r.scheduledAt = e.Time
			r.CachedTokens = hit * snap.BlockSize
			e.Stats.PrefixQueries += int64(r.numTokens())
			e.Stats.PrefixHits += int64(hit * snap.BlockSize)
			if e.Ext != nil {
				// vLLM counts the request's tokens as the connector's queries and the tokens it
				// found as hits.
				r.ExternalTokens = ext * snap.BlockSize
				e.Stats.ExternalQueries += int64(r.numTokens())
				e.Stats.ExternalHits += int64(ext * snap.BlockSize)
			}
		}
		e.emitSchedule(r, hit*snap.BlockSize)
		if e.cfg.TRTLLM {
			e.trtAdmit(r, hit)
		}
		if e.cfg.SGLang {
			e.sgPrefill(r, n, (hit+ext)*snap.BlockSize)
			if !r.preempted {
				e.Stats.Sg.More.FirstPrefill(r.numTokens(), r.CachedTokens, r.ExternalTokens)
			}
		}
		sched = append(sched, scheduledReq{r, n, 0, ext * snap.BlockSize})
		budget -= n
	}
	e.scheduled = sched
	return sched
}

// allocate gives r the blocks it needs to compute n more tokens after its first hit cached
// blocks (hit is 0 for a request that already has its blocks), or reports false and changes
// nothing if there are not enough free blocks. Cached blocks nobody uses count as free, except
// the ones this request is about to reuse.
func (e *Engine) allocate(r *Request, hit, n int) bool {
	computed := r.numComputed
	if hit > 0 {
		computed = hit * snap.BlockSize
	}
	need := (computed+n+snap.BlockSize-1)/snap.BlockSize - len(r.blocks) - hit
	reusedFree := 0
	for i := range hit {
		if e.Pool.ref[e.Pool.cachedBlock(r.hashes[i])] == 0 {
			reusedFree++
		}
	}
	if need > e.Pool.numFree()-reusedFree {
		return false
	}
	for i := range hit {
		b := e.Pool.cachedBlock(r.hashes[i])
		e.Pool.touch(b)
		r.blocks = append(r.blocks, b)
	}
	if hit > 0 {
		r.numCached = hit
	}
	for range need {
		r.blocks = append(r.blocks, e.Pool.allocate())
	}
	// Blocks are registered as soon as they are scheduled, as vLLM does, so a request scheduled
	// later in the same iteration already hits them.
	full := min((computed+n)/snap.BlockSize, len(r.hashes))
	for i := r.numCached; i < full; i++ {
		e.Pool.register(r.blocks[i], r.hashes[i])
		if e.Ext != nil && (i+1)*snap.BlockSize <= r.PromptLen {
			// Prompt blocks only, as LMCache saves by default (save_decode_cache off).
			e.Ext.save(r.hashes[i])
		}
	}
	r.numCached = max(r.numCached, full)
	return true
}

// freeBlocks releases r's blocks, last block first, so that the end of a sequence is evicted
// before its beginning, which other requests are more likely to share.
func (e *Engine) freeBlocks(r *Request) {
	for i := len(r.blocks) - 1; i >= 0; i-- {
		e.Pool.release(r.blocks[i])
	}
	r.blocks = r.blocks[:0]
	r.numCached = 0
}

// preempt is vLLM's recompute preemption: the request loses its blocks and its progress and waits
// at the head of the queue; its output so far is kept and recomputed with the prompt.
func (e *Engine) preempt(r *Request) {
	e.freeBlocks(r)
	r.recomputeUpTo = max(r.recomputeUpTo, r.numComputed)
	r.numComputed = 0
	r.preempted = true
	e.Waiting.pushFront(r)
	e.Stats.Preemptions++
	if e.cfg.TRTLLM {
		e.Trt.paused++
	}
	if e.cfg.SGLang {
		e.Stats.Sg.More.Retract(r.PromptLen, r.NumOutput)
	}
	e.emit(EventPreempt, r, e.Time)
}

func (e *Engine) cost(sched []scheduledReq) time.Duration {
	c := &e.cfg.Cost
	d := c.StepOverhead
	for _, s := range sched {
		if s.tokens == 1+s.draft && s.r.numComputed == s.r.numTokens()-1 && s.r.NumOutput > 0 {
			// Draft tokens are verified like prompt tokens; the draft model's own cost is left
			// out.
			d += c.PerDecodeRequest + time.Duration(s.draft)*c.PerPrefillToken
		} else {
			d += time.Duration(s.tokens) * c.PerPrefillToken
		}
		d += time.Duration(s.r.numComputed+s.tokens) * c.PerContextToken
		// Loading a block from the external cache costs a tenth of computing it.
		d += time.Duration(s.loaded) * c.PerPrefillToken / 10
	}
	return d
}

// complete applies the iteration's results at its end time: computed tokens, one sampled token
// for every request whose sequence is now fully computed, finished requests, and the stats vLLM
// records from the iteration's outputs. It returns the tokens that requests already decoding
// generated (SGLang's decode batch).
func (e *Engine) complete(sched []scheduledReq) (decoded int) {
	b := e.buckets
	now := e.Time
	promptTokens, genTokens := 0, 0
	finished := false
	for _, s := range sched {
		r := s.r
		a := 0
		if s.draft > 0 {
			// The accepted draft tokens are output with the token the target model samples
			// after them; the rejected ones' KV is overwritten by later tokens.
			a = e.acceptDrafts(r, s.draft)
			r.numComputed += 1 + a
			r.NumOutput += a
			genTokens += a
			if e.cfg.SGLang {
				e.Sg.specAccepted += int64(a + 1)
				e.Sg.specDrafts++
				r.verifies++
			}
		} else {
			r.numComputed += s.tokens
		}
		if r.numComputed < r.numTokens() {
			continue // a prefill chunk; more to come
		}
		r.NumOutput++
		genTokens++
		if e.cfg.SGLang {
			if r.NumOutput == 1 {
				e.Stats.Sg.Ttft.Observe(snap.SglangBuckets.Ttft, (now - r.Arrival).Seconds())
			} else {
				e.Stats.Sg.Itl.ObserveTokens(snap.SglangBuckets.Itl, (now - r.lastTokenAt).Seconds(), 1+a)
				decoded += 1 + a
			}
		}
		if r.NumOutput == 1 {
			r.firstTokenAt = now
			promptTokens += r.PromptLen
			e.Stats.PromptTokens += int64(r.PromptLen)
			e.Stats.PromptCached += int64(r.CachedTokens)
			e.Stats.PromptExternal += int64(r.ExternalTokens)
			e.Stats.PromptComputed += int64(r.PromptLen - r.CachedTokens - r.ExternalTokens)
			e.Stats.Ttft.Observe(b.Ttft, (now - r.Arrival).Seconds())
			e.emit(EventFirstToken, r, now)
		} else {
			e.Stats.Itl.Observe(b.PerToken, (now - r.lastTokenAt).Seconds())
		}
		r.lastTokenAt = now
		r.extendHashes()
		switch {
		case r.NumOutput >= r.OutputLen:
			e.Finish(r)
			finished = true
		case r.AbortAfter > 0 && r.NumOutput >= r.AbortAfter:
			e.abort(r)
			finished = true
		}
	}
	e.Stats.GenerationTokens += int64(genTokens)
	e.Led.tokens(now, genTokens, e.Stats.CurrentVersion())
	if e.Trace != nil && genTokens > 0 {
		e.Trace(TraceEvent{At: now, Kind: TraceTokens, N: genTokens})
	}
	if genTokens > 0 {
		e.Stats.IterationTokens.Observe(b.Iteration, float64(promptTokens+genTokens))
	}
	if e.cfg.SGLang {
		e.Sg.genSinceLog += int64(decoded)
	}
	if finished {
		kept := e.Running[:0]
		for _, r := range e.Running {
			if !r.ended() {
				kept = append(kept, r)
			}
		}
		clear(e.Running[len(kept):])
		e.Running = kept
	}
	return decoded
}

func (e *Engine) Finish(r *Request) {
	b := e.buckets
	s := &e.Stats
	e.freeBlocks(r)
	reason := snap.ReasonStop
	if r.OutputLen >= r.MaxTokens {
		reason = snap.ReasonLength
	}
	s.Success[reason]++
	decode := r.lastTokenAt - r.firstTokenAt
	s.E2e.Observe(b.RequestPhase, (r.lastTokenAt - r.Arrival).Seconds())
	s.Queue.Observe(b.RequestPhase, (r.scheduledAt - r.Arrival).Seconds())
	s.Prefill.Observe(b.RequestPhase, (r.firstTokenAt - r.scheduledAt).Seconds())
	s.Inference.Observe(b.RequestPhase, (r.lastTokenAt - r.scheduledAt).Seconds())
	s.Decode.Observe(b.RequestPhase, decode.Seconds())
	tpot := 0.0
	if r.NumOutput > 1 {
		tpot = decode.Seconds() / float64(r.NumOutput-1)
	}
	s.ReqTPOT.Observe(b.PerToken, tpot)
	if e.cfg.SGLang {
		e.sgFinish(r)
	}
	if e.cfg.TRTLLM {
		trtReason := snap.TrtllmStop
		if reason == snap.ReasonLength {
			trtReason = snap.TrtllmLength
		}
		e.trtFinish(r, trtReason)
	}
	s.ReqPrompt.Observe(b.Tokens, float64(r.PromptLen))
	s.PrefillKVComputed.Observe(b.Tokens, float64(r.PromptLen-r.CachedTokens-r.ExternalTokens))
	s.ReqGeneration.Observe(b.Tokens, float64(r.NumOutput))
	e.Led.finished(e.Time, r.PromptLen, r.NumOutput)
	s.ParamsMaxTokens.Observe(b.Tokens, float64(r.MaxTokens))
	// vLLM observes n and the longest generation of a request's n samples once all of them
	// finished (ParentRequest.observe_finished_request); a simulated request is one sample.
	s.ParamsN.Observe(b.N, 1)
	s.ReqMaxGeneration.Observe(b.Tokens, float64(r.NumOutput))
	e.emit(EventFinish, r, e.Time)
	if e.Done != nil {
		e.Done(r, false)
	}
}

// abort ends r as its client's abort does, after the token it just generated. vLLM's frontend
// drops an aborted request's state without recording it as finished
// (OutputProcessor.abort_requests in vllm/v1/engine/output_processor.py): its prompt tokens,
// counted at its first token, and its generated tokens stay in prompt_tokens_total and
// generation_tokens_total, while request_success (finished_reason "abort" included) and every
// per-request histogram leave it out. SGLang's scheduler finishes an aborted running request
// through its usual path, so its tokenizer counts it as a finished request, and the abort call
// adds one to num_aborted_requests_total (TokenizerManager.abort_request).
func (e *Engine) abort(r *Request) {
	e.freeBlocks(r)
	e.Stats.AbortedPrompt += int64(r.PromptLen)
	e.Stats.Aborted++
	if e.cfg.SGLang {
		e.sgFinish(r)
		e.Stats.Sg.Aborted++
	}
	if e.cfg.TRTLLM {
		e.trtFinish(r, snap.TrtllmCancelled)
	}
	e.emit(EventAbort, r, e.Time)
	if e.Done != nil {
		e.Done(r, false)
	}
}

// restart models the engine's server process restarting: every request in it is lost, the KV
// cache is empty, the stats start from zero and a sleeping engine comes back awake. It returns
// how many requests were lost.
func (e *Engine) Restart() int {
	lost := len(e.Running) + e.Waiting.Len()
	for _, r := range e.Running {
		e.lose(r)
	}
	for i := range e.Waiting.Len() {
		e.lose(e.Waiting.Buf[(e.Waiting.Head+i)%len(e.Waiting.Buf)])
	}
	clear(e.Running)
	e.Running = e.Running[:0]
	e.Waiting.clear()
	// Requests that reached the server but not yet the scheduler die with it too.
	n := 0
	for n < len(e.pending) && e.pending[n].Arrival <= e.Time {
		e.lose(e.pending[n])
		n++
	}
	lost += n
	e.pending = append(e.pending[:0], e.pending[n:]...)
	e.Pool.reset()
	if e.Stats.HasVersion {
		e.Led.Versions = append(e.Led.Versions, VersionChange{snap.NoVersion, e.Time})
	}
	e.Stats = snap.EngineStats{}
	e.Sg = sglangEngine{LastLog: e.Time, lastDecodeLog: e.Time}
	e.Trt = trtllmEngine{}
	e.Sync.Restart()
	e.Note(e.Time)
	e.Sg.base = e.Led.total(e.Time)
	if e.Trace != nil {
		e.Trace(TraceEvent{At: e.Time, Kind: TraceRestart})
	}
	return lost
}

// lose reports r lost in its server's restart.
func (e *Engine) lose(r *Request) {
	e.emit(EventLost, r, e.Time)
	if e.Done != nil {
		e.Done(r, true)
	}
}

// acceptDrafts draws how many of a draft's k tokens the target model accepts and counts the
// draft as vLLM does. Each token is accepted with the request's own probability, given that
// the ones before it were; the first rejection ends the draft. Some outputs are easier to
// guess than others, so the probability is drawn per request, between 0.5 and 0.95. The
// draws come from the request's seed and position, so a run stays repeatable without taking
// numbers from the workload's generator.
func (e *Engine) acceptDrafts(r *Request, k int) int {
	alpha := 0.5 + 0.45*Unit(Mix64(r.OutputSeed^0x7370656364656364))
	a := 0
	for a < k && Unit(Mix64(r.OutputSeed+uint64(r.NumOutput)*0x9e3779b97f4a7c15+uint64(a)+1)) < alpha {
		e.Stats.SpecAcceptedPerPos[a]++
		a++
	}
	e.Stats.SpecDrafts++
	e.Stats.SpecDraftTokens += int64(k)
	e.Stats.SpecAccepted += int64(a)
	return a
}

// unit maps a 64-bit hash to [0, 1).
func Unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }
