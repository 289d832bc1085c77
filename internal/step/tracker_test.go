package step

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// unix is t0+s as Unix seconds, for _created values.
func unix(s float64) float64 { return float64(at(s).UnixNano()) / 1e9 }

const target = "http://h:8000/metrics"

type event struct {
	ts    float64
	step  int64 // > 0: a step end
	fail  bool
	pages []eng
}

func run(t *testing.T, opt Options, evs []event) []Record {
	t.Helper()
	tr := NewTracker(opt)
	var out []Record
	for _, e := range evs {
		switch {
		case e.step > 0:
			out = append(out, tr.EndStep(e.step, at(e.ts)))
		case e.fail:
			tr.Observe(at(e.ts), target, nil, errTest)
		default:
			tr.Observe(at(e.ts), target, mustPage(t, e.pages...), nil)
		}
	}
	return out
}

type testErr struct{}

func (testErr) Error() string { return "connection refused" }

var errTest = testErr{}

func scrape(ts float64, es ...eng) event { return event{ts: ts, pages: es} }
func end(ts float64, n int64) event      { return event{ts: ts, step: n} }

func want(t *testing.T, m map[string]float64, key string, v float64) {
	t.Helper()
	got, ok := m[key]
	if !ok {
		t.Errorf("%s absent, want %v", key, v)
		return
	}
	if math.Abs(got-v) > 1e-9*math.Max(1, math.Abs(v)) {
		t.Errorf("%s = %v, want %v", key, got, v)
	}
}

func absent(t *testing.T, m map[string]float64, key string) {
	t.Helper()
	if v, ok := m[key]; ok {
		t.Errorf("%s = %v, want absent", key, v)
	}
}

var opt = Options{Scalars: true}

func TestDataParallelEnginesAreWorkers(t *testing.T) {
	recs := run(t, Options{Scalars: true, PerWorker: true}, []event{
		scrape(0, eng{engine: "0", queries: 100, hits: 50, kv: 0.2}, eng{engine: "1", queries: 10, hits: 0, kv: 0.4}),
		scrape(1, eng{engine: "0", queries: 300, hits: 200, kv: 0.6}, eng{engine: "1", queries: 110, hits: 50, kv: 0.8}),
		end(1.5, 1),
	})
	r := recs[0]
	if r.Workers != 2 || len(r.PerWorker) != 2 {
		t.Fatalf("workers = %d, per_worker = %d, want 2 and 2", r.Workers, len(r.PerWorker))
	}
	want(t, r.Metrics, "vllm/prefix_cache_queries", 300)
	want(t, r.Metrics, "vllm/prefix_cache_hits", 200)
	want(t, r.Metrics, "vllm/prefix_cache_hit_rate", 200.0/300)
	want(t, r.Metrics, "vllm/kv_cache_usage_perc/mean", 0.5)
	want(t, r.Metrics, "vllm/kv_cache_usage_perc/max", 0.8)
	// per-interval hit rates are 150/200 and 50/100: the step rate is token-weighted, not their mean
	want(t, r.Metrics, "vllm/prefix_cache_hit_rate/mean", (0.75+0.5)/2)
	if r.PerWorker[0].Engine != "0" || r.PerWorker[1].Engine != "1" {
		t.Fatalf("per_worker order: %+v", r.PerWorker)
	}
	want(t, r.PerWorker[0].Metrics, "vllm/prefix_cache_hit_rate", 0.75)
	want(t, r.PerWorker[1].Metrics, "vllm/prefix_cache_hit_rate", 0.5)
}

func TestOldAndNewNamesNotCountedTwice(t *testing.T) {
	recs := run(t, opt, []event{
		scrape(0, eng{engine: "0", queries: 100, hits: 40, kv: 0.1, bothNames: true}),
		scrape(1, eng{engine: "0", queries: 200, hits: 90, kv: 0.3, bothNames: true}),
		end(1, 1),
	})
	want(t, recs[0].Metrics, "vllm/prefix_cache_queries", 100)
	want(t, recs[0].Metrics, "vllm/prefix_cache_hits", 50)
	want(t, recs[0].Metrics, "vllm/kv_cache_usage_perc/mean", 0.2)
}

func TestOnlyOldNames(t *testing.T) {
	recs := run(t, opt, []event{
		scrape(0, eng{engine: "0", queries: 100, hits: 40, kv: 0.1, oldNames: true}),
		scrape(1, eng{engine: "0", queries: 200, hits: 90, kv: 0.3, oldNames: true}),
		end(1, 1),
	})
	want(t, recs[0].Metrics, "vllm/prefix_cache_queries", 100)
	want(t, recs[0].Metrics, "vllm/prefix_cache_hit_rate", 0.5)
	want(t, recs[0].Metrics, "vllm/kv_cache_usage_perc/max", 0.3)
}

