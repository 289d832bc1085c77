package sim

import (
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
)

func runSync(t *testing.T, cfg fleetconfig.Config, until, step time.Duration) *syncRun {
	t.Helper()
	r := &syncRun{s: mustSim(t, cfg)}
	r.trace = make([][]core.TraceEvent, len(r.s.Engines))
	for i, e := range r.s.Engines {
		e.Trace = func(ev core.TraceEvent) { r.trace[i] = append(r.trace[i], ev) }
	}
	for at := step; ; at += step {
		at = min(at, until)
		r.s.AdvanceTo(at)
		r.publishes = append(r.publishes, r.s.TakePublishes()...)
		r.edges = append(r.edges, r.s.TakeEdges()...)
		r.batches = append(r.batches, r.s.TakeBatches()...)
		if at == until {
			break
		}
	}
	r.truth = r.s.GroundTruth()
	return r
}

// asyncConfig is two servers of two vLLM engines in the async loop: a publish every 10 s, loads
// of 2 s, one engine 3 s late; GRPO batches one after another.
func asyncConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	cfg.Workload.Async = true
	cfg.Workload.StepTime = 10 * time.Second
	cfg.Workload.Lag = 3 * time.Second
	cfg.Workload.LoadTime = 2 * time.Second
	cfg.Workload.Pause = 0
	return cfg
}

// syncedColocatedConfig is the colocated loop with a wake-up and a load that take time.
func syncedColocatedConfig() fleetconfig.Config {
	cfg := colocatedConfig()
	cfg.Workload.WakeTime = time.Second
	cfg.Workload.LoadTime = 2 * time.Second
	cfg.Workload.TrainTime = 3 * time.Second
	cfg.Workload.Batches = 3
	return cfg
}

// syncRun is what a Sim that syncs weights did, advanced in steps to a time: its raw trace per
// engine (index in Sim.engines), the publishes and edges as a Fleet delivers them, and the
// ground truth at the end.
type syncRun struct {
	s         *fleetmodel.Sim
	trace     [][]core.TraceEvent
	publishes []core.Publish
	edges     []fleetmodel.LoopEdge
	batches   []fleetmodel.BatchDone
	truth     core.GroundTruth
}
