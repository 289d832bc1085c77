package vllmpage

import (
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// TestSleepResourceChildrenAtFirstSleep follows the pages of fleets in both loops from their
// start: the legacy engine_sleep_state shows awake = 1 from the first page, while
// engine_sleep_resource_state and engine_fully_awake have no child for an engine until its first
// sleep-state snapshot (vLLM creates those children when the first snapshot arrives,
// docs/design/engine_sleep_state.md), which the engine sends at its first sleep, or at the pause
// of its scheduler for a weight load before it (start_weight_update, which creates the engine's
// rl_weight_update_active child; the legacy gauge's awake is 0 during the pause), and keep them
// from then on, awake again or not.
func TestSleepResourceChildrenAtFirstSleep(t *testing.T) {
	for name, cfg := range map[string]fleetconfig.Config{"colocated": simtest.ColocatedConfig(), "async": simtest.AsyncConfig()} {
		t.Run(name, func(t *testing.T) {
			s := mustSim(t, cfg)
			snapped := map[[2]int]bool{}
			sawAwakeAgain, sawBefore := false, false
			// Until every engine had its snapshot and one page showed an engine awake after it.
			for at := 25 * time.Millisecond; at <= 20*time.Second && (len(snapped) < cfg.Servers*cfg.DP || !sawAwakeAgain); at += 100 * time.Millisecond {
				s.AdvanceTo(at)
				for server := range cfg.Servers {
					fams := simtest.ParsePage(t, s.Page(server, simtest.Start))
					resource, fully, awake, loads := map[string]int{}, map[string]int{}, map[string]float64{}, map[string]bool{}
					for _, m := range fams["vllm:rl_weight_update_active"].GetMetric() {
						loads[labelOf(m, "engine")] = true
					}
					for _, m := range fams["vllm:engine_sleep_resource_state"].GetMetric() {
						resource[labelOf(m, "engine")]++
					}
					for _, m := range fams["vllm:engine_fully_awake"].GetMetric() {
						fully[labelOf(m, "engine")]++
					}
					for _, m := range fams["vllm:engine_sleep_state"].GetMetric() {
						if labelOf(m, "sleep_state") == "awake" {
							awake[labelOf(m, "engine")] = m.Gauge.GetValue()
						}
					}
					for eng := range cfg.DP {
						id := string(rune('0' + eng))
						a, ok := awake[id]
						if !ok {
							t.Fatalf("at %s: server %d engine %s has no engine_sleep_state", at, server, id)
						}
						key := [2]int{server, eng}
						if a != 1 || loads[id] {
							snapped[key] = true
						}
						if a == 1 && snapped[key] {
							sawAwakeAgain = true
						}
						wantR, wantF := 0, 0
						if snapped[key] {
							wantR, wantF = 9, 1
						} else {
							sawBefore = true
						}
						if resource[id] != wantR || fully[id] != wantF {
							t.Fatalf("at %s: server %d engine %s (awake %v, slept or paused for a load before: %v) has %d resource and %d fully-awake children, want %d and %d",
								at, server, id, a, snapped[key], resource[id], fully[id], wantR, wantF)
						}
					}
				}
			}
			if len(snapped) != cfg.Servers*cfg.DP || !sawAwakeAgain || !sawBefore {
				t.Errorf("in 20 s, %d engines slept or paused, awake again after it: %v; a page before it: %v", len(snapped), sawAwakeAgain, sawBefore)
			}
		})
	}
}
