package core

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// TestRecomputedAndWorkAgainstReference steps an engine with a cache small enough to preempt and
// counts, from outside, what each iteration executed: a request's positions from the ones it had
// computed before the iteration to the ones after, recomputed where they lie below the furthest
// position it had reached at an earlier iteration's end. The engine's recomputed positions,
// FLOPs and bytes equal that reference's.
func TestRecomputedAndWorkAgainstReference(t *testing.T) {
	cfg := testEngineConfig(40)
	cfg.MaxModelLen = 512
	cfg.MFU, cfg.Compute = true, DefaultComputeModel()
	e := mustEngine(t, cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range randomSpecs(rng, 40, 2*time.Second, 64, 20, 200) {
		e.Submit(s)
	}
	furthest := map[uint64]int{}
	var tokens, context, iterations, recomputed int64
	for steps := 0; e.Busy() || e.Pending(); steps++ {
		if steps > 1_000_000 {
			t.Fatal("engine does not finish")
		}
		if !e.Busy() {
			e.Time = e.pending[0].Arrival
		}
		if e.Step() == 0 {
			continue
		}
		iterations++
		for _, sr := range e.scheduled {
			r := sr.r
			end := r.numComputed // no drafts: the iteration computed all its tokens
			start := end - sr.tokens
			tokens += int64(sr.tokens)
			context += int64(start)
			if hw := furthest[r.ID]; hw > start {
				recomputed += int64(min(end, hw) - start)
			}
			furthest[r.ID] = max(furthest[r.ID], end)
		}
	}
	s := &e.Stats.Shape
	if e.Stats.Preemptions == 0 || recomputed == 0 {
		t.Fatalf("%d preemptions, %d positions recomputed: the test needs both", e.Stats.Preemptions, recomputed)
	}
	if s.Recomputed != recomputed {
		t.Errorf("engine counted %d recomputed positions, the reference %d", s.Recomputed, recomputed)
	}
	m := cfg.Compute
	if want := 2 * m.Params * float64(tokens); s.Flops != want {
		t.Errorf("FLOPs %v, want %v (2 × %v params × %d tokens)", s.Flops, want, m.Params, tokens)
	}
	if want := float64(iterations)*m.Params*m.BytesPerParam + m.KVBytesPerToken*float64(context); s.ReadBytes != want {
		t.Errorf("bytes read %v, want %v", s.ReadBytes, want)
	}
	if want := m.KVBytesPerToken * float64(tokens); s.WriteBytes != want {
		t.Errorf("bytes written %v, want %v", s.WriteBytes, want)
	}
	// Without preemptions every prompt position not cached is computed once and every output
	// but the last is fed back once: the tokens the page's own counters give.
	e2 := mustEngine(t, func() EngineConfig { c := cfg; c.NumBlocks = 4096; return c }())
	rng = rand.New(rand.NewPCG(3, 4))
	specs := randomSpecs(rng, 40, 2*time.Second, 64, 20, 200)
	runToEndChecking(t, e2, specs, false)
	st := &e2.Stats
	if st.Preemptions != 0 || st.Shape.Recomputed != 0 {
		t.Fatalf("%d preemptions, %d recomputed in a cache that holds everything", st.Preemptions, st.Shape.Recomputed)
	}
	finished := int64(0)
	for _, n := range st.Success {
		finished += n
	}
	computed := st.PromptComputed + st.GenerationTokens - finished
	if want := 2 * m.Params * float64(computed); st.Shape.Flops != want {
		t.Errorf("FLOPs %v, want 2 × params × %d (prompt computed + generated − requests)", st.Shape.Flops, computed)
	}
}

// TestKVResidency drives the residency collector on a clock of its own: a block's lifetime, its
// idle time before eviction and the gaps between its last four accesses are observed when it is
// allocated again, and a restart forgets the lives.
func TestKVResidency(t *testing.T) {
	var now time.Duration
	var out snap.ShapeStats
	k := newKVResidency(2, &now, &out)
	k.allocated(0) // a first life: nothing to observe
	k.accessed(1)  // never allocated: not tracked
	for _, at := range []time.Duration{1, 2, 4, 8, 16} {
		now = at * time.Second
		k.accessed(0)
	}
	now = 20 * time.Second
	k.allocated(0)
	b := snap.KvResidencyBounds
	if out.KvLifetime.Count != 1 || out.KvLifetime.Sum != 20 || out.KvLifetime.Counts[searchBound(b, 20)] != 1 {
		t.Errorf("lifetime %+v, want one of 20 s", out.KvLifetime)
	}
	if out.KvIdle.Count != 1 || out.KvIdle.Sum != 4 {
		t.Errorf("idle %v of %d, want one of 4 s (16 s to 20 s)", out.KvIdle.Sum, out.KvIdle.Count)
	}
	// The last four accesses: 2, 4, 8, 16 s.
	if out.KvReuse.Count != 3 || out.KvReuse.Sum != 14 {
		t.Errorf("reuse gaps sum %v of %d, want 2 + 4 + 8 of 3", out.KvReuse.Sum, out.KvReuse.Count)
	}
	now = 21 * time.Second
	k.allocated(0) // a life with no access: idle is its lifetime, no gaps
	if out.KvLifetime.Count != 2 || out.KvIdle.Sum != 5 || out.KvReuse.Count != 3 {
		t.Errorf("after an unused life: lifetimes %d, idle sum %v, gaps %d", out.KvLifetime.Count, out.KvIdle.Sum, out.KvReuse.Count)
	}
	k.reset()
	k.allocated(0)
	if out.KvLifetime.Count != 2 {
		t.Errorf("a life from before the reset was observed")
	}
}

func searchBound(bounds []float64, v float64) int {
	for i, b := range bounds {
		if v <= b {
			return i
		}
	}
	return len(bounds)
}
