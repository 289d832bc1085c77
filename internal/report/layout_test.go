package report

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/timeline"
)

// headlineRun is four steps whose headline figures are easy to work out: see TestHeadline.
func headlineRun() []*step.Record {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	type s struct {
		dur                 float64
		workers, failed     int
		hits, queries, rate float64 // rate NaN: no hit rate (no queries)
		pre                 float64 // NaN: no key
		gen, genRate        float64
		prompt              float64 // NaN: no key
		p50, p95, tail      float64
	}
	nan := math.NaN()
	var recs []*step.Record
	for i, x := range []s{
		{10, 4, 0, 50, 100, 0.5, 0, 1000, 100, 2000, 0.1, 1, 0.01},
		{10, 4, 1, 90, 100, 0.9, 3, 2000, 200, 2000, 0.2, 2, 0.02},
		{20, 3, 0, 0, 0, nan, nan, 4000, 200, nan, 0.3, 3, 0.03},
		{10, 4, 0, 60, 200, 0.3, 5, 1000, 100, nan, 0.4, 4, 0.04},
	} {
		r := &step.Record{Step: int64(i + 1), Start: start, End: start.Add(time.Duration(x.dur) * time.Second), DurationS: x.dur, Workers: x.workers}
		start = r.End
		r.Scrapes.OK, r.Scrapes.Failed = 10, x.failed
		r.Metrics = map[string]float64{
			"vllm/prefix_cache_hits": x.hits, "vllm/prefix_cache_queries": x.queries,
			"vllm/generation_tokens": x.gen, "vllm/generation_tokens_per_s": x.genRate,
			"vllm/time_to_first_token_seconds/p50": x.p50, "vllm/time_to_first_token_seconds/p95": x.p95,
			"vllm/straggler_tail_s": x.tail,
		}
		for k, v := range map[string]float64{"vllm/prefix_cache_hit_rate": x.rate, "vllm/num_preemptions": x.pre, "vllm/prompt_tokens": x.prompt} {
			if !math.IsNaN(v) {
				r.Metrics[k] = v
			}
		}
		recs = append(recs, r)
	}
	recs[3].Phases = map[string]*step.Phase{rolloutPhase: {DurationS: 5, Intervals: 1, Metrics: map[string]float64{"vllm/generation_tokens_per_s": 180}}}
	return recs
}

