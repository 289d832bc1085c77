package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/serve"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/step"
)

// TestStaleTokensMatchTruth feeds the async loop's pages and weight versions to vllmstat's step
// tracker as a run does: a scrape of every server at each tick, and at each of the trainer's
// publishes a boundary scrape, then the publish, then the end of the step it closes. The
// engines load each version at their own time, one 3 s late, and a scrape comes right after
// each load ends, as the rule of an interval's versions wants (the engine's at its start, the
// trainer's at its end). Ticks are 4 s apart, longer than a sync's pause and load, so that an
// interval ending at a load's end holds tokens of before the pause, where the rule matters.
//
// The stale tokens of every step are the simulation's to the granularity of its pages: an
// engine's iteration in flight shows whole on a page taken during it, so a page may run one
// iteration (at most max_num_seqs tokens) ahead of the simulated time, at each step edge and
// each load end. Taking the engine's version at an interval's end instead misses every token an
// engine made between its previous scrape and its pause: hundreds more in this run.
func TestStaleTokensMatchTruth(t *testing.T) {
	cfg := simtest.AsyncConfig()
	cfg.DP = 1 // a server answers one version: one engine each
	cfg.Servers = 3
	s := mustSim(t, cfg)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := step.NewTracker(step.Options{})
	tr.Begin(start)
	targets := make([]string, cfg.Servers)
	for i := range targets {
		targets[i] = fmt.Sprintf("http://sim-%d:8000/metrics", i)
	}
	scrape := func(at time.Duration) {
		for i, u := range targets {
			pg, err := page.ParsePage(s.Page(i, start))
			if err != nil {
				t.Fatal(err)
			}
			ts := start.Add(at)
			tr.Observe(ts, u, pg, nil)
			var stats []snap.EngineStats
			for _, e := range s.Servers[i].Engines {
				stats = append(stats, e.Stats)
			}
			v := serve.ServerVersion(stats)
			tr.EngineVersion(ts, u, int64(v), v != snap.NoVersion)
		}
	}
	const steps = 3
	const interval = 4 * time.Second
	var recs []step.Record
	at := time.Duration(0)
	scrape(at)
	for v := 0; v <= steps; v++ {
		p := s.PublishAt(v)
		for tick := at + interval; ; {
			// the syncs' steps before the next tick, one by one: a scrape right after each
			// load's end
			if ev, kind, i := s.NextEvent(); kind == fleetmodel.EvSync && ev < min(tick, p) {
				ended := s.Engines[i].Sync.Phase == core.SyncEndDue
				s.AdvanceTo(ev)
				if ended {
					at = ev
					scrape(at)
				}
				continue
			}
			if tick >= p {
				break
			}
			at = tick
			s.AdvanceTo(at)
			scrape(at)
			tick += interval
		}
		at = p
		s.AdvanceTo(at)
		scrape(at) // the publish's boundary scrape
		tr.Publish(int64(v), start.Add(at+time.Nanosecond))
		if v > 0 {
			recs = append(recs, tr.EndStep(int64(v), start.Add(at+2*time.Nanosecond)))
		}
	}
	g := s.GroundTruth()
	if len(g.StepEnds) < steps {
		t.Fatalf("the simulation ended %d steps, want %d", len(g.StepEnds), steps)
	}
	// an iteration per engine at each of the two step edges and each load end of the step
	slack := float64(cfg.MaxNumSeqs * len(g.Engines) * 3)
	total := 0.0
	for k, rec := range recs {
		var gen, stale int64
		for _, e := range g.Engines {
			gen += e.Steps[k].GenerationTokens
			stale += e.Steps[k].StaleTokens
		}
		if got := rec.Metrics["vllm/generation_tokens"]; got < float64(gen)-slack || got > float64(gen)+slack {
			t.Errorf("step %d: %v tokens, the simulation made %d", k+1, got, gen)
		}
		if got := rec.Metrics["vllm/policy/stale_generation_tokens"]; got < float64(stale)-slack || got > float64(stale)+slack {
			t.Errorf("step %d: %v stale tokens, the simulation made %d (give or take %v)", k+1, got, stale, slack)
		}
		total += float64(stale)
	}
	if total < 10*slack {
		t.Fatalf("%v stale tokens in all: too few to tell the rule from another", total)
	}
}