func TestRaySpellings(t *testing.T) {
	for _, p := range []string{"ray_vllm_", "ray_vllm:", "vllm_"} {
		t.Run(p, func(t *testing.T) {
			recs := run(t, opt, []event{
				scrape(0, eng{engine: "0", queries: 10, hits: 5, prefix: p}),
				scrape(1, eng{engine: "0", queries: 30, hits: 10, prefix: p}),
				end(1, 1),
			})
			want(t, recs[0].Metrics, "vllm/prefix_cache_hit_rate", 0.25)
		})
	}
}

func TestCounterResets(t *testing.T) {
	tests := []struct {
		name    string
		evs     []event
		preempt float64
	}{
		{"value drops", []event{
			scrape(0, eng{engine: "0", preempt: 10, created: unix(-100)}),
			scrape(1, eng{engine: "0", preempt: 14, created: unix(-100)}),
			scrape(2, eng{engine: "0", preempt: 3, created: unix(1.5)}),
			end(3, 1),
		}, 4 + 3},
		{"value drops, no _created", []event{
			scrape(0, eng{engine: "0", preempt: 10}),
			scrape(1, eng{engine: "0", preempt: 2}),
			end(3, 1),
		}, 2},
		{"only _created changes", []event{
			scrape(0, eng{engine: "0", preempt: 10, created: unix(-100)}),
			scrape(2, eng{engine: "0", preempt: 12, created: unix(1)}), // restarted and already past 10
			end(3, 1),
		}, 12},
		{"gap of failed scrapes", []event{
			scrape(0, eng{engine: "0", preempt: 10}),
			{ts: 1, fail: true}, {ts: 2, fail: true},
			scrape(3, eng{engine: "0", preempt: 15}),
			end(3, 1),
		}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs := run(t, opt, tt.evs)
			want(t, recs[0].Metrics, "vllm/num_preemptions", tt.preempt)
		})
	}
}

func TestGapAcrossStepsBelongsToLaterScrape(t *testing.T) {
	recs := run(t, opt, []event{
		scrape(0, eng{engine: "0", gen: 100}),
		end(1, 1),
		{ts: 2, fail: true},
		end(3, 2),
		scrape(4, eng{engine: "0", gen: 160}),
		end(5, 3),
	})
	absent(t, recs[0].Metrics, "vllm/generation_tokens") // only a baseline
	absent(t, recs[1].Metrics, "vllm/generation_tokens") // nothing answered
	want(t, recs[2].Metrics, "vllm/generation_tokens", 60)
	if recs[1].Scrapes.Failed != 1 || recs[1].Workers != 0 {
		t.Errorf("step 2 scrapes %+v workers %d, want 1 failed, 0 workers", recs[1].Scrapes, recs[1].Workers)
	}
}

func TestWorkerAppearingMidStep(t *testing.T) {
	recs := run(t, opt, []event{
		scrape(0, eng{engine: "0", gen: 100, created: unix(-50)}),
		end(1, 1),
		// engine 1 started at 1.5, inside step 2: all it generated belongs to step 2
		scrape(2, eng{engine: "0", gen: 110, created: unix(-50)}, eng{engine: "1", gen: 40, created: unix(1.5)}),
		scrape(3, eng{engine: "0", gen: 120, created: unix(-50)}, eng{engine: "1", gen: 45, created: unix(1.5)}),
		end(3, 2),
		// engine 2's _created is from before the run, but the target's pages did not show it
		// until now: that is the evidence, and it counts whole (see TestFirstSeenAfterEvidence)
		scrape(4, eng{engine: "0", gen: 120, created: unix(-50)}, eng{engine: "1", gen: 45, created: unix(1.5)}, eng{engine: "2", gen: 999, created: unix(-10)}),
		end(5, 3),
	})
	want(t, recs[1].Metrics, "vllm/generation_tokens", 20+45)
	want(t, recs[2].Metrics, "vllm/generation_tokens", 999)
	if recs[2].Workers != 3 {
		t.Errorf("workers = %d, want 3", recs[2].Workers)
	}
}

func TestZeroQueriesHitRateAbsent(t *testing.T) {
	recs := run(t, opt, []event{
		scrape(0, eng{engine: "0", queries: 50, hits: 20}),
		scrape(1, eng{engine: "0", queries: 50, hits: 20}),
		end(1, 1),
	})
	want(t, recs[0].Metrics, "vllm/prefix_cache_queries", 0)
	absent(t, recs[0].Metrics, "vllm/prefix_cache_hit_rate")
	absent(t, recs[0].Metrics, "vllm/prefix_cache_hit_rate/mean")
	want(t, recs[0].Metrics, "vllm/prefix_cache_queries/mean", 0)
}

