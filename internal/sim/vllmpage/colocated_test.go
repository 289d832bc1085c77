package vllmpage

import (
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// TestColocatedPages follows the pages through the loop: the sleep family is on every page of
// 0.20, awake = 1 while the engines are awake and weights_offloaded = 1 while they sleep, when
// nothing runs or waits and the KV cache is empty; the counters keep their values over the
// sleep; and after the wake-up the prefix cache starts empty.
func TestColocatedPages(t *testing.T) {
	cfg := simtest.ColocatedConfig()
	s := mustSim(t, cfg)
	page := func() map[string]*dto.MetricFamily { return simtest.ParsePage(t, s.Page(1, simtest.Start)) }
	check := func(when string, asleep bool) {
		t.Helper()
		fams := page()
		busy := 0.0
		for _, eng := range []string{"0", "1"} {
			g := simtest.GaugesOf(t, fams, eng)
			if !g.HasSleep {
				t.Fatalf("%s: no vllm:engine_sleep_state on the page", when)
			}
			wantAwake, wantOff := 1.0, 0.0
			if asleep {
				wantAwake, wantOff = 0, 1
			}
			if g.Awake != wantAwake || g.Offloaded != wantOff || g.Discarded != 0 {
				t.Errorf("%s: engine %s awake %v weights_offloaded %v discard_all %v", when, eng, g.Awake, g.Offloaded, g.Discarded)
			}
			if asleep && (g.Running != 0 || g.Waiting != 0 || g.KV != 0) {
				t.Errorf("%s: sleeping engine %s has running %v waiting %v kv %v", when, eng, g.Running, g.Waiting, g.KV)
			}
			busy += g.Running + g.Waiting
		}
		if !asleep && strings.HasPrefix(when, "mid") && busy == 0 {
			t.Errorf("%s: nothing running or waiting", when)
		}
	}
	check("before the first batch", false)
	var edges []fleetmodel.LoopEdge
	for at := 100 * time.Millisecond; len(edges) < 10; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		for _, e := range s.TakeEdges() {
			edges = append(edges, e)
			switch e.Kind {
			case fleetmodel.RolloutStart, fleetmodel.EvalStart:
				s.AdvanceTo(e.At + 2*time.Second)
				check("mid "+e.Kind.String(), false)
			case fleetmodel.Sleep:
				before := simtest.TotalsFromPages(t, len(s.Servers), s.Page)
				s.AdvanceTo(e.At + time.Second)
				check("asleep", true)
				for _, e := range s.Engines {
					if e.Pool.NumUsed() != 0 || len(e.Pool.Cached) != 0 {
						t.Errorf("sleeping engine keeps %d blocks, %d cached", e.Pool.NumUsed(), len(e.Pool.Cached))
					}
				}
				simtest.CompareTotals(t, "counters over the sleep", simtest.TotalsFromPages(t, len(s.Servers), s.Page), before)
			case fleetmodel.Wake:
				check("woken", false)
			}
		}
	}

	// Without the loop the page has the sleep family too, awake, as vLLM serves it, but none of
	// the loop's (the sleep resources, the RL families); a release without it (0.10) shows none
	// in the loop either, but the same empty engines while they sleep.
	plain := fleetconfig.DefaultConfig()
	plain.DP = 2
	fams := simtest.ParsePage(t, mustSim(t, plain).Page(0, simtest.Start))
	if g := simtest.GaugesOf(t, fams, "1"); !g.HasSleep || g.Awake != 1 || g.Offloaded != 0 || g.Discarded != 0 {
		t.Errorf("a page outside the colocated loop shows the sleep state %+v", g)
	}
	for name := range fams {
		if strings.Contains(name, "sleep_resource") || strings.Contains(name, "fully_awake") || strings.Contains(name, "rl_weight") {
			t.Errorf("a page outside the colocated loop has %s", name)
		}
	}
	cfg.Version = "0.10"
	s = mustSim(t, cfg)
	for at := 100 * time.Millisecond; ; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		if slices.ContainsFunc(s.TakeEdges(), func(e fleetmodel.LoopEdge) bool { return e.Kind == fleetmodel.Sleep }) {
			break
		}
	}
	fams = page()
	for _, eng := range []string{"0", "1"} {
		if g := simtest.GaugesOf(t, fams, eng); g.HasSleep || g.Running != 0 || g.Waiting != 0 || g.KV != 0 {
			t.Errorf("0.10 page of a sleeping engine %s: %+v", eng, g)
		}
	}
}

// TestColocatedSleepFamilyLayout checks the family's place and lines on an idle 0.20 page: after
// num_requests_waiting and its split by reason, where vLLM registers it, its children state by
// state, as vLLM creates them, and the sleep resource families after it.
func TestColocatedSleepFamilyLayout(t *testing.T) {
	cfg := simtest.GoldenConfig("0.20")
	cfg.Workload.Colocated = true
	page := string(mustSim(t, cfg).Page(0, simtest.Start))
	const m = `model_name="Qwen/Qwen3-1.7B"`
	want := `vllm:num_requests_waiting_by_reason{engine="1",` + m + `,reason="deferred"} 0.0
# HELP vllm:engine_sleep_state Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.
# TYPE vllm:engine_sleep_state gauge
vllm:engine_sleep_state{engine="0",` + m + `,sleep_state="awake"} 1.0
vllm:engine_sleep_state{engine="1",` + m + `,sleep_state="awake"} 1.0
vllm:engine_sleep_state{engine="0",` + m + `,sleep_state="weights_offloaded"} 0.0
vllm:engine_sleep_state{engine="1",` + m + `,sleep_state="weights_offloaded"} 0.0
vllm:engine_sleep_state{engine="0",` + m + `,sleep_state="discard_all"} 0.0
vllm:engine_sleep_state{engine="1",` + m + `,sleep_state="discard_all"} 0.0
# HELP vllm:engine_sleep_resource_state `
	if !strings.Contains(page, want) {
		t.Errorf("page lacks\n%s\n", want)
	}
	// Apart from the loop's families, whose children come with the first sleep and the first
	// load, the page is the one without the loop.
	cfg.Workload.Colocated = false
	plain := string(mustSim(t, cfg).Page(0, simtest.Start))
	i := strings.Index(page, "# HELP vllm:engine_sleep_resource_state")
	j := strings.Index(page, "# HELP vllm:kv_cache_usage_perc")
	k := strings.Index(page, "# HELP vllm:rl_weight_update_total")
	l := strings.Index(page, "# HELP http_requests_total")
	if i < 0 || j < i || k < j || l < k {
		t.Fatalf("the loop's families are not where vLLM lists them:\n%s", page)
	}
	loopFams := page[i:j] + page[k:l]
	if page[:i]+page[j:k]+page[l:] != plain {
		t.Error("the colocated page differs from the plain one outside the loop's families")
	}
	for _, line := range strings.Split(strings.TrimSpace(loopFams), "\n") {
		if !strings.HasPrefix(line, "# ") {
			t.Errorf("an idle page of the loop has a child of the loop's families: %s", line)
		}
	}
}
