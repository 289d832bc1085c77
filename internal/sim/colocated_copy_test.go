package sim

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
)

func runLoop(t *testing.T, cfg fleetconfig.Config, step time.Duration) loopRun {
	t.Helper()
	s := mustSim(t, cfg)
	var r loopRun
	s.OnEvent(func(e core.Event) { r.events = append(r.events, e) })
	for at := step; at <= 10*time.Minute; at += step {
		s.AdvanceTo(at)
		r.edges = append(r.edges, s.TakeEdges()...)
		r.batches = append(r.batches, s.TakeBatches()...)
		if n := len(r.edges); n > 0 && r.edges[n-1].Kind == fleetmodel.Wake && r.edges[n-1].Step == cfg.Workload.Batches {
			return r
		}
	}
	t.Fatalf("the loop did not finish %d steps in 10 minutes: edges %v", cfg.Workload.Batches, r.edges)
	return r
}

// gaugesOf reads the gauges of the engine labelled engine from a parsed page.
func gaugesOf(t *testing.T, fams map[string]*dto.MetricFamily, engine string) engineGauges {
	t.Helper()
	var g engineGauges
	value := func(name, state string) (float64, bool) {
		f := fams[name]
		if f == nil {
			return 0, false
		}
		for _, m := range f.Metric {
			var eng, st string
			for _, l := range m.Label {
				switch l.GetName() {
				case "engine":
					eng = l.GetValue()
				case "sleep_state":
					st = l.GetValue()
				}
			}
			if eng == engine && st == state {
				return m.Gauge.GetValue(), true
			}
		}
		t.Fatalf("%s has no child for engine %s %s", name, engine, state)
		return 0, false
	}
	g.awake, g.hasSleep = value("vllm:engine_sleep_state", "awake")
	if g.hasSleep {
		g.offloaded, _ = value("vllm:engine_sleep_state", "weights_offloaded")
		g.discarded, _ = value("vllm:engine_sleep_state", "discard_all")
	}
	g.running, _ = value("vllm:num_requests_running", "")
	g.waiting, _ = value("vllm:num_requests_waiting", "")
	if _, ok := fams["vllm:kv_cache_usage_perc"]; ok {
		g.kv, _ = value("vllm:kv_cache_usage_perc", "")
	} else {
		g.kv, _ = value("vllm:gpu_cache_usage_perc", "")
	}
	return g
}

// colocatedConfig is the demo's fleet in the colocated loop: 2 servers x 2 engines, an eval
// batch every second step, four steps.
func colocatedConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	cfg.Workload.Colocated = true
	cfg.Workload.EvalEvery = 2
	cfg.Workload.Batches = 4
	return cfg
}

// loopRun is what a colocated Sim did, advanced in steps of step until every step is over.
type loopRun struct {
	edges   []fleetmodel.LoopEdge
	batches []fleetmodel.BatchDone
	events  []core.Event
}

// engineGauges are one engine's children of vllm:engine_sleep_state and its load gauges.
type engineGauges struct {
	awake, offloaded, discarded, running, waiting, kv float64
	hasSleep                                          bool
}
