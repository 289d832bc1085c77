package vllmpage

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// TestPageCountersEqualSimulatorCounts reads every counter and histogram back from the rendered
// pages of each version and compares them with the simulator's own counts, at several moments
// of a run (busy and idle).
func TestPageCountersEqualSimulatorCounts(t *testing.T) {
	for _, version := range []string{"0.20", "0.10", "0.8"} {
		t.Run(version, func(t *testing.T) {
			cfg := simtest.VersionConfig(version)
			s := mustSim(t, cfg)
			for _, at := range []time.Duration{500 * time.Millisecond, 3 * time.Second, 7777 * time.Millisecond, 25 * time.Second} {
				s.AdvanceTo(at)
				simtest.CompareTotals(t, fmt.Sprint("at ", at), simtest.TotalsFromPages(t, len(s.Servers), s.Page), s.Totals())
			}
			tot := s.Totals()
			if tot["num_preemptions"] == 0 || tot["prefix_cache_hits"] == 0 || tot["request_success/length"] == 0 {
				t.Errorf("some counters never moved: %v", tot)
			}
			if version == "0.10" {
				fams := simtest.ParsePage(t, s.Page(0, simtest.Start))
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

// mustSim builds the model of cfg with this package's page writer.
func mustSim(t testing.TB, cfg fleetconfig.Config) *fleetmodel.Sim {
	t.Helper()
	s := simtest.Build(t, fleetmodel.New, cfg)
	s.SetPages(NewVLLMPageWriter(cfg))
	return s
}
