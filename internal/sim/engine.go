package sim

import (
	"fmt"
	"time"
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
	// MFU counts the work of each iteration by Compute; KVMetrics keeps the KV blocks'
	// residency (see compute.go).
	MFU       bool
	Compute   ComputeModel
	KVMetrics bool
}

// maxSpecTokens bounds SpecTokens: engineStats counts accepted tokens per position in an array.
const maxSpecTokens = 16

func (c EngineConfig) validate() error {
	switch {
	case c.NumBlocks < 1:
		return fmt.Errorf("blocks per engine must be positive, got %d", c.NumBlocks)
	case c.MaxNumSeqs < 1:
		return fmt.Errorf("max num seqs must be positive, got %d", c.MaxNumSeqs)
	case c.MaxNumBatchedTokens < 1:
		return fmt.Errorf("max num batched tokens must be positive, got %d", c.MaxNumBatchedTokens)
	case c.MaxModelLen < 1:
		return fmt.Errorf("max model len must be positive, got %d", c.MaxModelLen)
	case c.SpecTokens < 0 || c.SpecTokens > maxSpecTokens:
		return fmt.Errorf("speculative tokens must be 0 (off) to %d, got %d", maxSpecTokens, c.SpecTokens)
	case c.SGLang && c.DecodeLogInterval < 1:
		return fmt.Errorf("decode log interval must be positive, got %d", c.DecodeLogInterval)
	case c.NumBlocks*BlockSize < c.MaxModelLen:
		// vLLM refuses to start in this case too: one request of max_model_len tokens must fit,
		// or it could be preempted forever.
		return fmt.Errorf("KV cache of %d blocks (%d tokens) cannot hold one request of max model len %d",
			c.NumBlocks, c.NumBlocks*BlockSize, c.MaxModelLen)
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
	buckets *bucketSet
	pool    *blockPool

	now      time.Duration
	pending  []*request // submitted, not yet arrived, in arrival order
	waiting  requestQueue
	running  []*request
	lastBusy time.Duration // end of the last iteration that did anything

	stats engineStats
	sg    sglangEngine // an SGLang engine's logging state

	// ext is the fleet's external prefix cache, nil without a KV connector.
	ext *externalCache

	// server and index label events; onEvent, if set, sees every event.
	server, index int
	onEvent       func(Event)

	// led is the engine's ground truth (see ledger.go); showsSleep says that its pages have
	// vLLM's sleep families (and the RL families when the fleet syncs weights).
	led        ledger
	showsSleep bool
	// trace, if set, sees the raw events the ground truth is made of, for tests that recompute it.
	trace func(traceEvent)
	// sync is the engine's part in the weight syncs (see weights.go and async.go).
	sync engineSync
	// done, if set, sees every request that finishes (lost false) or that a restart loses.
	done func(r *request, lost bool)

	scheduled []scheduledReq // scratch, reused each step
}

type scheduledReq struct {
	r      *request
	tokens int
	draft  int // speculative tokens verified with the decode token
	loaded int // prompt tokens loaded from the external prefix cache
}

// NewEngine returns an empty engine at simulated time 0.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newEngine(cfg, newBucketSet(cfg.MaxModelLen)), nil
}

func newEngine(cfg EngineConfig, b *bucketSet) *Engine {
	e := &Engine{cfg: cfg, buckets: b, pool: newBlockPool(cfg.NumBlocks)}
	e.led = ledger{sched: &schedule{}, state: StateIdle}
	if cfg.KVMetrics {
		e.pool.kv = newKVResidency(cfg.NumBlocks, &e.now, &e.stats.shape)
	}
	return e
}

// OnEvent makes fn see every event of the engine.
func (e *Engine) OnEvent(fn func(Event)) { e.onEvent = fn }

// Now is the engine's simulated clock: the end of its last iteration, or the time it idled to.
func (e *Engine) Now() time.Duration { return e.now }

// Busy reports whether the engine has admitted requests it has not finished.
func (e *Engine) Busy() bool { return len(e.running) > 0 || e.waiting.len() > 0 }

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
	if e.halted() {
		return
	}
	for e.now < t {
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
			e.now = max(e.now, e.pending[0].Arrival)
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
	d := e.cost(sched)
	e.now += d
	e.lastBusy = e.now
	decoded := e.complete(sched)
	e.stats.running = len(e.running)
	e.stats.waiting = e.waiting.len()
	e.stats.kvUsage = e.pool.usage()
	e.stats.recorded = true
	if e.cfg.SGLang && decoded > 0 {
		e.sgDecodeBatch(decoded)
	}
	if e.cfg.SGLang && e.cfg.EagerLog {
		e.sgLog(e.now, decoded > 0)
	}
	e.note(e.now)
	return d
}