func TestScalarsOff(t *testing.T) {
	recs := run(t, Options{Prefix: "rollout"}, []event{
		scrape(0, eng{engine: "0", queries: 50, hits: 20, running: 3}),
		scrape(1, eng{engine: "0", queries: 150, hits: 70, running: 5}),
		end(2, 1),
	})
	want(t, recs[0].Metrics, "rollout/prefix_cache_hit_rate", 0.5)
	absent(t, recs[0].Metrics, "rollout/num_requests_running/mean")
	for k := range recs[0].Metrics {
		if k[:8] != "rollout/" {
			t.Errorf("key %q lacks the prefix", k)
		}
	}
}

func TestThroughputAndSuccess(t *testing.T) {
	recs := run(t, opt, []event{
		scrape(0, eng{engine: "0", prompt: 1000, gen: 500, success: map[string]float64{"stop": 3}}),
		scrape(1, eng{engine: "0", prompt: 3000, gen: 900, success: map[string]float64{"stop": 7, "length": 2}}),
		end(2, 1),
	})
	m := recs[0].Metrics
	want(t, m, "vllm/prompt_tokens", 2000)
	want(t, m, "vllm/prompt_tokens_per_s", 1000)
	want(t, m, "vllm/generation_tokens_per_s", 200)
	want(t, m, "vllm/request_success/stop", 4)
	want(t, m, "vllm/request_success/length", 2)
	want(t, m, "vllm/request_success/abort", 0)
	if recs[0].DurationS != 2 {
		t.Errorf("duration %v, want 2", recs[0].DurationS)
	}
}

func TestHistogramQuantilesByHand(t *testing.T) {
	// Over the step: 10 observations, 2 in (0,0.1], 6 in (0.1,0.5], 1 in (0.5,1], 1 above 1.
	recs := run(t, opt, []event{
		scrape(0, eng{engine: "0", ttft: []float64{1, 1, 1, 1}, ttftSum: 0.05}),
		scrape(1, eng{engine: "0", ttft: []float64{2, 5, 5, 5}, ttftSum: 1.0}, eng{engine: "1", ttft: []float64{0, 0, 0, 0}, created: unix(0.5)}),
		scrape(2, eng{engine: "0", ttft: []float64{2, 5, 5, 5}, ttftSum: 1.0}, eng{engine: "1", ttft: []float64{1, 4, 5, 6}, ttftSum: 4.0, created: unix(0.5)}),
		end(2, 1),
	})
	m := recs[0].Metrics
	// cumulative: le0.1 = 1+1 = 2, le0.5 = 4+4 = 8, le1 = 4+5 = 9, +Inf = 4+6 = 10
	// p50: rank 5 in (0.1,0.5]: 0.1 + 0.4*(5-2)/6 = 0.3
	want(t, m, "vllm/time_to_first_token_seconds/p50", 0.3)
	// p95: rank 9.5 in +Inf bucket: highest finite bound 1.0
	want(t, m, "vllm/time_to_first_token_seconds/p95", 1.0)
	// mean: Δsum/Δcount = (0.95 + 4.0) / 10
	want(t, m, "vllm/time_to_first_token_seconds/mean", 0.495)
	absent(t, m, "vllm/inter_token_latency_seconds/p50")
}

