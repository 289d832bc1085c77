package fleetmodel

import (
	"slices"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// eventLog runs cfg to until, advancing in steps of step, and returns every event.
func eventLog(t *testing.T, cfg fleetconfig.Config, until, step time.Duration) []core.Event {
	s := mustSim(t, cfg)
	var log []core.Event
	s.OnEvent(func(e core.Event) { log = append(log, e) })
	for at := step; at <= until; at += step {
		s.AdvanceTo(at)
	}
	return log
}

func TestSameSeedSameEvents(t *testing.T) {
	for _, kind := range []string{workload.WorkloadGRPO, workload.WorkloadPoisson} {
		t.Run(kind, func(t *testing.T) {
			cfg := fleetconfig.DefaultConfig()
			cfg.DP = 2
			cfg.Workload.Kind = kind
			cfg.Faults = []fleetconfig.Fault{{Kind: fleetconfig.FaultRestart, At: 9 * time.Second, Server: 1}}
			a := eventLog(t, cfg, 20*time.Second, 20*time.Second)
			if len(a) < 1000 {
				t.Fatalf("only %d events", len(a))
			}
			if again := eventLog(t, cfg, 20*time.Second, 20*time.Second); !slices.Equal(a, again) {
				t.Fatal("same seed, different events")
			}
			// Advancing in small steps (as the wall clock does) changes no engine's events, only
			// how the engines' sequences interleave, so compare engine by engine.
			b := eventLog(t, cfg, 20*time.Second, 7*time.Millisecond)
			byEngine := func(l []core.Event) []core.Event {
				return slices.SortedStableFunc(slices.Values(l), func(x, y core.Event) int {
					return (x.Server*1000 + x.Engine) - (y.Server*1000 + y.Engine)
				})
			}
			// The small steps stop at the last multiple of 7ms before 20s; compare up to there.
			cut := func(l []core.Event, t time.Duration) []core.Event {
				return slices.DeleteFunc(slices.Clone(l), func(e core.Event) bool { return e.At > t })
			}
			end := 20 * time.Second / (7 * time.Millisecond) * (7 * time.Millisecond)
			if !slices.Equal(byEngine(cut(a, end-time.Second)), byEngine(cut(b, end-time.Second))) {
				t.Fatal("same seed advanced in small steps, different events")
			}
			cfg.Seed++
			c := eventLog(t, cfg, 20*time.Second, 20*time.Second)
			if slices.Equal(a, c) {
				t.Fatal("different seeds, same events")
			}
		})
	}
}
