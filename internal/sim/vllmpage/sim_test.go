package vllmpage

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
)

var testStart = time.Unix(1795998522, 408573600)

func mustSim(t testing.TB, cfg fleetconfig.Config) *fleetmodel.Sim {
	t.Helper()
	s, err := newSim(cfg)
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

func simTotalsFromPages(t testing.TB, s *fleetmodel.Sim) map[string]float64 {
	m := map[string]float64{}
	for i := range s.Servers {
		pageTotals(parsePage(t, s.Page(i, testStart)), m)
	}
	return m
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

// TestPageCountersEqualSimulatorCounts reads every counter and histogram back from the rendered
// pages of each version and compares them with the simulator's own counts, at several moments
// of a run (busy and idle).
func TestPageCountersEqualSimulatorCounts(t *testing.T) {
	for _, version := range []string{"0.20", "0.10", "0.8"} {
		t.Run(version, func(t *testing.T) {
			cfg := fleetconfig.DefaultConfig()
			cfg.Version = version
			cfg.DP = 2
			if version == "0.8" {
				cfg.DP = 1
			}
			s := mustSim(t, cfg)
			for _, at := range []time.Duration{500 * time.Millisecond, 3 * time.Second, 7777 * time.Millisecond, 25 * time.Second} {
				s.AdvanceTo(at)
				compareTotals(t, fmt.Sprint("at ", at), simTotalsFromPages(t, s), s.Totals())
			}
			tot := s.Totals()
			if tot["num_preemptions"] == 0 || tot["prefix_cache_hits"] == 0 || tot["request_success/length"] == 0 {
				t.Errorf("some counters never moved: %v", tot)
			}
			if version == "0.10" {
				fams := parsePage(t, s.Page(0, testStart))
				for _, pair := range [][2]string{
					{"vllm:gpu_prefix_cache_queries_total", "vllm:prefix_cache_queries_total"},
					{"vllm:gpu_prefix_cache_hits_total", "vllm:prefix_cache_hits_total"},
					{"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"},
					{"vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"},
				} {
					a, b := fams[pair[0]].String(), strings.ReplaceAll(fams[pair[1]].String(), pair[1], pair[0])
					a = strings.ReplaceAll(a, "DEPRECATED", "")
					if strings.Count(a, "value:") != strings.Count(b, "value:") || valuesOf(fams[pair[0]]) != valuesOf(fams[pair[1]]) {
						t.Errorf("%s and %s differ", pair[0], pair[1])
					}
				}
			}
		})
	}
}

func valuesOf(f *dto.MetricFamily) string {
	var b strings.Builder
	for _, m := range f.Metric {
		switch {
		case m.Counter != nil:
			fmt.Fprint(&b, m.Counter.GetValue(), " ")
		case m.Gauge != nil:
			fmt.Fprint(&b, m.Gauge.GetValue(), " ")
		case m.Histogram != nil:
			fmt.Fprint(&b, m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum(), m.Histogram.Bucket, " ")
		}
	}
	return b.String()
}