func TestHistogramQuantileCases(t *testing.T) {
	b := func(pairs ...float64) []page.Bucket {
		var out []page.Bucket
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, page.Bucket{Le: pairs[i], Count: pairs[i+1]})
		}
		return out
	}
	inf := math.Inf(1)
	tests := []struct {
		name string
		q    float64
		bs   []page.Bucket
		want float64
		ok   bool
	}{
		{"first bucket from zero", 0.25, b(1, 4, 2, 8, inf, 8), 0.5, true},
		{"second bucket", 0.75, b(1, 4, 2, 8, inf, 8), 1.5, true},
		{"in +Inf bucket", 0.99, b(1, 4, 2, 8, inf, 10), 2, true},
		{"unsorted input", 0.75, b(inf, 8, 2, 8, 1, 4), 1.5, true},
		{"no +Inf", 0.5, b(1, 4, 2, 8), 0, false},
		{"empty", 0.5, b(1, 0, inf, 0), 0, false},
		{"non-monotonic fixed", 0.5, b(1, 4, 2, 3, inf, 8), 1, true},
		{"q=0", 0, b(1, 4, 2, 8, inf, 8), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := HistogramQuantile(tt.q, tt.bs)
			if ok != tt.ok || ok && math.Abs(got-tt.want) > 1e-12 {
				t.Fatalf("got %v,%v want %v,%v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestPercentileMatchesNumpy(t *testing.T) {
	// numpy.percentile(x, 95) for these inputs
	tests := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 9.55},
		{[]float64{5}, 5},
		{[]float64{3, 1}, 2.9},
		{[]float64{0, 0, 0, 100}, 85},
	}
	for _, tt := range tests {
		got, _ := Percentile(append([]float64(nil), tt.xs...), 0.95)
		if math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("p95(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

// TestConservation drives a random fleet with restarts, failed scrapes, engines appearing and
// steps of random length, and checks that the step totals add up to the true increase.
func TestConservation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tr := NewTracker(opt)
	type engState struct {
		value, created float64
		up             bool
	}
	engines := []*engState{{value: 1000, created: unix(-1000), up: true}, {up: false}}
	var trueTotal, stepTotal float64
	lastFailed := false
	ts := 0.0
	var n int64
	for i := 0; i < 5000; i++ {
		ts += 0.5
		for k, e := range engines {
			if !e.up && rng.IntN(200) == 0 { // engine 1 starts late
				e.up, e.created, e.value = true, unix(ts-0.2), 0
				_ = k
			}
			if !e.up {
				continue
			}
			// A restart wipes what the engine counted since its last successful scrape; no scraper
			// can see that, so restarts happen here only right after a successful scrape.
			if !lastFailed && rng.IntN(300) == 0 {
				e.value, e.created = 0, unix(ts-0.1)
			}
			d := float64(rng.IntN(50))
			if i == 0 {
				d = 0 // what happened before the first scrape is no step's
			}
			e.value += d
			trueTotal += d
		}
		lastFailed = i > 0 && rng.IntN(10) == 0
		if lastFailed {
			tr.Observe(at(ts), target, nil, errTest)
		} else {
			var es []eng
			for k, e := range engines {
				if e.up {
					es = append(es, eng{engine: string(rune('0' + k)), preempt: e.value, created: e.created})
				}
			}
			tr.Observe(at(ts), target, mustPage(t, es...), nil)
		}
		if rng.IntN(40) == 0 || i == 4999 {
			n++
			stepTotal += tr.EndStep(n, at(ts)).Metrics["vllm/num_preemptions"]
		}
	}
	if stepTotal != trueTotal {
		t.Fatalf("sum of step totals %v, true increase %v", stepTotal, trueTotal)
	}
}

func TestNoScrapesStep(t *testing.T) {
	tr := NewTracker(opt)
	r := tr.EndStep(1, at(0))
	if r.Workers != 0 || len(r.Metrics) != 0 || r.DurationS != 0 {
		t.Fatalf("empty step: %+v", r)
	}
}

func TestOnInterval(t *testing.T) {
	var got []Interval
	o := Options{OnInterval: func(iv Interval) { got = append(got, iv.Clone()) }}
	run(t, o, []event{
		scrape(0, eng{engine: "0", queries: 100, hits: 50, gen: 10, running: 2}),
		scrape(2, eng{engine: "0", queries: 200, hits: 125, gen: 50, running: 3}),
		end(2, 1),
	})
	if len(got) != 2 || got[0].DT != 0 || got[1].DT != 2 {
		t.Fatalf("intervals %+v", got)
	}
	v := map[string]float64{}
	for _, x := range got[1].Values {
		v[x.Key] = x.V
	}
	if v["prefix_cache_hit_rate"] != 0.75 || v["generation_tokens_per_s"] != 20 || v["num_requests_running"] != 3 || v["prefix_cache_queries"] != 100 {
		t.Fatalf("values %v", v)
	}
	if _, ok := got[0].Value("prefix_cache_queries"); ok {
		t.Fatal("a first sight gave an increase")
	}
}

// BenchmarkIngest measures the work per scraped page on the collector's path: parsing a
// two-engine vLLM 0.20 page (done on the scrape goroutines) and feeding it to the tracker (done
// on the one collector goroutine). 1,000 engines at 2 Hz is 1,000 such pages a second.
func BenchmarkIngest(b *testing.B) {
	body := testkit.ReadFixture(b, "prometheus-client-render-vllm-0.20.prom")
	tr := NewTracker(Options{Scalars: true})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p, err := page.ParsePage(body)
		if err != nil {
			b.Fatal(err)
		}
		i++
		tr.Observe(at(float64(i)), target, p, nil)
		if i%120 == 0 {
			tr.EndStep(int64(i/120), at(float64(i)))
		}
	}
}

func BenchmarkObserve(b *testing.B) {
	body := testkit.ReadFixture(b, "prometheus-client-render-vllm-0.20.prom")
	p, err := page.ParsePage(body)
	if err != nil {
		b.Fatal(err)
	}
	tr := NewTracker(Options{Scalars: true})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		tr.Observe(at(float64(i)), target, p, nil)
		if i%120 == 0 {
			tr.EndStep(int64(i/120), at(float64(i)))
		}
	}
}
