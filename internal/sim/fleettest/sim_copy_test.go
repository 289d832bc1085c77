package fleettest

import (
	"bytes"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

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