func TestHeadline(t *testing.T) {
	d, err := build("t", headlineRun(), nil, newDirSource(t.TempDir()), Options{}.withDefaults(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range d.Headline {
		got = append(got, strings.ReplaceAll(fmt.Sprintf("%s | %s | %s | %s | %d", x.ID, x.Label, x.Value, x.Sub, len(x.Spark)), nbsp, " "))
	}
	want := []string{
		"steps | Steps | 4 | steps 1–4 · 50 s in steps | 0",
		"workers | Workers | 4 | 3–4 across steps · 1 failed scrape | 0",
		// 200 hits of 400 queried tokens; step 3 queried none.
		"hit-rate | Prefix-cache hit rate | 50.0% | all hits / all queries (400 tokens) · last step 30.0% | 1",
		// Step 3 has no preemptions key.
		"preemptions | Preemptions | 8 | in 2 of 3 steps · last step 5 | 1",
		// 8,000 tokens in 50 s; prompt tokens 4,000 in the 20 s of the steps that have them; the
		// rollout 180 tok/s in its 5 s.
		"throughput | Generation throughput | 160 tok/s | all tokens / all steps' time · prompt 200 tok/s · in the rollout 180 tok/s | 1",
		"ttft | TTFT p50 / p95 | 250 ms / 2.5 s | median of the steps' · last step 400 ms / 4 s | 2",
		"straggler-tail | Straggler tail | 10 ms → 40 ms | fit, first → last step · rising, +10 ms per step (over 4 steps) · last step 40 ms | 1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("headline:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A run without the figures' keys has the steps and workers only.
	bare := headlineRun()
	for _, r := range bare {
		r.Metrics, r.Phases = map[string]float64{"vllm/something_new": 1}, nil
	}
	d, err = build("t", bare, nil, newDirSource(t.TempDir()), Options{}.withDefaults(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range d.Headline {
		ids = append(ids, x.ID)
	}
	if !slices.Equal(ids, []string{"steps", "workers"}) {
		t.Errorf("headline of a run without its keys: %v", ids)
	}
}

func TestTrend(t *testing.T) {
	for _, tt := range []struct {
		ys    []float64
		word  string
		slope float64
	}{
		{[]float64{1, 2, 3}, "rising", 1},
		{[]float64{3, 2, 1}, "falling", -1},
		{[]float64{1, 1.05, 1}, "flat", 0},
		{[]float64{0, 0, 0}, "flat", 0},
		{[]float64{1, 1.02, 1.04, 1.06}, "flat", 0.02}, // 6% over the run
	} {
		xs := make([]float64, len(tt.ys))
		for i := range xs {
			xs[i] = float64(i + 1)
		}
		f := trend(xs, tt.ys)
		if f.word != tt.word || math.Abs(f.slope-tt.slope) > 1e-9 {
			t.Errorf("trend(%v) = %s, %g; want %s, %g", tt.ys, f.word, f.slope, tt.word, tt.slope)
		}
		// The fit's ends are on its line.
		if got := f.to - f.from; f.from > 0 && f.to > 0 && math.Abs(got-f.slope*(xs[len(xs)-1]-xs[0])) > 1e-9 {
			t.Errorf("trend(%v) goes from %g to %g, at slope %g", tt.ys, f.from, f.to, f.slope)
		}
	}
}

// nbsp joins a number to its unit in the headline.
const nbsp = "\u00a0"

func TestFormats(t *testing.T) {
	if got := seconds(0.0667); got != "66.7"+nbsp+"ms" {
		t.Errorf("seconds(0.0667) = %q: want the unit joined by a no-break space", got)
	}
	for _, tt := range []struct{ got, want string }{
		{count(0), "0"}, {count(1234567), "1.23M"}, {count(123456), "123,456"}, {count(2.5), "2.5"},
		{perSecond(32567), "32.6k tok/s"}, {perSecond(999), "999 tok/s"}, {perSecond(2.5e6), "2.5M tok/s"},
		{seconds(0), "0 s"}, {seconds(4.1173e-5), "41.2 µs"}, {seconds(0.0667), "66.7 ms"}, {seconds(2.2204), "2.22 s"},
		{percent(0.94103), "94.1%"},
	} {
		if got := strings.ReplaceAll(tt.got, nbsp, " "); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// zeroRun is testStep's run with keys that are 0 in every step: the external prefix cache's
// counters (vLLM 0.20 registers them always) also in the rollout, some finish reasons, a
// rollout's statistic that the whole step has not, a key with markup in its name; and the
// rollout's preemptions, zero where the whole step's are not.
func zeroRun(t testing.TB, dir string, steps int) []*step.Record {
	t.Helper()
	var recs []*step.Record
	for n := range int64(steps) {
		r := testStep(n+1, 3, 10)
		r.Metrics["vllm/external_prefix_cache_queries"] = 0
		r.Metrics["vllm/external_prefix_cache_hits"] = 0
		r.Metrics["vllm/request_success/abort"] = 0
		r.Metrics[`vllm/<img src=z onerror="window.__xss=4">`] = 0
		if n != 1 { // absent in step 2: still zero in every step that has it
			r.Metrics["vllm/request_success/error"] = 0
		}
		r.Phases = map[string]*step.Phase{rolloutPhase: {DurationS: 1, Intervals: 1, Metrics: map[string]float64{
			"vllm/generation_tokens_per_s": 5, "vllm/num_preemptions": 0, "vllm/external_prefix_cache_queries": 0,
			"vllm/time_to_first_token_seconds/p99": 0}}}
		recs = append(recs, r)
	}
	writeSteps(t, dir, recs, true)
	return recs
}

func TestFoldZeros(t *testing.T) {
	dir := t.TempDir()
	recs := zeroRun(t, dir, 4)
	d, err := build("t", recs, nil, newDirSource(dir), Options{}.withDefaults(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var zero []string
	for _, c := range d.Zero {
		var ks []string
		for _, k := range c.Keys {
			ks = append(ks, d.Keys[k])
		}
		zero = append(zero, c.ID+" ("+c.Title+") = "+strings.Join(ks, ","))
	}
	want := []string{
		"external_prefix_cache_queries (External prefix cache queries) = vllm/external_prefix_cache_queries,vllm/rollout/external_prefix_cache_queries",
		"external_prefix_cache_hits (External prefix cache hits) = vllm/external_prefix_cache_hits",
		"request_success (Requests finished) = vllm/request_success/abort,vllm/request_success/error",
		"time_to_first_token_seconds (Time to first token) = vllm/rollout/time_to_first_token_seconds/p99",
		`<img src=z onerror="window.__xss=4"> (<img src=z onerror="window.__xss=4">) = vllm/<img src=z onerror="window.__xss=4">`,
	}
	if strings.Join(zero, "\n") != strings.Join(want, "\n") {
		t.Errorf("always zero:\n%s\nwant:\n%s", strings.Join(zero, "\n"), strings.Join(want, "\n"))
	}
	// Every key is in one chart or in the line, once; a chart keeps the keys that are not zero.
	seen := map[int]int{}
	charts := map[string][]string{}
	for _, g := range d.Groups {
		for _, c := range g.Charts {
			for _, k := range c.Keys {
				seen[k]++
				charts[c.ID] = append(charts[c.ID], d.Keys[k])
			}
		}
	}
	for _, c := range d.Zero {
		for _, k := range c.Keys {
			seen[k]++
		}
	}
	for k := range d.Keys {
		if seen[k] != 1 {
			t.Errorf("key %s is in %d places", d.Keys[k], seen[k])
		}
	}
	if got := charts["request_success"]; !slices.Equal(got, []string{"vllm/request_success/length", "vllm/request_success/stop"}) {
		t.Errorf("finish reasons charted: %v", got)
	}
	if got := charts["num_preemptions"]; !slices.Equal(got, []string{"vllm/num_preemptions", "vllm/rollout/num_preemptions"}) {
		t.Errorf("preemptions charted: %v", got)
	}
	if _, ok := charts["external_prefix_cache_queries"]; ok {
		t.Error("a chart of a key that is zero in every step")
	}
}

// A run written into the folder of an earlier, longer one: the earlier run's timeline files of
// steps 3 to 5 are still there, and so is its step 2's, since the new run wrote none for it.
func TestTimelineFilesOfTheseSteps(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir, 5, 2, 10, true)
	var recs []*step.Record
	for n := range int64(2) {
		r := testStep(n+1, 3, 10)
		r.Start, r.End = r.Start.Add(time.Hour), r.End.Add(time.Hour)
		recs = append(recs, r)
	}
	os.Remove(filepath.Join(dir, "steps.jsonl"))
	writeSteps(t, dir, recs[:1], true)
	writeSteps(t, dir, recs[1:], false)
	if files, _ := timeline.Steps(dir); len(files) != 5 {
		t.Fatalf("timeline files of steps %v, want 5", files)
	}
	got, err := ReadSteps(filepath.Join(dir, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := build("t", got, nil, newDirSource(dir), Options{}.withDefaults(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if d.TimelineFiles != 1 || len(d.Timelines) != 1 || d.Timelines["1"] == nil || len(d.Timelines["1"].Workers) != 3 {
		t.Errorf("%d timeline files, timelines of steps %v; want step 1's alone, of 3 workers", d.TimelineFiles, slices.Sorted(maps.Keys(d.Timelines)))
	}
	if !slices.ContainsFunc(d.Notes, func(n string) bool {
		return strings.HasPrefix(n, "4 timeline files in timelines/ are not of the steps in steps.jsonl")
	}) {
		t.Errorf("notes %q", d.Notes)
	}
}

// A worker has one colour index in every step, whatever its row in the step's timeline.
func TestColorWorkers(t *testing.T) {
	dir := t.TempDir()
	var recs []*step.Record
	for n := range int64(3) {
		r := testStep(n+1, 4, 10)
		switch n {
		case 1:
			r.Timeline.Workers = r.Timeline.Workers[1:] // the first worker is gone
		case 2:
			r.Timeline.Workers = r.Timeline.Workers[2:]
		}
		recs = append(recs, r)
	}
	writeSteps(t, dir, recs, true)
	d, err := build("t", recs, nil, newDirSource(dir), Options{}.withDefaults(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string][]int{"1": {0, 1, 2, 3}, "2": {1, 2, 3}, "3": {2, 3}} {
		if got := d.Timelines[n].Colors; !slices.Equal(got, want) {
			t.Errorf("step %s: colours %v, want %v", n, got, want)
		}
	}
}

// TestStragglerTileAgrees checks that the straggler tail tile's figures and words say the same:
// a tail that starts at 42.5 µs in a step with nothing to wait for, jumps to over a second and
// then falls to 495 ms is falling by its fit, so the figures shown are the fit's, from higher to
// lower, with the last step's own value beside them.
func TestStragglerTileAgrees(t *testing.T) {
	for _, tt := range []struct {
		name string
		ys   []float64
		word string
	}{
		{"a first step without stragglers, then falling", []float64{42.5e-6, 1.2, 1.1, 1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.495}, "falling"},
		{"rising", []float64{0.01, 0.02, 0.03, 0.04}, "rising"},
		{"a last step without stragglers after a rise", []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1e-6}, "rising"},
		{"flat", []float64{0.5, 0.51, 0.5, 0.49, 0.5}, "flat"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
			var recs []*step.Record
			for i, y := range tt.ys {
				recs = append(recs, &step.Record{Step: int64(i + 1), Start: start, End: start.Add(10 * time.Second), DurationS: 10, Workers: 4,
					Metrics: map[string]float64{"vllm/straggler_tail_s": y}})
				start = start.Add(10 * time.Second)
			}
			d, err := build("t", recs, nil, newDirSource(t.TempDir()), Options{}.withDefaults(), time.Unix(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(d.Headline, func(x tile) bool { return x.ID == "straggler-tail" })
			if i < 0 {
				t.Fatalf("no straggler tail tile in %+v", d.Headline)
			}
			tl := d.Headline[i]
			from, to, ok := strings.Cut(strings.ReplaceAll(tl.Value, nbsp, " "), " → ")
			if !ok {
				t.Fatalf("value %q: want first → last", tl.Value)
			}
			a, b := parseSeconds(t, from), parseSeconds(t, to)
			sub := strings.ReplaceAll(tl.Sub, nbsp, " ")
			if !strings.Contains(sub, " "+tt.word) {
				t.Errorf("sub %q: want %s", sub, tt.word)
			}
			switch tt.word {
			case "falling":
				if !(b < a) || !strings.Contains(sub, "−") {
					t.Errorf("falling, but the tile shows %q · %q", tl.Value, sub)
				}
			case "rising":
				if !(b > a) || !strings.Contains(sub, "+") {
					t.Errorf("rising, but the tile shows %q · %q", tl.Value, sub)
				}
			}
			if want := "last step " + strings.ReplaceAll(seconds(tt.ys[len(tt.ys)-1]), nbsp, " "); !strings.Contains(sub, want) {
				t.Errorf("sub %q: want %q", sub, want)
			}
		})
	}
}

// parseSeconds reads a time as seconds() writes it.
func parseSeconds(t *testing.T, s string) float64 {
	t.Helper()
	num, unit, _ := strings.Cut(s, " ")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return v * map[string]float64{"s": 1, "ms": 1e-3, "µs": 1e-6}[unit]
}
