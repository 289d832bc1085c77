package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// enginePage returns the internal/page view of engine eng on body.
func enginePage(t *testing.T, body []byte, eng string) *page.EnginePage {
	t.Helper()
	return simtest.EnginePage(t, body, fmt.Sprintf("engine %q", eng), func(ep *page.EnginePage) bool { return ep.Engine == eng })
}

// TestVLLMSyncFamiliesThroughTheLoop follows a 0.20 page through the colocated loop with a
// wake-up and a load that take time, parsing it with internal/page and internal/expo: the
// sleep resource and RL families have no children until the initial sync pauses the engines
// and loads version 0 (rl_weight_update_active 1); then each state of the loop shows as vLLM
// shows it, the legacy sleep state following the fully-awake predicate, and each load's end
// counts one update of its duration.
func TestVLLMSyncFamiliesThroughTheLoop(t *testing.T) {
	cfg := simtest.SyncedColocatedConfig()
	cfg.Workload.EvalEvery = 0
	w := cfg.Workload
	edges := simEdges(t, cfg, time.Minute, 100*time.Millisecond, nil)
	var sleep time.Duration
	for _, e := range edges {
		if e.Kind == fleetmodel.Sleep && e.Step == 2 {
			sleep = e.At
		}
	}
	if sleep == 0 {
		t.Fatalf("no second sleep in %v", edges)
	}
	wake := sleep + w.TrainTime // the wake-up begins
	type want struct {
		snapshot              bool
		paused                bool
		weights, kv           string
		legacy                [3]float64 // awake, weights_offloaded, discard_all
		active, updates, busy float64    // busy: running > 0 (-1: either)
	}
	awake := want{snapshot: true, weights: "resident", kv: "resident", legacy: [3]float64{1, 0, 0}, busy: -1}
	steps := []struct {
		name string
		at   time.Duration
		want want
	}{
		{"before the initial sync", w.StartDelay / 2, want{legacy: [3]float64{1, 0, 0}}},
		{"initial load", w.StartDelay + w.LoadTime/2, want{snapshot: true, paused: true, weights: "resident", kv: "resident", active: 1}},
		{"after the initial load", w.StartDelay + w.LoadTime + 100*time.Millisecond, func() want { a := awake; a.updates = 1; return a }()},
		{"asleep", sleep + time.Second, want{snapshot: true, paused: true, weights: "offloaded", kv: "released", legacy: [3]float64{0, 1, 0}, updates: 2}},
		{"weights waking", wake + w.WakeTime/2, want{snapshot: true, paused: true, weights: "offloaded", kv: "released", legacy: [3]float64{0, 1, 0}, updates: 2}},
		{"loading", wake + w.WakeTime + w.LoadTime/2, want{snapshot: true, paused: true, weights: "resident", kv: "released", active: 1, updates: 2}},
		{"KV cache waking", wake + w.WakeTime + w.LoadTime + w.WakeTime/2, want{snapshot: true, paused: true, weights: "resident", kv: "released", updates: 3}},
		{"awake", wake + 2*w.WakeTime + w.LoadTime + time.Millisecond, func() want { a := awake; a.updates = 3; return a }()},
		{"rollout", wake + 2*w.WakeTime + w.LoadTime + w.Pause + workload.Handoff + time.Second, func() want { a := awake; a.updates = 3; a.busy = 1; return a }()},
	}
	load := w.LoadTime.Seconds()
	// The counter's child appears at the end of the initial load.
	firstLoad := float64(simtest.Start.UnixMicro())/1e6 + (w.StartDelay+w.LoadTime).Seconds()/cfg.Speed
	s := mustSim(t, cfg)
	for _, st := range steps {
		s.AdvanceTo(st.at)
		body := s.Page(1, simtest.Start)
		m := simtest.SamplesOf(t, body, "engine", "resource", "state", "sleep_state")
		for _, eng := range []string{"0", "1"} {
			w := st.want
			if got := m["vllm:engine_sleep_resource_state{"+eng+",weights,"+w.weights+"}"]; w.snapshot && got != 1 {
				t.Errorf("%s: engine %s weights %s = %v", st.name, eng, w.weights, got)
			}
			if got := m["vllm:engine_sleep_resource_state{"+eng+",kv_cache,"+w.kv+"}"]; w.snapshot && got != 1 {
				t.Errorf("%s: engine %s kv_cache %s = %v", st.name, eng, w.kv, got)
			}
			sched := map[bool]string{true: "paused", false: "running"}[w.paused]
			if got := m["vllm:engine_sleep_resource_state{"+eng+",scheduler,"+sched+"}"]; w.snapshot && got != 1 {
				t.Errorf("%s: engine %s scheduler %s = %v", st.name, eng, sched, got)
			}
			n := 0
			for k, v := range m {
				if strings.HasPrefix(k, "vllm:engine_sleep_resource_state{"+eng+",") {
					n++
					if v != 0 && v != 1 {
						t.Errorf("%s: %s = %v", st.name, k, v)
					}
				}
			}
			if wantN := map[bool]int{true: 9, false: 0}[w.snapshot]; n != wantN {
				t.Errorf("%s: engine %s has %d resource children, want %d", st.name, eng, n, wantN)
			}
			fully, ok := m["vllm:engine_fully_awake{"+eng+"}"]
			if ok != w.snapshot || ok && fully != w.legacy[0] {
				t.Errorf("%s: engine %s fully awake %v (%v)", st.name, eng, fully, ok)
			}
			ep := enginePage(t, body, eng)
			legacy := ep.SplitGauges[vllm.SleepState]
			if got := [3]float64{legacy["awake"], legacy["weights_offloaded"], legacy["discard_all"]}; got != w.legacy {
				t.Errorf("%s: engine %s engine_sleep_state %v, want %v", st.name, eng, got, w.legacy)
			}
			if active, ok := m["vllm:rl_weight_update_active{"+eng+"}"]; ok != w.snapshot || active != w.active {
				t.Errorf("%s: engine %s rl_weight_update_active %v (%v), want %v", st.name, eng, active, ok, w.active)
			}
			updates, ok := m["vllm:rl_weight_update_total{"+eng+"}"]
			if updates != w.updates || ok != (w.updates > 0) || m["vllm:rl_weight_gen{"+eng+"}"] != w.updates ||
				m["vllm:rl_weight_update_duration_seconds_count{"+eng+"}"] != w.updates ||
				m["vllm:rl_weight_update_duration_seconds_sum{"+eng+"}"] != w.updates*load {
				t.Errorf("%s: engine %s RL counts %v", st.name, eng, m)
			}
			if created := m["vllm:rl_weight_update_created{"+eng+"}"]; ok && created != firstLoad {
				t.Errorf("%s: engine %s counter created at %v, want %v", st.name, eng, created, firstLoad)
			}
			if busy := ep.Gauges[vllm.Running] > 0; w.busy >= 0 && busy != (w.busy > 0) {
				t.Errorf("%s: engine %s running %v", st.name, eng, ep.Gauges[vllm.Running])
			}
		}
	}
}

