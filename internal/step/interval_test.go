package step

import (
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/benchpage"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestIntervalKeysOnce checks that an interval has each key once, on a vLLM page with every kind
// of value (gauges, counters, ratios, rates), and that Value finds them: its values are a list,
// where a key given twice would be two series.
func TestIntervalKeysOnce(t *testing.T) {
	body := testkit.ReadFixture(t, "prometheus-client-render-vllm-0.20.prom")
	var ivs []Interval
	tr := NewTracker(Options{Scalars: true, OnInterval: func(iv Interval) { ivs = append(ivs, iv.Clone()) }})
	p := page.NewParser(page.Options{})
	t0 := time.Unix(1700000000, 0)
	for k := range 3 {
		pg, err := p.Parse(benchpage.Variant(body, k+1))
		if err != nil {
			t.Fatal(err)
		}
		tr.Observe(t0.Add(time.Duration(k)*time.Second), "http://10.0.0.1:8000/metrics", pg, nil)
		pg.Release()
	}
	kinds := map[string]bool{}
	for _, iv := range ivs {
		seen := map[string]bool{}
		for _, v := range iv.Values {
			if seen[v.Key] {
				t.Errorf("engine %s at %v: %s twice", iv.Engine, iv.TS, v.Key)
			}
			seen[v.Key] = true
			if got, ok := iv.Value(v.Key); !ok || got != v.V && got == got {
				t.Errorf("Value(%q) = %v, %v; want %v", v.Key, got, ok, v.V)
			}
		}
		for _, k := range []string{"num_requests_running", "prefix_cache_queries", "prefix_cache_hit_rate", "generation_tokens_per_s"} {
			if seen[k] {
				kinds[k] = true
			}
		}
	}
	if len(kinds) != 4 {
		t.Errorf("the intervals had %v of a gauge, a counter, a ratio and a rate", kinds)
	}
	if _, ok := ivs[0].Value("no_such_key"); ok {
		t.Error("Value found a key the interval does not have")
	}
}
