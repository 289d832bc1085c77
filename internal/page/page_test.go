package page

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

func load(t *testing.T, name string) *Page {
	t.Helper()
	p, err := ParsePage(readPage(t, name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

func counter(ep EnginePage, c vllm.Counter) (sum float64, created float64, n int) {
	for _, cs := range ep.Counters {
		if cs.Family == c {
			sum += cs.Value
			created = cs.Created
			n++
		}
	}
	return
}

func TestFixturePages(t *testing.T) {
	tests := []struct {
		file    string
		engines []string
		queries float64
		kv      float64
		reasons int
		hists   int
	}{
		{"prometheus-client-render-vllm-0.20.prom", []string{"0", "1"}, 123456, 0.83, 5, 4},
		{"prometheus-client-render-vllm-0.10.prom", []string{"0", "1"}, 123456, 0.83, 3, 4},
		{"prometheus-client-render-vllm-0.8.prom", []string{""}, 123456, 0.83, 3, 4},
		{"llm-d-inference-sim-dp1.prom", []string{""}, -1, -1, -1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			p := load(t, tt.file)
			if len(p.Engines) != len(tt.engines) {
				t.Fatalf("engines %d, want %d", len(p.Engines), len(tt.engines))
			}
			for i, ep := range p.Engines {
				if ep.Engine != tt.engines[i] {
					t.Errorf("engine %q, want %q", ep.Engine, tt.engines[i])
				}
				if !ep.HasGauge[vllm.Running] {
					t.Errorf("engine %q: no running gauge", ep.Engine)
				}
				q, created, n := counter(ep, vllm.PrefixQueries)
				if tt.queries >= 0 {
					// one series, read once even where old and new names are both exported
					if n != 1 || q != tt.queries {
						t.Errorf("prefix queries = %v over %d series, want %v over 1", q, n, tt.queries)
					}
					if created < 1.7e9 {
						t.Errorf("prefix queries _created = %v, want a Unix time", created)
					}
				}
				if tt.kv >= 0 && ep.Gauges[vllm.KVUsage] != tt.kv {
					t.Errorf("kv = %v, want %v", ep.Gauges[vllm.KVUsage], tt.kv)
				}
				if tt.reasons >= 0 {
					if _, _, n := counter(ep, vllm.RequestSuccess); n != tt.reasons {
						t.Errorf("request_success series %d, want %d", n, tt.reasons)
					}
				}
				if tt.hists >= 0 && len(ep.Hists) != tt.hists {
					t.Errorf("histograms %d, want %d", len(ep.Hists), tt.hists)
				}
				for _, h := range ep.Hists {
					if len(h.Buckets) < 2 || h.Buckets[len(h.Buckets)-1].Le < 1e308 {
						t.Errorf("histogram %v: buckets %v lack +Inf", h.Family, h.Buckets)
					}
				}
			}
		})
	}
}

func TestExcerptWithOnlyCreatedOfOldName(t *testing.T) {
	// The excerpt has gpu_prefix_cache_queries_created but not its _total, and the new
	// prefix_cache_queries_total: the new name is read, and no _created is taken as a value.
	p := load(t, "vllm-0.10.0-glm45-issue-excerpt-a.prom")
	q, _, n := counter(p.Engines[0], vllm.PrefixQueries)
	if n != 1 || q != 32 {
		t.Fatalf("queries %v over %d series, want 32 over 1", q, n)
	}
}

func TestCreatedNeverReadAsValue(t *testing.T) {
	p, err := ParsePage([]byte("vllm:num_preemptions_created{engine=\"0\"} 1.75e+09\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range p.Engines {
		if v, _, n := counter(ep, vllm.Preemptions); n > 0 && v != 0 {
			t.Fatalf("a _created sample became a counter value %v", v)
		}
	}
}

func TestGarbagePagesFail(t *testing.T) {
	for _, body := range []string{
		"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>",
		`{"detail":"Not Found"}`,
		"vllm:num_requests_running{engine=\"0\" 1\n",
		"vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"abc\"} 1\n",
	} {
		if _, err := ParsePage([]byte(body)); err == nil {
			t.Errorf("page %q parsed without error", body)
		} else if !strings.Contains(err.Error(), "line 1") {
			t.Errorf("error %q does not name the line", err)
		}
	}
}

// FuzzParsePage checks that any page either fails or parses into workers whose labels survive
// LabelMap and LabelKey. Package window fuzzes what a worker makes of the pages.
func FuzzParsePage(f *testing.F) {
	for _, n := range []string{"prometheus-client-render-vllm-0.10.prom", "llm-d-inference-sim-dp1.prom", "ray-serve-llm-two-replicas.prom"} {
		f.Add(readPage(f, n))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePage(b)
		if err != nil {
			return
		}
		for i := range p.Engines {
			if l := p.Engines[i].Labels; LabelKey(LabelMap(l)) != l {
				t.Fatalf("worker labels %s do not survive LabelMap and LabelKey", l)
			}
		}
	})
}

func BenchmarkParsePage(b *testing.B) {
	body := readPage(b, "prometheus-client-render-vllm-0.10.prom")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParsePage(body); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRayCountersWithoutTotal(t *testing.T) {
	p := load(t, "ray-counters-without-total.prom")
	if len(p.Engines) != 1 || p.Engines[0].Engine != "0" {
		t.Fatalf("engines %+v, want one, engine 0", p.Engines)
	}
	ep := p.Engines[0]
	for _, c := range []struct {
		c    vllm.Counter
		want float64
		n    int
	}{{vllm.PrefixQueries, 4096, 1}, {vllm.PrefixHits, 1024, 1}, {vllm.PromptTokens, 8192, 1}, {vllm.GenerationTokens, 2048, 1}, {vllm.RequestSuccess, 19, 2}} {
		if v, _, n := counter(ep, c.c); v != c.want || n != c.n {
			t.Errorf("%s = %v over %d series, want %v over %d", vllm.Counters[c.c].Name, v, n, c.want, c.n)
		}
	}
	if ep.Gauges[vllm.KVUsage] != 0.25 || ep.Gauges[vllm.Running] != 3 {
		t.Errorf("gauges %v, want running 3 and kv 0.25", ep.Gauges)
	}
}

func TestSeriesKeysDoNotCollide(t *testing.T) {
	// Label values may hold commas, equals signs and quotes: each label set is its own series.
	for _, pair := range [][2]string{
		{`x="a,y=b"`, `x="a",y="b"`},
		{`x="a\",y=\"b"`, `x="a",y="b"`},
		{`x="a\\",y="b"`, `x="a\\\",y=\"b"`},
	} {
		body := fmt.Sprintf("vllm:num_preemptions_total{engine=\"0\",%s} 100\nvllm:num_preemptions_total{engine=\"0\",%s} 10\n", pair[0], pair[1])
		p, err := ParsePage([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		cs := p.Engines[0].Counters
		if len(cs) != 2 || cs[0].Key == cs[1].Key || cs[0].Value+cs[1].Value != 110 {
			t.Fatalf("%s and %s: series %+v, want 2 with their own keys and values", pair[0], pair[1], cs)
		}
	}
}

func TestNonFiniteGaugesAreNotSamples(t *testing.T) {
	p, err := ParsePage([]byte(`vllm:kv_cache_usage_perc{engine="0",model_name="a"} NaN
vllm:kv_cache_usage_perc{engine="0",model_name="b"} 0.5
vllm:num_requests_running{engine="0",model_name="a"} +Inf
vllm:num_requests_running{engine="0",model_name="b"} 3
vllm:num_requests_waiting{engine="0",model_name="a"} NaN
`))
	if err != nil {
		t.Fatal(err)
	}
	ep := p.Engines[0]
	if !ep.HasGauge[vllm.KVUsage] || ep.Gauges[vllm.KVUsage] != 0.5 {
		t.Errorf("kv = %v (%v), want 0.5: the mean of the finite samples", ep.Gauges[vllm.KVUsage], ep.HasGauge[vllm.KVUsage])
	}
	if !ep.HasGauge[vllm.Running] || ep.Gauges[vllm.Running] != 3 {
		t.Errorf("running = %v (%v), want 3", ep.Gauges[vllm.Running], ep.HasGauge[vllm.Running])
	}
	if ep.HasGauge[vllm.Waiting] {
		t.Errorf("waiting = %v from a NaN sample, want none", ep.Gauges[vllm.Waiting])
	}
}
