// Copies of test helpers whose originals are in the tests of the simulator's other packages:
// a test file cannot be imported.

package fleettest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

func words(n int, word string) string { return strings.TrimSpace(strings.Repeat(word+" ", n)) }

// fastConfig is a small fleet on free ports running 20x faster than the wall clock: a GRPO
// batch takes about half a second.
func fastConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.Port = 0
	cfg.DP = 2
	cfg.Speed = 20
	cfg.Tick = 5 * time.Millisecond
	cfg.Workload.StartDelay = 100 * time.Millisecond
	cfg.Workload.Pause = 200 * time.Millisecond
	return cfg
}

func startFleet(t *testing.T, cfg fleetconfig.Config) *sim.Fleet {
	t.Helper()
	before := runtime.NumGoroutine()
	f, err := sim.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		http.DefaultClient.CloseIdleConnections()
		testkit.Poll(2*time.Second, func() bool { return runtime.NumGoroutine() <= before })
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
	})
	return f
}

func mustGet(t *testing.T, url string) string {
	t.Helper()
	body, resp, err := get(t, http.DefaultClient, url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return body
}

func get(t *testing.T, client *http.Client, url string) (string, *http.Response, error) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp, err
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
