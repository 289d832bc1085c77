package core

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

func testEngineConfig(blocks int) EngineConfig {
	return EngineConfig{NumBlocks: blocks, MaxNumSeqs: 64, MaxNumBatchedTokens: 2048, MaxModelLen: 2048, Cost: DefaultCostModel()}
}

func mustEngine(t testing.TB, cfg EngineConfig) *Engine {
	t.Helper()
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// checkEngine verifies the block accounting after an iteration: reference counts equal the
// number of running requests holding each block, the free queue holds exactly the unreferenced
// blocks, the cache map points at blocks carrying that hash, and waiting requests hold nothing.
func checkEngine(t *testing.T, e *Engine) {
	t.Helper()
	p := e.Pool
	refs := make([]int32, p.numBlocks())
	for _, r := range e.Running {
		if len(r.blocks)*snap.BlockSize < r.numComputed {
			t.Fatalf("request %d: %d blocks for %d computed tokens", r.ID, len(r.blocks), r.numComputed)
		}
		for _, b := range r.blocks {
			refs[b]++
		}
	}
	for i := range e.Waiting.Len() {
		if r := e.Waiting.Buf[(e.Waiting.Head+i)%len(e.Waiting.Buf)]; len(r.blocks) != 0 {
			t.Fatalf("waiting request %d holds %d blocks", r.ID, len(r.blocks))
		}
	}
	zero := 0
	for b, n := range refs {
		if p.ref[b] != n {
			t.Fatalf("block %d: ref %d, held by %d requests", b, p.ref[b], n)
		}
		if n == 0 {
			zero++
		}
	}
	walked := 0
	for b := p.head; b != nilBlock; b = p.next[b] {
		if p.ref[b] != 0 {
			t.Fatalf("block %d on the free queue with ref %d", b, p.ref[b])
		}
		walked++
	}
	if walked != zero || p.numFree() != zero {
		t.Fatalf("free queue has %d blocks, counter says %d, unreferenced blocks %d", walked, p.numFree(), zero)
	}
	if p.NumUsed() > p.numBlocks() || e.Stats.KvUsage > 1 {
		t.Fatalf("used %d of %d blocks, usage %v", p.NumUsed(), p.numBlocks(), e.Stats.KvUsage)
	}
	for h, b := range p.Cached {
		if !p.hashed[b] || p.hash[b] != h {
			t.Fatalf("cache entry %x points at block %d holding %x", h, b, p.hash[b])
		}
	}
	if len(e.Running) > e.cfg.MaxNumSeqs {
		t.Fatalf("%d running requests, max %d", len(e.Running), e.cfg.MaxNumSeqs)
	}
}

// randomSpecs makes n requests arriving over span: each shares a system prompt with probability
// shared, and draws its question from q questions (q == 0: every question is new).
func randomSpecs(rng *rand.Rand, n int, span time.Duration, sysLen, q int, maxTokens int) []RequestSpec {
	specs := make([]RequestSpec, n)
	for i := range specs {
		question := uint64(1000 + i)
		if q > 0 {
			question = uint64(rng.IntN(q))
		}
		qlen := 1 + int(Mix64(question)%300)
		out := 1 + rng.IntN(maxTokens)
		specs[i] = RequestSpec{
			ID: uint64(i + 1), Arrival: time.Duration(rng.Int64N(int64(span) + 1)),
			SystemSeed: 7, SystemLen: sysLen, QuestionSeed: Mix64(question), PromptLen: sysLen + qlen,
			OutputSeed: uint64(i) * 31, OutputLen: out, MaxTokens: maxTokens,
		}
	}
	return specs
}

type engineRun struct {
	events   []Event
	byID     map[uint64]RequestSpec
	finished map[uint64]bool
}

// runToEnd submits specs, steps the engine until everything finished, checking invariants after
// every iteration, and returns what happened.
func runToEnd(t *testing.T, e *Engine, specs []RequestSpec) *engineRun {
	return runToEndChecking(t, e, specs, true)
}

func runToEndChecking(t *testing.T, e *Engine, specs []RequestSpec, check bool) *engineRun {
	t.Helper()
	run := &engineRun{byID: map[uint64]RequestSpec{}, finished: map[uint64]bool{}}
	e.OnEvent(func(ev Event) { run.events = append(run.events, ev) })
	for _, s := range specs {
		e.Submit(s)
		run.byID[s.ID] = s
	}
	for steps := 0; e.Busy() || e.Pending(); steps++ {
		if steps > 1_000_000 {
			t.Fatal("engine does not finish")
		}
		e.RunUntil(e.Now() + time.Millisecond)
		if !e.Busy() && e.Pending() {
			e.RunUntil(e.pending[0].Arrival + 1)
		}
		if check {
			checkEngine(t, e)
		}
	}
	for _, ev := range run.events {
		if ev.Kind == EventFinish {
			run.finished[ev.Request] = true
		}
	}
	return run
}

func TestEngineProperties(t *testing.T) {
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 1))
		blocks := 128 + rng.IntN(512) // 2048..10240 tokens: tight enough to preempt
		cfg := testEngineConfig(blocks)
		cfg.MaxNumSeqs = 1 + rng.IntN(64)
		cfg.MaxNumBatchedTokens = 64 + rng.IntN(4096)
		e := mustEngine(t, cfg)
		specs := randomSpecs(rng, 150, 5*time.Second, rng.IntN(600), rng.IntN(20), 1+rng.IntN(800))
		run := runToEnd(t, e, specs)

		// Every admitted request finished; none is left running or waiting.
		if len(run.finished) != len(specs) || len(e.Running) != 0 || e.Waiting.Len() != 0 {
			t.Fatalf("seed %d: %d of %d finished, %d running, %d waiting", seed, len(run.finished), len(specs), len(e.Running), e.Waiting.Len())
		}
		var wantQueries, wantHits, wantGen, wantPrompt, preempts int64
		seen := map[uint64]bool{}
		for _, ev := range run.events {
			spec := run.byID[ev.Request]
			switch ev.Kind {
			case EventSchedule:
				if ev.Cached%snap.BlockSize != 0 || ev.Cached >= spec.PromptLen+spec.OutputLen {
					t.Fatalf("seed %d: request %d scheduled with %d cached tokens (prompt %d)", seed, ev.Request, ev.Cached, spec.PromptLen)
				}
				if !seen[ev.Request] {
					seen[ev.Request] = true
					if ev.Cached >= spec.PromptLen {
						t.Fatalf("seed %d: first lookup of request %d hit %d of %d prompt tokens", seed, ev.Request, ev.Cached, spec.PromptLen)
					}
					wantQueries += int64(spec.PromptLen)
					wantHits += int64(ev.Cached)
				}
			case EventFirstToken:
				wantPrompt += int64(spec.PromptLen)
			case EventFinish:
				wantGen += int64(spec.OutputLen)
			case EventPreempt:
				preempts++
			}
		}
		s := e.Stats
		if s.PrefixHits > s.PrefixQueries {
			t.Fatalf("seed %d: hits %d > queries %d", seed, s.PrefixHits, s.PrefixQueries)
		}
		if s.PrefixQueries != wantQueries || s.PrefixHits != wantHits {
			t.Fatalf("seed %d: queries/hits %d/%d, first lookups say %d/%d", seed, s.PrefixQueries, s.PrefixHits, wantQueries, wantHits)
		}
		if s.GenerationTokens != wantGen || s.PromptTokens != wantPrompt || s.Preemptions != preempts {
			t.Fatalf("seed %d: generation %d prompt %d preemptions %d, events say %d %d %d",
				seed, s.GenerationTokens, s.PromptTokens, s.Preemptions, wantGen, wantPrompt, preempts)
		}
		if s.PromptCached+s.PromptComputed != s.PromptTokens {
			t.Fatalf("seed %d: prompt tokens by source %d+%d != %d", seed, s.PromptCached, s.PromptComputed, s.PromptTokens)
		}
		if s.Success[snap.ReasonStop]+s.Success[snap.ReasonLength] != int64(len(specs)) || s.E2e.Count != uint64(len(specs)) {
			t.Fatalf("seed %d: %v finished, e2e count %d, want %d", seed, s.Success, s.E2e.Count, len(specs))
		}
		if s.Ttft.Count != uint64(len(specs)) || s.Itl.Count != uint64(wantGen)-uint64(len(specs)) {
			t.Fatalf("seed %d: ttft count %d itl count %d for %d requests and %d tokens", seed, s.Ttft.Count, s.Itl.Count, len(specs), wantGen)
		}
		if e.Pool.NumUsed() != 0 || s.KvUsage != 0 {
			t.Fatalf("seed %d: %d blocks still used after the last request", seed, e.Pool.NumUsed())
		}
	}
}

