// Copies of test helpers whose originals are in the tests of the simulator's other packages:
// a test file cannot be imported.

package sim

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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

// post sends body to url and returns the answer's status and body.
func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// goldenConfig renders pages with the fixtures' model name and KV cache size so that label
// values can be compared too.
func goldenConfig(version string) fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.Version = version
	cfg.DP = 2
	if version == "0.8" {
		cfg.DP = 1
	}
	cfg.BlocksPerEngine = 46080
	cfg.Model = "Qwen/Qwen3-1.7B"
	return cfg
}

func sglangConfig(servers, dp int) fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.Engine = fleetconfig.EngineSGLang
	cfg.Servers, cfg.DP = servers, dp
	cfg.Model = "Qwen/Qwen3-1.7B"
	cfg.BlocksPerEngine = 640 // small enough to retract
	return cfg
}

var testStart = time.Unix(1795998522, 408573600)

func mustSim(t testing.TB, cfg fleetconfig.Config) *fleetmodel.Sim {
	t.Helper()
	s, err := NewSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func parsePage(t testing.TB, page []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("page does not parse: %v", err)
	}
	return fams
}

// pageTotals sums a parsed page's counters and histograms over engines, keyed like Totals.
func pageTotals(fams map[string]*dto.MetricFamily, m map[string]float64) {
	for name, f := range fams {
		short, ok := strings.CutPrefix(name, "vllm:")
		if !ok || strings.HasSuffix(short, "_created") {
			continue
		}
		// Old names count under the new ones, unless the page has both (0.10), where the
		// TestPageCountersEqualSimulatorCounts checks that they are equal.
		if renamed, ok := map[string]string{
			"gpu_prefix_cache_queries_total": "vllm:prefix_cache_queries_total",
			"gpu_prefix_cache_hits_total":    "vllm:prefix_cache_hits_total",
			"time_per_output_token_seconds":  "vllm:inter_token_latency_seconds",
		}[short]; ok {
			if fams[renamed] != nil {
				continue
			}
			short = strings.TrimPrefix(renamed, "vllm:")
		}
		if f.GetType() == dto.MetricType_COUNTER {
			short = strings.TrimSuffix(short, "_total")
		}
		for _, mt := range f.Metric {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				key := short
				for _, l := range mt.Label {
					if l.GetName() == "finished_reason" || l.GetName() == "source" {
						key += "/" + l.GetValue()
					}
				}
				m[key] += mt.Counter.GetValue()
			case dto.MetricType_HISTOGRAM:
				m[short+"_count"] += float64(mt.Histogram.GetSampleCount())
				m[short+"_sum"] += mt.Histogram.GetSampleSum()
			}
		}
	}
}

func compareTotals(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	for k, g := range got {
		w, ok := want[k]
		if !ok {
			if g != 0 {
				t.Errorf("%s: page has %s = %v, simulator has no such count", what, k, g)
			}
			continue
		}
		if math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
			t.Errorf("%s: %s on the pages %v, simulator %v", what, k, g, w)
		}
	}
	for _, k := range []string{"prefix_cache_queries", "prefix_cache_hits", "num_preemptions", "prompt_tokens",
		"generation_tokens", "request_success/stop", "request_success/length", "time_to_first_token_seconds_count"} {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: pages lack %s", what, k)
		}
	}
}

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

// simTotalsFromPages sums every server's page as pageTotals does.
func simTotalsFromPages(t testing.TB, s *fleetmodel.Sim) map[string]float64 {
	m := map[string]float64{}
	for i := range s.Servers {
		pageTotals(parsePage(t, s.Page(i, testStart)), m)
	}
	return m
}
