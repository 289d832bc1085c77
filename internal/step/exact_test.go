package step

import (
	"math"
	"testing"
)

func TestNaNCounterSample(t *testing.T) {
	nan := math.NaN()
	recs := run(t, opt, []event{
		scrape(0, eng{engine: "0", gen: 100}, eng{engine: "1", gen: 1000}),
		scrape(1, eng{engine: "0", gen: 110}, eng{engine: "1", gen: 1100}),
		scrape(2, eng{engine: "0", gen: nan}, eng{engine: "1", gen: 1200}),
		end(2, 1),
		scrape(3, eng{engine: "0", gen: 130}, eng{engine: "1", gen: 1300}),
		scrape(4, eng{engine: "0", gen: 140}, eng{engine: "1", gen: 1400}),
		end(4, 2),
	})
	// step 1: engine 0 +10 (its NaN scrape is no interval), engine 1 +100 +100
	m := recs[0].Metrics
	want(t, m, "vllm/generation_tokens", 210)
	want(t, m, "vllm/generation_tokens_per_s", 105)
	want(t, m, "vllm/generation_tokens/mean", 70)
	want(t, m, "vllm/generation_tokens/max", 100)
	want(t, m, "vllm/generation_tokens/p95", 100)
	// step 2: engine 0's 110 -> 130 lands with the finite value, then +10; engine 1 +200
	m = recs[1].Metrics
	want(t, m, "vllm/generation_tokens", 230)
	want(t, m, "vllm/generation_tokens/mean", 57.5)
	want(t, m, "vllm/generation_tokens/max", 100)
}

func TestHistogramResetWithoutCreated(t *testing.T) {
	// A restart seen only through a bucket and _sum going down: _count has passed its old value.
	recs := run(t, opt, []event{
		scrape(0, eng{engine: "0", ttft: []float64{2, 5, 8, 10}, ttftSum: 50}),
		scrape(1, eng{engine: "0", ttft: []float64{0, 3, 6, 12}, ttftSum: 3}),
		end(1, 1),
	})
	m := recs[0].Metrics
	want(t, m, "vllm/time_to_first_token_seconds/mean", 0.25)
	// buckets since the restart: 0 up to 0.1, 3 up to 0.5, 6 up to 1, 12 in all; rank 6 is at 1
	want(t, m, "vllm/time_to_first_token_seconds/p50", 1)
	want(t, m, "vllm/time_to_first_token_seconds/p95", 1)
}

func TestNaNGaugeSample(t *testing.T) {
	recs := run(t, opt, []event{
		scrape(0, eng{engine: "0", kv: 0.5}),
		scrape(1, eng{engine: "0", kv: math.NaN()}),
		scrape(2, eng{engine: "0", kv: math.Inf(1)}),
		end(2, 1),
	})
	m := recs[0].Metrics
	want(t, m, "vllm/kv_cache_usage_perc/mean", 0.5)
	want(t, m, "vllm/kv_cache_usage_perc/max", 0.5)
	want(t, m, "vllm/kv_cache_usage_perc/p95", 0.5)
	if n := len(recs[0].Timeline.Workers[0].Series["kv_cache_usage_perc"]); n != 1 {
		t.Errorf("kv timeline holds %d points, want 1", n)
	}
}

func TestHitRatePerIntervalWithSeveralIntervals(t *testing.T) {
	// One worker, two intervals with unequal queries: 50/100, then 60/300. Each interval's rate
	// divides by that interval's queries, not by the step's running total (60/400).
	var rates []float64
	o := Options{Scalars: true, OnInterval: func(iv Interval) {
		if r, ok := iv.Value("prefix_cache_hit_rate"); ok {
			rates = append(rates, r)
		}
	}}
	recs := run(t, o, []event{
		scrape(0, eng{engine: "0", queries: 1000, hits: 500}),
		scrape(1, eng{engine: "0", queries: 1100, hits: 550}),
		scrape(2, eng{engine: "0", queries: 1400, hits: 610}),
		end(2, 1),
	})
	m := recs[0].Metrics
	want(t, m, "vllm/prefix_cache_hit_rate", 110.0/400)
	want(t, m, "vllm/prefix_cache_hit_rate/mean", (0.5+0.2)/2)
	want(t, m, "vllm/prefix_cache_hit_rate/max", 0.5)
	want(t, m, "vllm/prefix_cache_hit_rate/p95", 0.2+0.95*0.3)
	if len(rates) != 2 || rates[0] != 0.5 || math.Abs(rates[1]-0.2) > 1e-12 {
		t.Errorf("interval rates %v, want [0.5 0.2]", rates)
	}
	ps := recs[0].Timeline.Workers[0].Series["prefix_cache_hit_rate"]
	if len(ps) != 2 || ps[0].Value != 0.5 || math.Abs(ps[1].Value-0.2) > 1e-12 {
		t.Errorf("timeline %v, want rates 0.5 and 0.2", ps)
	}
}