// TestSleepFamilyChildOrder: prometheus_client lists an engine's children in the order they
// appeared, so an engine whose first snapshot or load came later is listed later, whatever its
// index.
func TestSleepFamilyChildOrder(t *testing.T) {
	cfg := simtest.GoldenConfig("0.20")
	cfg.Workload.Async = true
	cfg.Workload.StepTime, cfg.Workload.LoadTime = 10*time.Second, time.Second
	s := mustSim(t, cfg)
	st := snap.PageState{Engines: make([]snap.EngineStats, 2), CreatedAt: 1795998522.4085736, Uptime: 1, Epoch: 1795998522, Speed: 1}
	st.Engines[0].Snapshot, st.Engines[0].SnapshotAt = true, 5*time.Second
	st.Engines[1].Snapshot, st.Engines[1].SnapshotAt = true, 3*time.Second
	st.Engines[1].Rl = snap.RlStats{Started: true, StartedAt: 3 * time.Second, Finished: true, FinishedAt: 4 * time.Second, Updates: 1}
	body := string(s.Pages.Render(nil, &st))
	order := func(name string) []string {
		var engines []string
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, name+"{") {
				e := line[strings.Index(line, `engine="`)+len(`engine="`):]
				e = e[:strings.IndexByte(e, '"')]
				if len(engines) == 0 || engines[len(engines)-1] != e {
					engines = append(engines, e)
				}
			}
		}
		return engines
	}
	if got := order("vllm:engine_sleep_resource_state"); !slices.Equal(got, []string{"1", "0"}) {
		t.Errorf("resource children by engine %v, want 1 then 0", got)
	}
	if got := order("vllm:engine_fully_awake"); !slices.Equal(got, []string{"1", "0"}) {
		t.Errorf("fully awake children by engine %v, want 1 then 0", got)
	}
	if got := order("vllm:rl_weight_update_total"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("update counter children %v, want engine 1's only", got)
	}
	if !strings.Contains(body, `vllm:rl_weight_update_created{engine="1"} 1.795998526e+09`+"\n") {
		t.Errorf("no _created child at the first load's end:\n%s", body[strings.Index(body, "# HELP vllm:rl_"):])
	}
}

// getJSON gets u and decodes its JSON answer into v, returning the status.
func getJSON(t *testing.T, u string, v any) int {
	t.Helper()
	resp, err := noKeepAlive.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: content type %q", u, ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	return resp.StatusCode
}

// versionAt is the version a server of g's engines answers: the lowest of its engines' latest
// versions, none if any has none.
func versionAt(g core.GroundTruth, server int) int {
	v := 0
	first := true
	for _, e := range g.Engines {
		if e.Server != server {
			continue
		}
		ev := snap.NoVersion
		if n := len(e.Versions); n > 0 {
			ev = e.Versions[n-1].Version
		}
		if ev == snap.NoVersion {
			return snap.NoVersion
		}
		if first || ev < v {
			v, first = ev, false
		}
	}
	return v
}

