package step

import (
	"math"
	"reflect"
	"testing"
	"time"
)

// A ratio of two counts whose numerator passes its denominator over a step, the two having
// moved at the same scrapes, is no figure: its key is left out, of the worker's record, of the
// fleet's, and of the worst worker's, and the record names the target with both counters, for
// SGLang's hit rate and vLLM's alike. The counters themselves stay.
func TestRatioOverLeftOut(t *testing.T) {
	tr := NewTracker(Options{PerWorker: true, Scalars: true})
	t0 := time.Unix(1_700_000_000, 0)
	tr.Begin(t0)
	for n := range 3 {
		i := float64(n)
		ts := t0.Add(time.Duration(n) * time.Second)
		tr.Observe(ts, "sg", mustSGLangPage(t, sgl{prompt: 100 * i, cached: 250 * i}), nil)
		tr.Observe(ts, "v", mustPage(t, eng{engine: "0", queries: 100 * i, hits: 90 * i}, eng{engine: "1", queries: 100 * i, hits: 300 * i}), nil)
	}
	r := tr.EndStep(1, t0.Add(3*time.Second))
	for _, key := range []string{"sglang/prefix_cache_hit_rate", "vllm/prefix_cache_hit_rate", "vllm/prefix_cache_hit_rate/worst_worker"} {
		if v, ok := r.Metrics[key]; ok {
			t.Errorf("%s = %v", key, v)
		}
	}
	if r.Metrics["sglang/cached_tokens"] != 500 || r.Metrics["sglang/prompt_tokens"] != 200 || r.Metrics["vllm/prefix_cache_hits"] != 780 {
		t.Errorf("counters %v", r.Metrics)
	}
	for _, w := range r.PerWorker {
		v, ok := w.Metrics["vllm/prefix_cache_hit_rate"]
		if w.Target == "v" && w.Engine == "0" {
			if v != 0.9 {
				t.Errorf("engine 0's hit rate %v (%v), want 0.9", v, ok)
			}
		} else if _, ok2 := w.Metrics["sglang/prefix_cache_hit_rate"]; ok || ok2 {
			t.Errorf("%s %s: a hit rate in %v", w.Target, w.Engine, w.Metrics)
		}
	}
	want := []RatioOver{
		{Target: "sg", Ratio: "sglang/prefix_cache_hit_rate", Num: "sglang/cached_tokens", Den: "sglang/prompt_tokens", NumV: 500, DenV: 200},
		{Target: "v", Ratio: "vllm/prefix_cache_hit_rate", Num: "vllm/prefix_cache_hits", Den: "vllm/prefix_cache_queries", NumV: 600, DenV: 200},
	}
	if !reflect.DeepEqual(r.RatiosOver, want) {
		t.Errorf("RatiosOver %+v, want %+v", r.RatiosOver, want)
	}
}

// A counter whose increase lands late (a NaN at the last scrape of a step) holds in the next
// step what the previous step's denominator had: the next step's numerator passes its
// denominator, and that is no figure either. No ratio above 1 reaches a record, the step's or an
// interval's: the key is left out and the target named, while the counts stay.
func TestRatioOverLate(t *testing.T) {
	tr := NewTracker(Options{Scalars: true})
	t0 := time.Unix(1_700_000_000, 0)
	tr.Begin(t0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tr.Observe(at(0), "v", mustPage(t, eng{engine: "0", queries: 0, hits: 0}), nil)
	tr.Observe(at(1), "v", mustPage(t, eng{engine: "0", queries: 100, hits: math.NaN()}), nil)
	r1 := tr.EndStep(1, at(2))
	tr.Observe(at(3), "v", mustPage(t, eng{engine: "0", queries: 110, hits: 100}), nil)
	r2 := tr.EndStep(2, at(4))
	if v, ok := r2.Metrics["vllm/prefix_cache_hit_rate"]; ok || len(r2.RatiosOver) != 1 || r2.Metrics["vllm/prefix_cache_hits"] != 100 {
		t.Errorf("step 2: hit rate %v (%v), over %v, record %v; want no hit rate, the target named and 100 hits (step 1: %v)",
			v, ok, r2.RatiosOver, r2.Metrics, r1.Metrics)
	}
	for _, stat := range []string{"mean", "max", "p95"} {
		if v, ok := r2.Metrics["vllm/prefix_cache_hit_rate/"+stat]; ok {
			t.Errorf("step 2: hit rate /%s %v from an interval of 100 hits over 10 queries", stat, v)
		}
	}
	tr.Observe(at(5), "v", mustPage(t, eng{engine: "0", queries: 120, hits: 110}), nil)
	r3 := tr.EndStep(3, at(6))
	if v := r3.Metrics["vllm/prefix_cache_hit_rate"]; v != 1 || r3.RatiosOver != nil {
		t.Errorf("step 3: hit rate %v, over %v; want 10 hits over 10 queries", v, r3.RatiosOver)
	}
}

// One interval of a step whose ratio is no more than 1 may be above it, its two counters read
// between the increments of one request: that value is left out of /mean, /max and /p95, the
// others kept.
func TestRatioIntervalOverLeftOut(t *testing.T) {
	tr := NewTracker(Options{Scalars: true})
	t0 := time.Unix(1_700_000_000, 0)
	tr.Begin(t0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for i, qh := range [][2]float64{{0, 0}, {100, 50}, {110, 110}, {210, 160}} {
		tr.Observe(at(i), "v", mustPage(t, eng{engine: "0", queries: qh[0], hits: qh[1]}), nil)
	}
	r := tr.EndStep(1, at(4))
	m := r.Metrics
	if m["vllm/prefix_cache_hit_rate"] != 160.0/210 || m["vllm/prefix_cache_hit_rate/max"] != 0.5 || m["vllm/prefix_cache_hit_rate/mean"] != 0.5 {
		t.Errorf("hit rate %v, /max %v, /mean %v: want 160/210, and the intervals 0.5 and 0.5 (6.0 left out)",
			m["vllm/prefix_cache_hit_rate"], m["vllm/prefix_cache_hit_rate/max"], m["vllm/prefix_cache_hit_rate/mean"])
	}
}