func TestRayCountersWithoutTotalInSteps(t *testing.T) {
	for _, p := range []string{"ray_vllm_", "ray_vllm:"} {
		t.Run(p, func(t *testing.T) {
			recs := run(t, opt, []event{
				scrape(0, eng{engine: "0", queries: 10, hits: 5, gen: 100, prefix: p, noTotal: true}),
				scrape(1, eng{engine: "0", queries: 30, hits: 10, gen: 160, prefix: p, noTotal: true}),
				end(1, 1),
			})
			want(t, recs[0].Metrics, "vllm/prefix_cache_hit_rate", 0.25)
			want(t, recs[0].Metrics, "vllm/generation_tokens", 60)
		})
	}
}

func TestHistogramCountFromInfBucket(t *testing.T) {
	recs := run(t, opt, []event{
		scrape(0, eng{engine: "0", ttft: []float64{1, 1, 1, 1}, ttftSum: 0.05, noCount: true}),
		scrape(1, eng{engine: "0", ttft: []float64{2, 5, 5, 5}, ttftSum: 1.05, noCount: true}),
		end(1, 1),
	})
	want(t, recs[0].Metrics, "vllm/time_to_first_token_seconds/mean", 0.25)
	want(t, recs[0].Metrics, "vllm/time_to_first_token_seconds/p50", 0.1+0.4*1/3)
}

func TestForget(t *testing.T) {
	var dts []float64
	tr := NewTracker(Options{OnInterval: func(iv Interval) {
		if iv.Engine == "0" {
			dts = append(dts, iv.DT)
		}
	}})
	obs := func(ts float64, es ...eng) { tr.Observe(at(ts), target, mustPage(t, es...), nil) }
	// engine 0 runs throughout; engine 1 started at 0.5, was counted whole at 1, then its
	// target went away; engine 2 started while the target was away
	obs(0, eng{engine: "0", gen: 100, created: unix(-100)})
	obs(1, eng{engine: "0", gen: 110, created: unix(-100)}, eng{engine: "1", gen: 5, created: unix(0.5)})
	tr.Forget(target)
	tr.Forget("http://never-seen:8000/metrics")
	obs(3, eng{engine: "0", gen: 150, created: unix(-100)}, eng{engine: "1", gen: 8, created: unix(0.5)}, eng{engine: "2", gen: 30, created: unix(2)})
	obs(4, eng{engine: "0", gen: 160, created: unix(-100)}, eng{engine: "1", gen: 9, created: unix(0.5)}, eng{engine: "2", gen: 31, created: unix(2)})
	r := tr.EndStep(1, at(4))
	// engine 0: +10 before, a baseline at 3, +10; engine 1: 5 before, a baseline at 3, +1;
	// engine 2: 30 (started since the target was forgotten), +1
	want(t, r.Metrics, "vllm/generation_tokens", 10+10+5+1+30+1)
	if r.Workers != 3 {
		t.Errorf("workers %d, want 3", r.Workers)
	}
	if len(dts) != 4 || dts[2] != 0 || dts[3] != 1 {
		t.Errorf("engine 0's intervals %v, want the first after its return to be a first sight", dts)
	}
}

func TestForgetBeforeAnyScrape(t *testing.T) {
	tr := NewTracker(opt)
	tr.Forget(target)
	tr.Observe(at(0), target, mustPage(t, eng{engine: "0", gen: 100, created: unix(-1)}), nil)
	tr.Observe(at(1), target, mustPage(t, eng{engine: "0", gen: 110, created: unix(-1)}), nil)
	r := tr.EndStep(1, at(1))
	want(t, r.Metrics, "vllm/generation_tokens", 10) // the first scrape stays a baseline
}