// TestVersionEndpointsOverHTTP drives an async vLLM fleet with a fake clock and asks each
// server's /weight_info at every tick: null before the initial load, then the lowest version
// of its engines, which differ while one of them has synced a publish and the other not yet.
// The fleet delivers its publishes and its ground truth, also after Close; the page counts the
// endpoint's requests. An SGLang fleet answers /model_info, "default" before its first load,
// and 404 on the deprecated endpoints; a fleet that syncs no weights has no /weight_info.
func TestVersionEndpointsOverHTTP(t *testing.T) {
	clk := clock.NewFake(simtest.Start)
	cfg := simtest.AsyncConfig()
	cfg.Port = 0
	cfg.Clock = clk
	cfg.Speed = 10
	cfg.Tick = 50 * time.Millisecond
	f := startFleet(t, cfg)
	base := func(u string) string { return strings.TrimSuffix(u, "/metrics") }
	seen := map[string]bool{}
	asked := 0
	var g core.GroundTruth
	for range 70 { // 35 s simulated
		waitTimers(t, clk, 1)
		g = f.GroundTruth()
		for i, u := range f.URLs() {
			var body struct {
				WeightVersion *string `json:"weight_version"`
			}
			if code := getJSON(t, base(u)+"/weight_info", &body); code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			if i == 0 {
				asked++
			}
			want := versionAt(g, i)
			switch {
			case want == snap.NoVersion && body.WeightVersion != nil:
				t.Errorf("at %s server %d answers %q, want null", g.At, i, *body.WeightVersion)
			case want != snap.NoVersion && (body.WeightVersion == nil || *body.WeightVersion != strconv.Itoa(want)):
				t.Errorf("at %s server %d answers %v, want %d", g.At, i, body.WeightVersion, want)
			}
			switch {
			case body.WeightVersion == nil:
				seen["null"] = true
			default:
				seen[*body.WeightVersion] = true
			}
			var vs []int
			for _, e := range g.Engines {
				if e.Server == i && len(e.Versions) > 0 {
					vs = append(vs, e.Versions[len(e.Versions)-1].Version)
				}
			}
			if len(vs) == 2 && vs[0] != vs[1] {
				seen["apart"] = true
			}
		}
		clk.Advance(cfg.Tick)
	}
	for _, k := range []string{"null", "0", "1", "2", "apart"} {
		if !seen[k] {
			t.Errorf("never saw %s; saw %v", k, seen)
		}
	}
	var got []core.Publish
	for len(f.Publishes()) > 0 {
		got = append(got, <-f.Publishes())
	}
	if !slices.Equal(got, g.Publishes) || len(got) < 3 {
		t.Errorf("delivered publishes %v, ground truth %v", got, g.Publishes)
	}
	if page := simtest.MustGet(t, f.URLs()[0]); !strings.Contains(page, `http_requests_total{handler="/weight_info",method="GET",status="2xx"} `+strconv.Itoa(asked)+".0\n") {
		t.Errorf("the page does not count %d /weight_info requests", asked)
	}
	if srv, eng, ok := f.Laggard(); !ok || srv*cfg.DP+eng != f.sim.Async.Laggard {
		t.Errorf("laggard %d/%d (%v)", srv, eng, ok)
	}
	f.Close()
	if after := f.GroundTruth(); after.At < g.At || len(after.Engines) != 4 {
		t.Errorf("after Close: ground truth at %s, %d engines", after.At, len(after.Engines))
	}

	t.Run("sglang", func(t *testing.T) {
		cfg := simtest.AsyncConfig()
		cfg.Engine = fleetconfig.EngineSGLang
		cfg.Port, cfg.Servers = 0, 1
		cfg.Clock = clock.NewFake(simtest.Start)
		cfg.Speed, cfg.Tick = 10, 50*time.Millisecond
		f := startFleet(t, cfg)
		u := base(f.URLs()[0])
		var info map[string]any
		if code := getJSON(t, u+"/model_info", &info); code != http.StatusOK || info["weight_version"] != "default" || info["model_path"] != cfg.Model {
			t.Errorf("before the first load: %d %v", code, info)
		}
		for f.GroundTruth().At < cfg.Workload.StartDelay+workload.Handoff+cfg.Workload.LoadTime {
			waitTimers(t, cfg.Clock.(*clock.Fake), 1)
			cfg.Clock.(*clock.Fake).Advance(cfg.Tick)
		}
		waitTimers(t, cfg.Clock.(*clock.Fake), 1)
		if code := getJSON(t, u+"/model_info", &info); code != http.StatusOK || info["weight_version"] != "0" {
			t.Errorf("after the first load: %d %v", code, info)
		}
		for _, p := range []string{"/weight_version", "/get_weight_version"} {
			var e map[string]string
			if code := getJSON(t, u+p, &e); code != http.StatusNotFound || !strings.Contains(e["error"], "/model_info") {
				t.Errorf("%s: %d %v", p, code, e)
			}
		}
	})
	t.Run("no sync", func(t *testing.T) {
		cfg := simtest.FastConfig()
		f := startFleet(t, cfg)
		resp, err := noKeepAlive.Get(base(f.URLs()[0]) + "/weight_info")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || f.Publishes() != nil {
			t.Errorf("a fleet that syncs no weights: /weight_info %d, publishes %v", resp.StatusCode, f.Publishes())
		}
	})
}
