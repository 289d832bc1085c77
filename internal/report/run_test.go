package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/timeline"
)

// testStep is step n of a made-up run: workers × samples samples, 0.5 s apart, with patterns
// that change from step to step so that the timelines of two steps differ.
func testStep(n int64, workers, samples int) *step.Record {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Minute)
	dur := 0.5 * float64(samples)
	r := &step.Record{Step: n, Start: start, End: start.Add(time.Duration(dur * float64(time.Second))), DurationS: dur, Workers: workers}
	r.Scrapes.OK = workers * samples
	tl := &step.Timeline{Start: start}
	var kvSum, kvMax, runSum float64
	for w := range workers {
		phase := float64(w)*0.9 + float64(n)*1.7
		gen := func(f func(x float64) float64) []step.Point {
			ps := make([]step.Point, samples)
			for i := range ps {
				t := 0.5 * float64(i+1)
				ps[i] = step.Point{OffsetS: t, Value: f(t / dur)}
			}
			return ps
		}
		wave := func(x float64) float64 { return 0.5 + 0.5*math.Sin(5*x+phase) }
		kv := gen(func(x float64) float64 { return math.Min(1, x*wave(x)*1.2) })
		running := gen(func(x float64) float64 { return math.Round(24 * wave(x) * (1 - x*0.8)) })
		for i := range kv {
			kvSum += kv[i].Value
			kvMax = max(kvMax, kv[i].Value)
			runSum += running[i].Value
		}
		tl.Workers = append(tl.Workers, step.WorkerTimeline{
			WorkerID: step.WorkerID{Target: fmt.Sprintf("http://10.0.%d.%d:8000/metrics", w/250, w%250+1), Engine: "0"},
			Series: map[string][]step.Point{
				"kv_cache_usage_perc":   kv,
				"num_requests_running":  running,
				"num_requests_waiting":  gen(func(x float64) float64 { return math.Round(12 * math.Max(0, 0.4-x)) }),
				"prefix_cache_hit_rate": gen(func(x float64) float64 { return 0.2 + 0.7*x*wave(x) }),
				"num_preemptions":       gen(func(x float64) float64 { return math.Floor(4 * math.Max(0, wave(x)-0.85) * 5) }),
				"generation_tokens":     gen(func(x float64) float64 { return 800 * wave(x+0.3) }),
			},
		})
	}
	r.Timeline = tl
	cnt := float64(workers * samples)
	x := float64(n)
	r.Metrics = map[string]float64{
		"vllm/prefix_cache_hit_rate":           0.3 + 0.5*(1-math.Exp(-x/8)),
		"vllm/prefix_cache_queries":            1e6 + 3e4*x,
		"vllm/prefix_cache_hits":               (0.3 + 0.5*(1-math.Exp(-x/8))) * (1e6 + 3e4*x),
		"vllm/kv_cache_usage_perc/mean":        kvSum / cnt,
		"vllm/kv_cache_usage_perc/max":         kvMax,
		"vllm/num_requests_running/mean":       runSum / cnt,
		"vllm/generation_tokens_per_s":         4000 + 300*math.Sin(x/3),
		"vllm/time_to_first_token_seconds/p50": 0.08 + 0.01*math.Sin(x),
		"vllm/time_to_first_token_seconds/p95": 0.3 + 0.05*math.Sin(x),
		"vllm/request_success/stop":            900 + x,
		"vllm/request_success/length":          40,
	}
	if n%3 != 0 {
		r.Metrics["vllm/num_preemptions"] = math.Floor(x / 2) // missing in some steps
	}
	return r
}

// writeRun writes a run folder: steps.jsonl of steps 1..steps and, when timelines is true,
// their timeline files.
func writeRun(t testing.TB, dir string, steps, workers, samples int, timelines bool) []*step.Record {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []*step.Record
	for n := range int64(steps) {
		r := testStep(n+1, workers, samples)
		line, err := step.MarshalLine(r)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(line)
		if timelines {
			if _, err := timeline.Write(dir, r); err != nil {
				t.Fatal(err)
			}
		}
		recs = append(recs, r)
	}
	return recs
}