func (e *Engine) emit(kind EventKind, r *request, at time.Duration) {
	if e.onEvent != nil {
		e.onEvent(Event{At: at, Kind: kind, Server: e.server, Engine: e.index, Request: r.ID})
	}
}

func (e *Engine) emitSchedule(r *request, cached int) {
	if e.onEvent != nil {
		e.onEvent(Event{At: e.now, Kind: EventSchedule, Server: e.server, Engine: e.index, Request: r.ID, Cached: cached})
	}
}

func (e *Engine) admit() {
	n := 0
	for n < len(e.pending) && e.pending[n].Arrival <= e.now {
		r := e.pending[n]
		e.waiting.pushBack(r)
		e.emit(EventArrive, r, r.Arrival)
		n++
	}
	if n > 0 {
		copy(e.pending, e.pending[n:])
		clear(e.pending[len(e.pending)-n:])
		e.pending = e.pending[:len(e.pending)-n]
	}
	e.stats.waiting = e.waiting.len()
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
	for i := 0; i < len(e.running) && budget > 0; i++ {
		r := e.running[i]
		n := min(r.numTokens()-r.numComputed, budget)
		draft := 0
		if n == 1 && r.numOutput > 0 && e.cfg.SpecTokens > 0 {
			// A decoding request verifies the draft model's tokens in the same forward pass;
			// no draft runs past the request's last token.
			draft = max(0, min(e.cfg.SpecTokens, budget-1, r.OutputLen-r.numOutput-1))
			n += draft
		}
		ok := false
		for {
			if e.allocate(r, 0, n) {
				ok = true
				break
			}
			victim := e.running[len(e.running)-1]
			e.running = e.running[:len(e.running)-1]
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
	for !preempted && e.waiting.len() > 0 && budget > 0 && len(e.running) < e.cfg.MaxNumSeqs {
		r := e.waiting.front()
		// Whole blocks only, and never the whole sequence: the last token must be computed to
		// produce logits.
		maxHit := (r.numTokens() - 1) / BlockSize
		hit := e.pool.lookup(r.hashes, maxHit)
		ext := 0
		if e.ext != nil {
			ext = e.ext.lookup(r.hashes, hit, maxHit)
		}
		n := min(r.numTokens()-(hit+ext)*BlockSize, budget)
		// Loaded blocks take blocks of the local cache like computed ones, and are cached
		// locally from then on.
		if !e.allocate(r, hit, ext*BlockSize+n) {
			break
		}
		e.waiting.popFront()
		e.running = append(e.running, r)
		r.numComputed = (hit + ext) * BlockSize
		if !r.everScheduled {
			// vLLM's exported prefix-cache counters cover first-time lookups only; lookups of
			// preempted requests go to separate, unexported fields.
			r.everScheduled = true
			r.scheduledAt = e.now
			r.cachedTokens = hit * BlockSize
			e.stats.prefixQueries += int64(r.numTokens())
			e.stats.prefixHits += int64(hit * BlockSize)
			if e.ext != nil {
				// vLLM counts the request's tokens as the connector's queries and the tokens it
				// found as hits.
				r.externalTokens = ext * BlockSize
				e.stats.externalQueries += int64(r.numTokens())
				e.stats.externalHits += int64(ext * BlockSize)
			}
		}
		e.emitSchedule(r, hit*BlockSize)
		if e.cfg.SGLang {
			e.sgPrefill(r, n, (hit+ext)*BlockSize)
			if !r.preempted {
				e.stats.sg.more.firstPrefill(r.numTokens(), r.cachedTokens, r.externalTokens)
			}
		}
		sched = append(sched, scheduledReq{r, n, 0, ext * BlockSize})
		budget -= n
	}
	e.scheduled = sched
	return sched
}

// allocate gives r the blocks it needs to compute n more tokens after its first hit cached
// blocks (hit is 0 for a request that already has its blocks), or reports false and changes
// nothing if there are not enough free blocks. Cached blocks nobody uses count as free, except
// the ones this request is about to reuse.
func (e *Engine) allocate(r *request, hit, n int) bool {
	computed := r.numComputed
	if hit > 0 {
		computed = hit * BlockSize
	}
	need := (computed+n+BlockSize-1)/BlockSize - len(r.blocks) - hit
	reusedFree := 0
	for i := range hit {
		if e.pool.ref[e.pool.cachedBlock(r.hashes[i])] == 0 {
			reusedFree++
		}
	}
	if need > e.pool.numFree()-reusedFree {
		return false
	}
	for i := range hit {
		b := e.pool.cachedBlock(r.hashes[i])
		e.pool.touch(b)
		r.blocks = append(r.blocks, b)
	}
	if hit > 0 {
		r.numCached = hit
	}
	for range need {
		r.blocks = append(r.blocks, e.pool.allocate())
	}
	// Blocks are registered as soon as they are scheduled, as vLLM does, so a request scheduled
	// later in the same iteration already hits them.
	full := min((computed+n)/BlockSize, len(r.hashes))
	for i := r.numCached; i < full; i++ {
		e.pool.register(r.blocks[i], r.hashes[i])
		if e.ext != nil && (i+1)*BlockSize <= r.PromptLen {
			// Prompt blocks only, as LMCache saves by default (save_decode_cache off).
			e.ext.save(r.hashes[i])
		}
	}
	r.numCached = max(r.numCached, full)
	return true
}

// freeBlocks releases r's blocks, last block first, so that the end of a sequence is evicted
// before its beginning, which other requests are more likely to share.
func (e *Engine) freeBlocks(r *request) {
	for i := len(r.blocks) - 1; i >= 0; i-- {
		e.pool.release(r.blocks[i])
	}
	r.blocks = r.blocks[:0]
	r.numCached = 0
}

// preempt is vLLM's recompute preemption: the request loses its blocks and its progress and waits
// at the head of the queue; its output so far is kept and recomputed with the prompt.
func (e *Engine) preempt(r *request) {
	e.freeBlocks(r)
	r.recomputeUpTo = max(r.recomputeUpTo, r.numComputed)
	r.numComputed = 0
	r.preempted = true
	e.waiting.pushFront(r)
	e.stats.preemptions++
	if e.cfg.SGLang {
		e.stats.sg.more.retract(r.PromptLen, r.numOutput)
	}
	e.emit(EventPreempt, r, e.now)
}

func (e *Engine) cost(sched []scheduledReq) time.Duration {
	c := &e.cfg.Cost
	d := c.StepOverhead
	for _, s := range sched {
		if s.tokens == 1+s.draft && s.r.numComputed == s.r.numTokens()-1 && s.r.numOutput > 0 {
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
	now := e.now
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
			r.numOutput += a
			genTokens += a
			if e.cfg.SGLang {
				e.sg.specAccepted += int64(a + 1)
				e.sg.specDrafts++
				r.verifies++
			}
		} else {
			r.numComputed += s.tokens
		}
		if r.numComputed < r.numTokens() {
			continue // a prefill chunk; more to come
		}
		r.numOutput++
		genTokens++
		if e.cfg.SGLang {
			if r.numOutput == 1 {
				e.stats.sg.ttft.observe(sglangBuckets.ttft, (now - r.Arrival).Seconds())
			} else {
				e.stats.sg.itl.observeTokens(sglangBuckets.itl, (now - r.lastTokenAt).Seconds(), 1+a)
				decoded += 1 + a
			}
		}
		if r.numOutput == 1 {
			r.firstTokenAt = now
			promptTokens += r.PromptLen
			e.stats.promptTokens += int64(r.PromptLen)
			e.stats.promptCached += int64(r.cachedTokens)
			e.stats.promptExternal += int64(r.externalTokens)
			e.stats.promptComputed += int64(r.PromptLen - r.cachedTokens - r.externalTokens)
			e.stats.ttft.observe(b.ttft, (now - r.Arrival).Seconds())
			e.emit(EventFirstToken, r, now)
		} else {
			e.stats.itl.observe(b.perToken, (now - r.lastTokenAt).Seconds())
		}
		r.lastTokenAt = now
		r.extendHashes()
		switch {
		case r.numOutput >= r.OutputLen:
			e.finish(r)
			finished = true
		case r.AbortAfter > 0 && r.numOutput >= r.AbortAfter:
			e.abort(r)
			finished = true
		}
	}
	e.stats.generationTokens += int64(genTokens)
	e.led.tokens(now, genTokens, e.stats.currentVersion())
	if e.trace != nil && genTokens > 0 {
		e.trace(traceEvent{at: now, kind: traceTokens, n: genTokens})
	}
	if genTokens > 0 {
		e.stats.iterationTokens.observe(b.iteration, float64(promptTokens+genTokens))
	}
	if e.cfg.SGLang {
		e.sg.genSinceLog += int64(decoded)
	}
	if finished {
		kept := e.running[:0]
		for _, r := range e.running {
			if !r.ended() {
				kept = append(kept, r)
			}
		}
		clear(e.running[len(kept):])
		e.running = kept
	}
	return decoded
}

func (e *Engine) finish(r *request) {
	b := e.buckets
	s := &e.stats
	e.freeBlocks(r)
	reason := reasonStop
	if r.OutputLen >= r.MaxTokens {
		reason = reasonLength
	}
	s.success[reason]++
	decode := r.lastTokenAt - r.firstTokenAt
	s.e2e.observe(b.requestPhase, (r.lastTokenAt - r.Arrival).Seconds())
	s.queue.observe(b.requestPhase, (r.scheduledAt - r.Arrival).Seconds())
	s.prefill.observe(b.requestPhase, (r.firstTokenAt - r.scheduledAt).Seconds())
	s.inference.observe(b.requestPhase, (r.lastTokenAt - r.scheduledAt).Seconds())
	s.decode.observe(b.requestPhase, decode.Seconds())
	tpot := 0.0
	if r.numOutput > 1 {
		tpot = decode.Seconds() / float64(r.numOutput-1)
	}
	s.reqTPOT.observe(b.perToken, tpot)
	if e.cfg.SGLang {
		e.sgFinish(r)
	}
	s.reqPrompt.observe(b.tokens, float64(r.PromptLen))
	s.prefillKVComputed.observe(b.tokens, float64(r.PromptLen-r.cachedTokens-r.externalTokens))
	s.reqGeneration.observe(b.tokens, float64(r.numOutput))
	e.led.finished(e.now, r.PromptLen, r.numOutput)
	s.paramsMaxTokens.observe(b.tokens, float64(r.MaxTokens))
	// vLLM observes n and the longest generation of a request's n samples once all of them
	// finished (ParentRequest.observe_finished_request); a simulated request is one sample.
	s.paramsN.observe(b.n, 1)
	s.reqMaxGeneration.observe(b.tokens, float64(r.numOutput))
	e.emit(EventFinish, r, e.now)
	if e.done != nil {
		e.done(r, false)
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
func (e *Engine) abort(r *request) {
	e.freeBlocks(r)
	e.stats.abortedPrompt += int64(r.PromptLen)
	e.stats.aborted++
	if e.cfg.SGLang {
		e.sgFinish(r)
		e.stats.sg.aborted++
	}
	e.emit(EventAbort, r, e.now)
	if e.done != nil {
		e.done(r, false)
	}
}

// restart models the engine's server process restarting: every request in it is lost, the KV
// cache is empty, the stats start from zero and a sleeping engine comes back awake. It returns
// how many requests were lost.
func (e *Engine) restart() int {
	lost := len(e.running) + e.waiting.len()
	for _, r := range e.running {
		e.lose(r)
	}
	for i := range e.waiting.len() {
		e.lose(e.waiting.buf[(e.waiting.head+i)%len(e.waiting.buf)])
	}
	clear(e.running)
	e.running = e.running[:0]
	e.waiting.clear()
	// Requests that reached the server but not yet the scheduler die with it too.
	n := 0
	for n < len(e.pending) && e.pending[n].Arrival <= e.now {
		e.lose(e.pending[n])
		n++
	}
	lost += n
	e.pending = append(e.pending[:0], e.pending[n:]...)
	e.pool.reset()
	if e.stats.hasVersion {
		e.led.versions = append(e.led.versions, VersionChange{NoVersion, e.now})
	}
	e.stats = engineStats{}
	e.sg = sglangEngine{lastLog: e.now, lastDecodeLog: e.now}
	e.sync.restart()
	e.note(e.now)
	e.sg.base = e.led.total(e.now)
	if e.trace != nil {
		e.trace(traceEvent{at: e.now, kind: traceRestart})
	}
	return lost
}

// lose reports r lost in its server's restart.
func (e *Engine) lose(r *request) {
	e.emit(EventLost, r, e.now)
	if e.done != nil {
		e.done(r, true)
	}
}

// acceptDrafts draws how many of a draft's k tokens the target model accepts and counts the
// draft as vLLM does. Each token is accepted with the request's own probability, given that
// the ones before it were; the first rejection ends the draft. Some outputs are easier to
// guess than others, so the probability is drawn per request, between 0.5 and 0.95. The
// draws come from the request's seed and position, so a run stays repeatable without taking
// numbers from the workload's generator.
func (e *Engine) acceptDrafts(r *request, k int) int {
	alpha := 0.5 + 0.45*unit(mix64(r.OutputSeed^0x7370656364656364))
	a := 0
	for a < k && unit(mix64(r.OutputSeed+uint64(r.numOutput)*0x9e3779b97f4a7c15+uint64(a)+1)) < alpha {
		e.stats.specAcceptedPerPos[a]++
		a++
	}
	e.stats.specDrafts++
	e.stats.specDraftTokens += int64(k)
	e.stats.specAccepted += int64(a)
	return a
}

// unit maps a 64-bit hash to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }
