package step

import (
	"strings"
	"testing"
	"time"
)

// TestRatioOverStatsLeftOut: engine 0's hits rise 2.5 times its queries at the same scrapes,
// engine 1's half of them; an SGLang server's cached tokens 2.5 times its prompt tokens. The
// per-interval statistics of a ratio whose step is over are left out with it: of the worker's
// record, and of the fleet's, whose statistics are those of the other workers' intervals (0.5),
// so that no hit rate above 1 reaches a record.
func TestRatioOverStatsLeftOut(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true, Scalars: true})
	t0 := time.Unix(1_700_000_000, 0)
	tr.Begin(t0)
	for n := range 4 {
		i := float64(n)
		ts := t0.Add(time.Duration(n) * time.Second)
		tr.Observe(ts, "sg", mustSGLangPage(t, sgl{prompt: 100 * i, cached: 250 * i}), nil)
		tr.Observe(ts, "v", mustPage(t, eng{engine: "0", queries: 100 * i, hits: 250 * i}, eng{engine: "1", queries: 100 * i, hits: 50 * i}), nil)
	}
	r := tr.EndStep(1, t0.Add(4*time.Second))
	for _, st := range []string{"mean", "max", "p95"} {
		absent(t, r.Metrics, "sglang/prefix_cache_hit_rate/"+st)
		want(t, r.Metrics, "vllm/prefix_cache_hit_rate/"+st, 0.5)
	}
	for _, w := range r.PerWorker {
		for _, st := range []string{"mean", "max", "p95"} {
			switch {
			case w.Target == "v" && w.Engine == "1":
				want(t, w.Metrics, "vllm/prefix_cache_hit_rate/"+st, 0.5)
			case w.Target == "v":
				absent(t, w.Metrics, "vllm/prefix_cache_hit_rate/"+st)
			default:
				absent(t, w.Metrics, "sglang/prefix_cache_hit_rate/"+st)
			}
		}
	}
	for k, v := range r.Metrics {
		if v > 1 && strings.Contains(k, "hit_rate") {
			t.Errorf("%s = %v", k, v)
		}
	}
}
