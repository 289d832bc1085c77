package sglangpage

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// sglangEnginePage returns the internal/page view of DP rank dp on an SGLang page.
func sglangEnginePage(t *testing.T, body []byte, dp string) *page.EnginePage {
	t.Helper()
	return simtest.EnginePage(t, body, fmt.Sprintf("DP rank %q", dp), func(ep *page.EnginePage) bool {
		return ep.Kind == vllm.SGLang && page.LabelMap(ep.Labels)["dp_rank"] == dp
	})
}

// TestSGLangSyncFamilies follows SGLang pages through the async loop: num_paused_reqs shows the
// requests a sync holds while it holds them (none at the initial sync, before any request), and
// weight_load_duration_seconds{source="distributed"} appears at the end of an engine's first
// load, set to its duration (and the update call's overhead, under a millisecond), with the
// scheduler's labels; each later load sets it to a value of its own, since a gauge set to the
// same value twice does not show the second load.
func TestSGLangSyncFamilies(t *testing.T) {
	cfg := simtest.AsyncConfig()
	cfg.Engine = fleetconfig.EngineSGLang
	cfg.Servers = 1
	w := cfg.Workload
	s := mustSim(t, cfg)
	start := w.StartDelay + workload.Handoff + w.LoadTime
	for _, at := range []time.Duration{w.StartDelay + workload.Handoff/2, w.StartDelay + workload.Handoff + w.LoadTime/2} {
		s.AdvanceTo(at)
		body := s.Page(0, simtest.Start)
		m := simtest.SamplesOf(t, body, "dp_rank", "source")
		if m["sglang:num_paused_reqs{0}"] != 0 || m["sglang:num_paused_reqs{1}"] != 0 || len(m) != 2 {
			t.Errorf("at %s, in the initial sync: %v", at, m)
		}
	}
	s.AdvanceTo(start)
	loadOf := func(dp string) float64 {
		return simtest.SamplesOf(t, s.Page(0, simtest.Start), "dp_rank", "source", "tp_rank", "model_name")["sglang:weight_load_duration_seconds{"+dp+",distributed,0,"+cfg.Model+"}"]
	}
	isLoad := func(d float64) bool { return d >= w.LoadTime.Seconds() && d < (w.LoadTime+time.Millisecond).Seconds() }
	first := map[string]float64{}
	for _, dp := range []string{"0", "1"} {
		if first[dp] = loadOf(dp); !isLoad(first[dp]) {
			t.Errorf("after the initial load: dp_rank %s load duration %v, want %v and under a millisecond more", dp, first[dp], w.LoadTime.Seconds())
		}
	}
	publish := start + w.StepTime
	engines := []int{0, 1}
	slices.SortFunc(engines, func(a, b int) int { return int(s.SyncDelay(a) - s.SyncDelay(b)) })
	for _, i := range engines {
		pause := publish + s.SyncDelay(i)
		s.AdvanceTo(pause + workload.Handoff/2) // the engine holds its requests; iterations take far less than that
		body := s.Page(0, simtest.Start)
		dp := strconv.Itoa(i)
		held := simtest.SamplesOf(t, body, "dp_rank")["sglang:num_paused_reqs{"+dp+"}"]
		ep := sglangEnginePage(t, body, dp)
		if held <= 0 || float64(len(s.Engines[i].Running)+s.Engines[i].Waiting.Len()) != held {
			t.Errorf("dp_rank %s in its sync: %v paused requests, the engine holds %d running and %d waiting",
				dp, held, len(s.Engines[i].Running), s.Engines[i].Waiting.Len())
		}
		if ep.Kind != vllm.SGLang || !(ep.Gauges[vllm.PausedReqs] >= held) {
			t.Errorf("internal/page reads %v paused requests (kind %v)", ep.Gauges[vllm.PausedReqs], ep.Kind)
		}
		// The pause waits for the iteration in flight, which takes far less than 100 ms.
		s.AdvanceTo(pause + workload.Handoff + w.LoadTime + 100*time.Millisecond)
		if held := simtest.SamplesOf(t, s.Page(0, simtest.Start), "dp_rank")["sglang:num_paused_reqs{"+dp+"}"]; held != 0 {
			t.Errorf("dp_rank %s after its sync: %v paused requests", dp, held)
		}
		if d := loadOf(dp); !isLoad(d) || d == first[dp] {
			t.Errorf("dp_rank %s after its second load: load duration %v (the first %v), want %v and under a millisecond more, not the first's",
				dp, d, first[dp], w.LoadTime.Seconds())
		}
	}
}
