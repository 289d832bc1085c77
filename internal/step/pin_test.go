package step

import "testing"

// TestPhaseEndedTwiceInAStep: a phase that ran twice in a step and ended both times lasts the
// sum of its runs, not its last one, and its rates are over that sum.
func TestPhaseEndedTwiceInAStep(t *testing.T) {
	tr := NewTracker(Options{Scalars: true})
	tr.Begin(at(0))
	obs := func(ts, gen float64) {
		tr.Observe(at(ts), target, mustPage(t, eng{engine: "0", gen: gen, running: 1}), nil)
	}
	obs(0.1, 0)
	tr.StartPhase("rollout", at(1))
	obs(2, 100) // 100 tokens in the rollout's first run
	tr.EndPhase("rollout", at(3))
	obs(4, 100)
	tr.StartPhase("rollout", at(5))
	obs(5.5, 400) // 300 in its second
	tr.EndPhase("rollout", at(6))
	rec := tr.EndStep(1, at(7))
	ph := rec.Phases["rollout"]
	if ph == nil {
		t.Fatalf("no rollout phase in %+v", rec)
	}
	if ph.DurationS != 3 || ph.Intervals != 2 {
		t.Errorf("rollout: %vs in %d runs, want 3s (1–3 s and 5–6 s) in 2", ph.DurationS, ph.Intervals)
	}
	want(t, ph.Metrics, "vllm/generation_tokens", 400)
	want(t, ph.Metrics, "vllm/generation_tokens_per_s", 400.0/3)
}

// TestPhaseFirstSampleSpan: a phase's first sample stands for the time since the phase started,
// not since the target's previous scrape before it nor since the step start, so the phase's
// idle and asleep fractions are over its own time.
func TestPhaseFirstSampleSpan(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		tr := NewTracker(Options{Scalars: true})
		tr.Begin(at(0))
		obs := func(ts, running float64) {
			tr.Observe(at(ts), target, mustPage(t, eng{engine: "0", running: running}), nil)
		}
		obs(0.1, 0)
		tr.StartPhase("rollout", at(1))
		obs(2, 10) // busy from 1 s to 2 s
		obs(3, 0)  // idle from 2 s to 3 s
		rec := tr.EndStep(1, at(3))
		ph := rec.Phases["rollout"]
		if ph == nil {
			t.Fatalf("no rollout phase in %+v", rec)
		}
		want(t, ph.Metrics, "vllm/worker_idle_fraction/mean", 0.5)
		want(t, ph.Metrics, "vllm/worker_idle_fraction/max", 0.5)
		// The step's own first sample of the worker stood for no time; its spans are 0.1–2 s
		// busy and 2–3 s idle.
		want(t, rec.Metrics, "vllm/worker_idle_fraction/mean", 1/2.9)
	})
	t.Run("asleep", func(t *testing.T) {
		tr := NewTracker(Options{Scalars: true})
		tr.Begin(at(0))
		obs := func(ts, running float64, awake bool) {
			observeText(t, tr, ts, sleepPage(t, "0", running, 0, awake))
		}
		obs(0.1, 0, true)
		tr.StartPhase("eval", at(1))
		obs(2, 0, false) // asleep from 1 s to 2 s
		obs(3, 0, true)  // idle from 2 s to 3 s
		rec := tr.EndStep(1, at(3))
		ph := rec.Phases["eval"]
		if ph == nil {
			t.Fatalf("no eval phase in %+v", rec)
		}
		want(t, ph.Metrics, "vllm/worker_asleep_fraction/mean", 0.5)
		want(t, rec.Metrics, "vllm/worker_asleep_fraction/mean", 1.9/2.9)
	})
}

// TestOverflowBesideFiniteWorkers: engine 0's prefix-cache queries go from -1e308 to 1e308, an
// increase beyond the float limit (the tracker's mark of an overflowed count: a value that is
// not finite), while engines 1 and 2 stay finite. The hit rate's statistics over the
// per-interval samples and its worst worker are absent: over engines 1 and 2 alone they would
// leave engine 0 out and look like the fleet's. With engine 0's queries finite (and unmoved: no
// hit rate of its own) the same step has both keys.
func TestOverflowBesideFiniteWorkers(t *testing.T) {
	fleet := func(q0a, q0b float64) []event {
		return []event{
			scrape(0, eng{engine: "0", queries: q0a, hits: 1}, eng{engine: "1", queries: 100, hits: 10}, eng{engine: "2", queries: 100, hits: 50}),
			scrape(1, eng{engine: "0", queries: q0b, hits: 2}, eng{engine: "1", queries: 200, hits: 30}, eng{engine: "2", queries: 200, hits: 90}),
			end(1, 1),
		}
	}
	keys := []string{"vllm/prefix_cache_hit_rate/mean", "vllm/prefix_cache_hit_rate/max", "vllm/prefix_cache_hit_rate/p95",
		"vllm/prefix_cache_hit_rate/worst_worker", "vllm/prefix_cache_hit_rate"}

	r := run(t, Options{Scalars: true, PerWorker: true}, fleet(-1e308, 1e308))[0]
	for _, k := range keys {
		absent(t, r.Metrics, k)
	}
	if r.WorstWorkers != nil && r.WorstWorkers.PrefixCacheHitRate != nil {
		t.Errorf("worst hit-rate worker %+v, want none: engine 0's queries overflowed", r.WorstWorkers.PrefixCacheHitRate)
	}
	want(t, r.PerWorker[1].Metrics, "vllm/prefix_cache_hit_rate", 0.2)
	want(t, r.PerWorker[2].Metrics, "vllm/prefix_cache_hit_rate", 0.4)

	r = run(t, Options{Scalars: true}, fleet(5, 5))[0]
	want(t, r.Metrics, "vllm/prefix_cache_hit_rate/mean", 0.3)
	want(t, r.Metrics, "vllm/prefix_cache_hit_rate/worst_worker", 0.2)
}
