package sim

import (
	"context"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

func mustSim(t testing.TB, cfg fleetconfig.Config) *fleetmodel.Sim {
	t.Helper()
	return simtest.Build(t, NewSim, cfg)
}

func startFleet(t *testing.T, cfg fleetconfig.Config) *Fleet {
	t.Helper()
	return simtest.Started(t, func() (*Fleet, error) { return Start(context.Background(), cfg) })
}

// simEdges advances the Sim of cfg in steps of step and returns its loop's edges: up to until,
// or, when done is set, up to the edge after which done says the loop is over, failing t if it
// is not over by until.
func simEdges(t *testing.T, cfg fleetconfig.Config, until, step time.Duration, done func([]fleetmodel.LoopEdge) bool) []fleetmodel.LoopEdge {
	t.Helper()
	s := mustSim(t, cfg)
	var edges []fleetmodel.LoopEdge
	for at := step; at <= until; at += step {
		s.AdvanceTo(at)
		edges = append(edges, s.TakeEdges()...)
		if done != nil && len(edges) > 0 && done(edges) {
			return edges
		}
	}
	if done != nil {
		t.Fatalf("the loop did not finish in %v: edges %v", until, edges)
	}
	return edges
}
