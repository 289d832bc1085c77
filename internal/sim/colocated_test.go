package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// TestFleetDeliversLoopEdges drives a colocated fleet with a fake wall clock: it delivers the
// Sim's edges in order, each once the served pages show it (asleep after a sleep, awake after a
// wake-up), and a fleet outside the loop has no edge channel.
func TestFleetDeliversLoopEdges(t *testing.T) {
	clk := clock.NewFake(simtest.Start)
	cfg := simtest.FastConfig()
	cfg.Clock = clk
	cfg.Tick = 50 * time.Millisecond
	cfg.Workload.Colocated = true
	cfg.Workload.EvalEvery = 1
	cfg.Workload.Batches = 2
	f := startFleet(t, cfg)
	var got []fleetmodel.LoopEdge
	for range 200 { // 10 s of wall time, 200 s simulated
		waitTimers(t, clk, 1)
		for len(f.Edges()) > 0 {
			e := <-f.Edges()
			got = append(got, e)
			if e.Kind != fleetmodel.Sleep && e.Kind != fleetmodel.Wake {
				continue
			}
			g := simtest.GaugesOf(t, simtest.ParsePage(t, []byte(simtest.MustGet(t, f.URLs()[0]))), "1")
			if want := map[fleetmodel.LoopEdgeKind]float64{fleetmodel.Sleep: 0, fleetmodel.Wake: 1}[e.Kind]; g.Awake != want {
				t.Errorf("after %v of step %d the page shows awake %v", e.Kind, e.Step, g.Awake)
			}
		}
		clk.Advance(cfg.Tick)
	}
	want := simEdges(t, cfg, 10*time.Minute, 50*time.Millisecond, func(edges []fleetmodel.LoopEdge) bool {
		last := edges[len(edges)-1]
		return last.Kind == fleetmodel.Wake && last.Step == cfg.Workload.Batches
	})
	if !slices.Equal(got, want) {
		t.Errorf("fleet delivered\n%v\nthe simulation has\n%v", got, want)
	}

	cfg.Workload.Colocated, cfg.Workload.EvalEvery = false, 0
	cfg.Clock = nil
	if f := startFleet(t, cfg); f.Edges() != nil {
		t.Error("a fleet outside the colocated loop has an edge channel")
	}
}