func TestIdenticalPromptsHitWholeBlocksButNotAll(t *testing.T) {
	for _, promptLen := range []int{5, 16, 17, 64, 100} {
		e := mustEngine(t, testEngineConfig(256))
		var specs []RequestSpec
		for i := range 3 {
			specs = append(specs, RequestSpec{ID: uint64(i + 1), QuestionSeed: 42, PromptLen: promptLen,
				OutputSeed: uint64(i), OutputLen: 3, MaxTokens: 10})
		}
		run := runToEnd(t, e, specs)
		want := (promptLen - 1) / snap.BlockSize * snap.BlockSize
		var cached []int
		for _, ev := range run.events {
			if ev.Kind == EventSchedule {
				cached = append(cached, ev.Cached)
			}
		}
		// The first request computes the prompt; the others, scheduled in the same iteration,
		// already find its full blocks, except the block holding the last prompt token.
		if len(cached) != 3 || cached[0] != 0 || cached[1] != want || cached[2] != want {
			t.Errorf("prompt %d: cached tokens per request %v, want [0 %d %d]", promptLen, cached, want, want)
		}
		if e.Stats.PrefixQueries != int64(3*promptLen) || e.Stats.PrefixHits != int64(2*want) {
			t.Errorf("prompt %d: queries %d hits %d", promptLen, e.Stats.PrefixQueries, e.Stats.PrefixHits)
		}
	}
}

