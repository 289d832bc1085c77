package vllmpage

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/testkit"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

const mpFixture = "prometheus-client-render-vllm-0.20-multiprocess.prom"

// TestMultiprocessFixtureParses reads the page prometheus_client's multiprocess collector
// renders for a vLLM 0.20 server with two API server processes and two engines, of which only
// engine 0 has served requests (the shared fixture, rendered by the script beside it): two
// workers, engine 0 with its scheduler gauges and the counts both processes made, summed;
// engine 1 with its sleep state but no scheduler gauge, which no process has set; no _created
// anywhere.
func TestMultiprocessFixtureParses(t *testing.T) {
	p, err := page.ParsePage(testkit.ReadFixture(t, mpFixture))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Engines) != 2 || p.Engines[0].Engine != "0" || p.Engines[1].Engine != "1" {
		t.Fatalf("workers %+v, want engines 0 and 1", p.Engines)
	}
	for _, ep := range p.Engines {
		if ep.Kind != vllm.VLLM || ep.Labels != "" {
			t.Errorf("engine %s: kind %v labels %q", ep.Engine, ep.Kind, ep.Labels)
		}
		for _, c := range ep.Counters {
			if c.HasCreated {
				t.Errorf("engine %s: counter %s has a _created", ep.Engine, c.Key)
			}
		}
		for _, h := range ep.Hists {
			if h.HasCreated {
				t.Errorf("engine %s: histogram %s has a _created", ep.Engine, h.Key)
			}
		}
		if !ep.HasGauge[vllm.SleepState] || ep.SplitGauges[vllm.SleepState]["awake"] != 1 {
			t.Errorf("engine %s: sleep state %v", ep.Engine, ep.SplitGauges[vllm.SleepState])
		}
	}
	e0, e1 := p.Engines[0], p.Engines[1]
	if e0.Gauges[vllm.Running] != 2 || e0.Gauges[vllm.Waiting] != 1 || e0.Gauges[vllm.KVUsage] != 0.25 ||
		e0.SplitGauges[vllm.WaitingByReason]["capacity"] != 1 || !e0.HasGauge[vllm.WaitingByReason] {
		t.Errorf("engine 0 gauges %v %v", e0.Gauges, e0.SplitGauges)
	}
	for _, g := range []vllm.Gauge{vllm.Running, vllm.Waiting, vllm.KVUsage, vllm.WaitingByReason} {
		if e1.HasGauge[g] {
			t.Errorf("engine 1 has gauge %s, which no process set", vllm.Gauges[g].Name)
		}
	}
	want := map[vllm.Counter]float64{vllm.PromptTokens: 2000, vllm.GenerationTokens: 500, vllm.PrefixQueries: 2000,
		vllm.PrefixHits: 768, vllm.Preemptions: 1}
	for c, v := range want {
		if got := counterValue(e0, c, ""); got != v {
			t.Errorf("engine 0 %s = %v, want %v (both processes' counts)", vllm.Counters[c].Name, got, v)
		}
		if got := counterValue(e1, c, ""); got != 0 {
			t.Errorf("engine 1 %s = %v, want 0", vllm.Counters[c].Name, got)
		}
	}
	if got := counterValue(e0, vllm.RequestSuccess, "stop"); got != 5 {
		t.Errorf("engine 0 stop = %v, want 5", got)
	}
	for _, h := range e0.Hists {
		if h.Family == vllm.PrefillKVComputed && (h.Count != 5 || h.Sum != 2000-768) {
			t.Errorf("engine 0 prefill KV computed: %v observations, sum %v", h.Count, h.Sum)
		}
	}
}

func counterValue(ep page.EnginePage, c vllm.Counter, reason string) float64 {
	var v float64
	for _, s := range ep.Counters {
		if s.Family == c && s.Reason == reason {
			v += s.Value
		}
	}
	return v
}

// mpSeries is a page's series (name and labels, values aside) by family, and its families in
// order.
func mpSeries(t *testing.T, body string) (map[string][]string, []string) {
	t.Helper()
	series := map[string][]string{}
	var order []string
	for _, f := range simtest.ParseStructure(t, body) {
		order = append(order, f.Name)
		s := slices.Clone(f.Samples)
		slices.Sort(s)
		series[f.Name+" "+f.Type+" "+f.Help] = s
	}
	return series, order
}

// TestMultiprocessPageMatchesFixture renders the simulator's multiprocess page in the fixture's
// situation (two engines, engine 0 has run and finished requests, engine 1 never ran, only
// completions requests counted) and compares it with the fixture: the same families with the
// same TYPE and HELP, and the same series, values aside. The order of families is not
// compared: prometheus_client lists them in the order of the processes' files in the
// directory (the fixture's script reads them sorted; its stand-in for "mostrecent" creates gauge
// children when it sets them) and, before 0.20, a histogram's _sum samples first.
func TestMultiprocessPageMatchesFixture(t *testing.T) {
	cfg := simtest.GoldenConfig("0.20")
	cfg.APIServerCount = 2
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := mustSim(t, cfg)
	st := snap.PageState{Engines: make([]snap.EngineStats, 2)}
	st.Engines[0].Recorded = true
	st.Engines[0].Success[snap.ReasonStop] = 5
	body := string(s.Pages.Render(nil, &st))
	got, _ := mpSeries(t, body)
	want, _ := mpSeries(t, string(testkit.ReadFixture(t, mpFixture)))
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("page lacks family %q", k)
			continue
		}
		if !slices.Equal(g, w) {
			t.Errorf("%s series:\n got %q\nwant %q", k, g, w)
		}
	}
	for k := range got {
		// The simulator's newest layout also serves vLLM's recomputed token executions, which
		// came after 0.20 and so are on no 0.20 page.
		if _, ok := want[k]; !ok && !strings.HasPrefix(k, "vllm:recomputed_token_executions_total ") {
			t.Errorf("page has family %q, the fixture does not", k)
		}
	}
	if strings.Contains(body, "_created") || strings.Contains(body, "process_") || strings.Contains(body, "python_") {
		t.Error("a multiprocess page has _created samples or the default collectors' families")
	}
}

