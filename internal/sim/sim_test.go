package sim

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var testStart = time.Unix(1795998522, 408573600)

func mustSim(t testing.TB, cfg Config) *Sim {
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

func simTotalsFromPages(t testing.TB, s *Sim) map[string]float64 {
	m := map[string]float64{}
	for i := range s.servers {
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
			cfg := DefaultConfig()
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

// eventLog runs cfg to until, advancing in steps of step, and returns every event.
func eventLog(t *testing.T, cfg Config, until, step time.Duration) []Event {
	s := mustSim(t, cfg)
	var log []Event
	s.OnEvent(func(e Event) { log = append(log, e) })
	for at := step; at <= until; at += step {
		s.AdvanceTo(at)
	}
	return log
}

func TestSameSeedSameEvents(t *testing.T) {
	for _, kind := range []string{WorkloadGRPO, WorkloadPoisson} {
		t.Run(kind, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DP = 2
			cfg.Workload.Kind = kind
			cfg.Faults = []Fault{{Kind: FaultRestart, At: 9 * time.Second, Server: 1}}
			a := eventLog(t, cfg, 20*time.Second, 20*time.Second)
			if len(a) < 1000 {
				t.Fatalf("only %d events", len(a))
			}
			if again := eventLog(t, cfg, 20*time.Second, 20*time.Second); !slices.Equal(a, again) {
				t.Fatal("same seed, different events")
			}
			// Advancing in small steps (as the wall clock does) changes no engine's events, only
			// how the engines' sequences interleave, so compare engine by engine.
			b := eventLog(t, cfg, 20*time.Second, 7*time.Millisecond)
			byEngine := func(l []Event) []Event {
				return slices.SortedStableFunc(slices.Values(l), func(x, y Event) int {
					return (x.Server*1000 + x.Engine) - (y.Server*1000 + y.Engine)
				})
			}
			// The small steps stop at the last multiple of 7ms before 20s; compare up to there.
			cut := func(l []Event, t time.Duration) []Event {
				return slices.DeleteFunc(slices.Clone(l), func(e Event) bool { return e.At > t })
			}
			end := 20 * time.Second / (7 * time.Millisecond) * (7 * time.Millisecond)
			if !slices.Equal(byEngine(cut(a, end-time.Second)), byEngine(cut(b, end-time.Second))) {
				t.Fatal("same seed advanced in small steps, different events")
			}
			cfg.Seed++
			c := eventLog(t, cfg, 20*time.Second, 20*time.Second)
			if slices.Equal(a, c) {
				t.Fatal("different seeds, same events")
			}
		})
	}
}

// TestDefaultWorkloadMovesEverything checks the demo setting (2 servers x 2 engines, GRPO
// defaults): batches of 5-10 s, a high but imperfect hit rate, a full KV cache, some
// preemptions, realistic latencies, and every histogram observed.
func TestDefaultWorkloadMovesEverything(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DP = 2
	s := mustSim(t, cfg)
	maxUsage, maxWaiting := 0.0, 0
	var batches []BatchDone
	for at := 100 * time.Millisecond; at <= 60*time.Second; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		for _, e := range s.engines {
			maxUsage = max(maxUsage, e.stats.kvUsage)
			maxWaiting = max(maxWaiting, e.stats.waiting)
		}
		batches = append(batches, s.takeBatches()...)
	}
	if len(batches) < 4 {
		t.Fatalf("only %d batches in 60 s", len(batches))
	}
	start := cfg.Workload.StartDelay
	for _, b := range batches {
		if d := b.At - start; d < 5*time.Second || d > 10*time.Second {
			t.Errorf("batch %d took %s", b.N, d)
		}
		start = b.At + cfg.Workload.Pause
	}
	tot := s.Totals()
	hitRate := tot["prefix_cache_hits"] / tot["prefix_cache_queries"]
	ttft := tot["time_to_first_token_seconds_sum"] / tot["time_to_first_token_seconds_count"]
	itl := tot["inter_token_latency_seconds_sum"] / tot["inter_token_latency_seconds_count"]
	t.Logf("batches %v hit rate %.3f preemptions %v max usage %.2f ttft %.3f s itl %.4f s", batches, hitRate, tot["num_preemptions"], maxUsage, ttft, itl)
	if hitRate < 0.8 || hitRate >= 1 {
		t.Errorf("hit rate %v", hitRate)
	}
	if tot["num_preemptions"] == 0 || maxUsage < 0.95 {
		t.Errorf("KV cache never under pressure: %v preemptions, max usage %v", tot["num_preemptions"], maxUsage)
	}
	if maxWaiting == 0 || tot["request_queue_time_seconds_sum"] == 0 {
		t.Errorf("nothing ever waited: max waiting %d, queue time %v", maxWaiting, tot["request_queue_time_seconds_sum"])
	}
	if ttft < 0.01 || ttft > 0.5 || itl < 0.008 || itl > 0.05 {
		t.Errorf("latencies out of range: ttft %v itl %v", ttft, itl)
	}
	for k, v := range tot {
		if strings.HasSuffix(k, "_count") && v == 0 {
			t.Errorf("%s never observed", k)
		}
	}
}

func TestPoissonWorkload(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workload.Kind = WorkloadPoisson
	cfg.Workload.Rate = 10
	s := mustSim(t, cfg)
	s.AdvanceTo(60 * time.Second)
	tot := s.Totals()
	n := tot["request_success/stop"] + tot["request_success/length"]
	if n < 450 || n > 700 {
		t.Errorf("%v requests finished in 60 s at 10/s", n)
	}
	if b := s.takeBatches(); len(b) != 0 {
		t.Errorf("poisson workload finished batches %v", b)
	}
	if hr := tot["prefix_cache_hits"] / tot["prefix_cache_queries"]; hr < 0.3 || hr >= 1 {
		t.Errorf("hit rate %v", hr)
	}
}

// TestRestartInSim checks the model side of a restart: the page starts from zero with a new
// _created, while Totals keep counting.
func TestRestartInSim(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Faults = []Fault{{Kind: FaultRestart, At: 5 * time.Second, Server: 0}}
	s := mustSim(t, cfg)
	s.AdvanceTo(5*time.Second - time.Millisecond)
	before := s.Totals()
	page0 := parsePage(t, s.Page(0, testStart))
	s.AdvanceTo(5 * time.Second)
	after := parsePage(t, s.Page(0, testStart))
	if got := after["vllm:generation_tokens_total"].Metric[0].Counter.GetValue(); got != 0 {
		t.Errorf("generation tokens right after restart: %v", got)
	}
	c0 := page0["vllm:generation_tokens_created"].Metric[0].Gauge.GetValue()
	c1 := after["vllm:generation_tokens_created"].Metric[0].Gauge.GetValue()
	if c1-c0 < 4.99 || c1-c0 > 5.01 {
		t.Errorf("_created moved from %v to %v, want 5 s later", c0, c1)
	}
	tot := s.Totals()
	if tot["generation_tokens"] < before["generation_tokens"] || tot["requests_lost"] == 0 || tot["restarts"] != 1 {
		t.Errorf("totals across restart: before %v after %v lost %v restarts %v",
			before["generation_tokens"], tot["generation_tokens"], tot["requests_lost"], tot["restarts"])
	}
	s.AdvanceTo(30 * time.Second)
	compareLives := simTotalsFromPages(t, s)
	// The pages show only the current life of server 0; the simulator's totals include the
	// first one, so they are larger.
	if compareLives["generation_tokens"] >= s.Totals()["generation_tokens"] {
		t.Errorf("pages %v, totals %v", compareLives["generation_tokens"], s.Totals()["generation_tokens"])
	}
	if st := s.servers[0].engines[0]; st.Busy() && st.pool.numUsed() == 0 {
		t.Error("busy engine with an empty cache")
	}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"servers", func(c *Config) { c.Servers = 0 }, "servers must be at least 1"},
		{"version", func(c *Config) { c.Version = "0.9" }, `vllm version "0.9" is not supported`},
		{"dp with 0.8", func(c *Config) { c.Version = "0.8"; c.DP = 2 }, "use dp 1"},
		{"speed", func(c *Config) { c.Speed = 0 }, "speed must be a positive number"},
		{"small cache", func(c *Config) { c.BlocksPerEngine = 10 }, "cannot hold one request"},
		{"workload", func(c *Config) { c.Workload.Kind = "burst" }, `workload kind "burst"`},
		{"long requests", func(c *Config) { c.Workload.MaxTokens = 4000 }, "exceed max model len"},
		{"fault server", func(c *Config) { c.Faults = []Fault{{Kind: FaultRestart, Server: 5}} }, "aims at server 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.Servers, cfg.Speed = 0, -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "servers") || !strings.Contains(err.Error(), "speed") {
		t.Fatalf("want both problems reported at once, got %v", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
}
