package simtest

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vllmstat/vllmstat/internal/expo"
	"github.com/vllmstat/vllmstat/internal/page"
)

// ParsePage parses a page with the Prometheus text parser, failing t if it does not parse.
func ParsePage(t testing.TB, page []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("page does not parse: %v", err)
	}
	return fams
}

// PageTotals sums a parsed page's counters and histograms over engines, keyed like Totals.
func PageTotals(fams map[string]*dto.MetricFamily, m map[string]float64) {
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

// TotalsFromPages sums the pages of servers servers, rendered at Start by page, as PageTotals
// does.
func TotalsFromPages(t testing.TB, servers int, page func(server int, start time.Time) []byte) map[string]float64 {
	m := map[string]float64{}
	for i := range servers {
		PageTotals(ParsePage(t, page(i, Start)), m)
	}
	return m
}

// CompareTotals checks the totals the pages show (got) against the simulator's (want): every
// count on the pages equal to the simulator's, and the main counts present.
func CompareTotals(t testing.TB, what string, got, want map[string]float64) {
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

// PageFamily is one "# HELP"/"# TYPE" block of a page with its sample lines minus the values.
type PageFamily struct {
	Name, Type, Help string
	Samples          []string
}

// ParseStructure splits a page into its families, failing t on a TYPE line without its HELP
// line or a sample before any family.
func ParseStructure(t testing.TB, page string) []PageFamily {
	t.Helper()
	var fams []PageFamily
	for _, line := range strings.Split(strings.TrimSuffix(page, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(line[len("# HELP "):], " ")
			fams = append(fams, PageFamily{Name: name, Help: help})
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, _ := strings.Cut(line[len("# TYPE "):], " ")
			if len(fams) == 0 || fams[len(fams)-1].Name != name {
				t.Fatalf("TYPE line without HELP: %q", line)
			}
			fams[len(fams)-1].Type = typ
		default:
			if len(fams) == 0 {
				t.Fatalf("sample before any HELP: %q", line)
			}
			f := &fams[len(fams)-1]
			f.Samples = append(f.Samples, line[:strings.LastIndexByte(line, ' ')])
		}
	}
	return fams
}

// EngineGauges are one engine's children of vllm:engine_sleep_state and its load gauges.
type EngineGauges struct {
	Awake, Offloaded, Discarded, Running, Waiting, KV float64
	HasSleep                                          bool
}

// GaugesOf reads the gauges of the engine labelled engine from a parsed page.
func GaugesOf(t testing.TB, fams map[string]*dto.MetricFamily, engine string) EngineGauges {
	t.Helper()
	var g EngineGauges
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
	g.Awake, g.HasSleep = value("vllm:engine_sleep_state", "awake")
	if g.HasSleep {
		g.Offloaded, _ = value("vllm:engine_sleep_state", "weights_offloaded")
		g.Discarded, _ = value("vllm:engine_sleep_state", "discard_all")
	}
	g.Running, _ = value("vllm:num_requests_running", "")
	g.Waiting, _ = value("vllm:num_requests_waiting", "")
	if _, ok := fams["vllm:kv_cache_usage_perc"]; ok {
		g.KV, _ = value("vllm:kv_cache_usage_perc", "")
	} else {
		g.KV, _ = value("vllm:gpu_cache_usage_perc", "")
	}
	return g
}

// SyncFamilies are the families of a fleet that syncs weights, read with internal/expo.
var SyncFamilies = []string{
	"vllm:engine_sleep_resource_state", "vllm:engine_fully_awake", "vllm:engine_sleep_state",
	"vllm:rl_weight_update_total", "vllm:rl_weight_update_created", "vllm:rl_weight_gen", "vllm:rl_weight_update_active",
	"vllm:rl_weight_update_duration_seconds_count", "vllm:rl_weight_update_duration_seconds_sum",
	"sglang:num_paused_reqs", "sglang:weight_load_duration_seconds",
}

// SamplesOf reads the samples of SyncFamilies on body with the project's exposition parser,
// keyed by name and the values of the labels in keep, in that order: `name{v1,v2}`.
func SamplesOf(t testing.TB, body []byte, keep ...string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	err := expo.Parse(body, expo.NewNames(SyncFamilies), func(s *expo.Sample) {
		var vals []string
		for _, k := range keep {
			for _, l := range s.Labels {
				if l.Name == k {
					vals = append(vals, l.Value)
				}
			}
		}
		key := s.Name + "{" + strings.Join(vals, ",") + "}"
		if _, dup := m[key]; dup {
			t.Errorf("two samples %s", key)
		}
		m[key] = s.Value
	})
	if err != nil {
		t.Fatalf("page does not parse: %v", err)
	}
	return m
}

// EnginePage returns the internal/page view of the first engine on body that match accepts,
// failing t, which names the engine as what, if there is none.
func EnginePage(t testing.TB, body []byte, what string, match func(*page.EnginePage) bool) *page.EnginePage {
	t.Helper()
	p, err := page.ParsePage(body)
	if err != nil {
		t.Fatalf("page does not parse: %v", err)
	}
	for i := range p.Engines {
		if ep := &p.Engines[i]; match(ep) {
			return ep
		}
	}
	t.Fatalf("no %s on the page", what)
	return nil
}