func TestNoSharedPrefixMeansNoHits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	e := mustEngine(t, testEngineConfig(200))
	specs := randomSpecs(rng, 150, 2*time.Second, 0, 0, 500)
	runToEnd(t, e, specs)
	if e.Stats.PrefixQueries == 0 || e.Stats.PrefixHits != 0 {
		t.Fatalf("queries %d hits %d, want hits 0", e.Stats.PrefixQueries, e.Stats.PrefixHits)
	}
	if e.Stats.Preemptions == 0 {
		t.Fatalf("no preemptions: the test should also show that preempted re-lookups are not counted")
	}
}

// TestSmallerCacheMorePreemptions shrinks the KV cache over the range where it is what limits the
// batch. (Far below that range preemptions fall again: so few requests fit that few are running
// to be preempted; vLLM behaves the same.)
func TestSmallerCacheMorePreemptions(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	specs := randomSpecs(rng, 300, 3*time.Second, 256, 10, 700)
	var last int64 = -1
	for _, blocks := range []int{2048, 1024, 768, 512} {
		e := mustEngine(t, testEngineConfig(blocks))
		runToEndChecking(t, e, specs, false)
		p := e.Stats.Preemptions
		t.Logf("%d blocks: %d preemptions", blocks, p)
		if last >= 0 && p <= last {
			t.Errorf("%d blocks: %d preemptions, not more than %d with a larger cache", blocks, p, last)
		}
		last = p
	}
}

func TestPreemptionTakesNewestAndRequeuesAtFront(t *testing.T) {
	// 10 blocks; three 40-token prompts take 3 blocks each, so the first block any request needs
	// while decoding forces a preemption of the newest request.
	cfg := testEngineConfig(10)
	cfg.MaxModelLen = 160
	e := mustEngine(t, cfg)
	var order []Event
	e.OnEvent(func(ev Event) {
		if ev.Kind == EventPreempt || ev.Kind == EventSchedule {
			order = append(order, ev)
		}
	})
	for i := range 3 {
		e.Submit(RequestSpec{ID: uint64(i + 1), QuestionSeed: uint64(i + 100), PromptLen: 40,
			OutputSeed: uint64(i), OutputLen: 60, MaxTokens: 100})
	}
	for e.Busy() || e.Pending() {
		e.Step()
		checkEngine(t, e)
	}
	var first *Event
	for i := range order {
		if order[i].Kind == EventPreempt {
			first = &order[i]
			break
		}
	}
	if first == nil || first.Request != 3 {
		t.Fatalf("first preemption %+v, want request 3 (the newest)", first)
	}
	if e.Waiting.Len() != 0 || e.Stats.Success[snap.ReasonStop] != 3 {
		t.Fatalf("not all finished: %v", e.Stats.Success)
	}
}

func TestStepIdleReturnsZero(t *testing.T) {
	e := mustEngine(t, testEngineConfig(128))
	if d := e.Step(); d != 0 || e.Now() != 0 {
		t.Fatalf("idle step took %s, clock %s", d, e.Now())
	}
	e.Submit(RequestSpec{ID: 1, Arrival: time.Second, QuestionSeed: 1, PromptLen: 20, OutputLen: 2, MaxTokens: 2})
	e.RunUntil(500 * time.Millisecond)
	if e.Now() != 0 {
		t.Fatalf("engine moved to %s before the arrival", e.Now())
	}
	e.RunUntil(2 * time.Second)
	if e.Stats.Success[snap.ReasonLength] != 1 {
		t.Fatalf("request did not finish with reason length: %v", e.Stats.Success)
	}
}

func TestEngineConfigValidation(t *testing.T) {
	cfg := testEngineConfig(10) // 160 tokens < max model len 2048
	if _, err := NewEngine(cfg); err == nil {
		t.Fatal("no error for a KV cache smaller than one request")
	}
}