// TestMultiprocessPageFollowsTheSimulation runs a fleet of two servers in multiprocess mode and
// checks its pages at several moments: the scheduler gauges of an engine are missing until its
// first iteration and then show its state; the sleep state and the cache config are there from
// the start; every counter and histogram equals the simulator's own counts; nothing has a
// _created; and the families come in the order vLLM creates them, counters, then gauges, then
// histograms.
func TestMultiprocessPageFollowsTheSimulation(t *testing.T) {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	cfg.APIServerCount = 3
	s := mustSim(t, cfg)
	first := s.Page(0, simtest.Start)
	fams := simtest.ParsePage(t, first)
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting_by_reason"} {
		if !strings.Contains(string(first), "# TYPE "+name+" gauge\n") || fams[name] != nil {
			t.Errorf("page before any iteration: %s has children or no HELP and TYPE, want the family without children", name)
		}
	}
	if f := fams["vllm:engine_sleep_state"]; f == nil || len(f.Metric) != 6 {
		t.Errorf("page before any iteration: engine_sleep_state %v", f)
	}
	if f := fams["vllm:cache_config_info"]; f == nil || len(f.Metric) != 2 {
		t.Errorf("page before any iteration: cache_config_info %v", f)
	}
	_, order := mpSeries(t, string(first))
	kinds := ""
	for _, name := range order {
		k := map[bool]string{true: "c", false: "g"}[strings.HasSuffix(name, "_total")]
		if f := fams[name]; f != nil && f.GetType().String() == "HISTOGRAM" {
			k = "h"
		}
		if !strings.HasSuffix(kinds, k) {
			kinds += k
		}
	}
	if kinds != "cgh" {
		t.Errorf("families by kind %q, want counters, gauges, histograms: %q", kinds, order)
	}
	if i, j := slices.Index(order, "vllm:request_prompt_tokens"), slices.Index(order, "vllm:time_to_first_token_seconds"); i < 0 || j < i {
		t.Errorf("histograms not in the order vLLM creates them: %q", order)
	}

	for _, at := range []time.Duration{300 * time.Millisecond, 4 * time.Second, 12 * time.Second} {
		s.AdvanceTo(at)
		simtest.CompareTotals(t, fmt.Sprint("at ", at), simtest.TotalsFromPages(t, len(s.Servers), s.Page), s.Totals())
		for i, srv := range s.Servers {
			body := s.Page(i, simtest.Start)
			if strings.Contains(string(body), "_created") {
				t.Fatalf("at %s: page %d has _created samples", at, i)
			}
			fams := simtest.ParsePage(t, body)
			for j, e := range srv.Engines {
				id := fmt.Sprint(j)
				var running, waiting float64
				n := 0
				for _, m := range fams["vllm:num_requests_running"].GetMetric() {
					if labelOf(m, "engine") == id {
						running, n = m.Gauge.GetValue(), n+1
					}
				}
				for _, m := range fams["vllm:num_requests_waiting"].GetMetric() {
					if labelOf(m, "engine") == id {
						waiting = m.Gauge.GetValue()
					}
				}
				if e.Stats.Recorded != (n == 1) {
					t.Errorf("at %s: server %d engine %d ran %v, has %d running gauges", at, i, j, e.Stats.Recorded, n)
				}
				if n == 1 && (running != float64(len(e.Running)) || waiting != float64(e.Waiting.Len())) {
					t.Errorf("at %s: server %d engine %d: page running %v waiting %v, engine %d %d", at, i, j, running, waiting, len(e.Running), e.Waiting.Len())
				}
			}
		}
	}
}

// TestMultiprocessSpecDecodeFirst: vLLM builds SpecDecodingProm before its logger's own
// families, so on a multiprocess page, listed as their children were first written, the
// speculative decoding counters come first, in their own order.
func TestMultiprocessSpecDecodeFirst(t *testing.T) {
	cfg := fleetconfig.DefaultConfig()
	cfg.APIServerCount = 2
	cfg.SpecDecode = 2
	_, order := mpSeries(t, string(mustSim(t, cfg).Page(0, simtest.Start)))
	want := []string{"vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
		"vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens_per_pos_total", "vllm:prefix_cache_queries_total"}
	if len(order) < len(want) || !slices.Equal(order[:len(want)], want) {
		t.Errorf("families begin %q, want %q", order[:min(len(order), len(want))], want)
	}
}
