package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/timeline"
)

// addTestPhases gives testStep's record r the phases of a colocated RL loop: from step 2 on,
// a rollout over the first 40% of the step, whose generation rate and KV and running means
// are the whole step's over 0.4; every third step an eval phase too. Step 1 has none, as a
// record of an older vllmstat.
func addTestPhases(r *step.Record) {
	if r.Step < 2 {
		return
	}
	m := r.Metrics
	r.Phases = map[string]*step.Phase{rolloutPhase: {DurationS: 0.4 * r.DurationS, Intervals: 1, Metrics: map[string]float64{
		"vllm/generation_tokens_per_s":         m["vllm/generation_tokens_per_s"] / 0.4,
		"vllm/kv_cache_usage_perc/mean":        m["vllm/kv_cache_usage_perc/mean"] / 0.4,
		"vllm/kv_cache_usage_perc/max":         m["vllm/kv_cache_usage_perc/max"],
		"vllm/num_requests_running/mean":       m["vllm/num_requests_running/mean"] / 0.4,
		"vllm/prefix_cache_hit_rate":           m["vllm/prefix_cache_hit_rate"] + 0.05,
		"vllm/time_to_first_token_seconds/p50": m["vllm/time_to_first_token_seconds/p50"],
	}}}
	if r.Step%3 == 0 {
		r.Phases["eval"] = &step.Phase{DurationS: 0.1 * r.DurationS, Intervals: 2, Metrics: map[string]float64{
			"vllm/generation_tokens_per_s":  3000,
			"vllm/kv_cache_usage_perc/mean": 0.3,
			// a statistic the whole step has not
			"vllm/time_to_first_token_seconds/p99": 0.5,
		}}
	}
}

// writeSteps writes recs to dir's steps.jsonl, appending to it, and their timeline files
// when timelines is true.
func writeSteps(t testing.TB, dir string, recs []*step.Record, timelines bool) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "steps.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, r := range recs {
		line, err := step.MarshalLine(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(line); err != nil {
			t.Fatal(err)
		}
		if timelines {
			if _, err := timeline.Write(dir, r); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// writePhasedRun writes a run of steps 1..steps whose records have addTestPhases' phases.
func writePhasedRun(t testing.TB, dir string, steps, workers int) []*step.Record {
	t.Helper()
	var recs []*step.Record
	for n := range int64(steps) {
		r := testStep(n+1, workers, 40)
		addTestPhases(r)
		recs = append(recs, r)
	}
	writeSteps(t, dir, recs, true)
	return recs
}

func TestReportPhases(t *testing.T) {
	dir := t.TempDir()
	writePhasedRun(t, dir, 6, 3)
	recs, err := ReadSteps(filepath.Join(dir, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := build("phases", recs, nil, newDirSource(dir), Options{}.withDefaults(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if *keep != "" {
		var b bytes.Buffer
		render(&b, d)
		os.WriteFile(filepath.Join(*keep, "phases.html"), b.Bytes(), 0o644)
	}

	// The rollout first, then the eval, each with its time in every step, null without it.
	if len(d.Phases) != 2 || d.Phases[0].Name != "rollout" || d.Phases[1].Name != "eval" {
		t.Fatalf("phases %+v, want rollout then eval", d.Phases)
	}
	if got := nulls(d.Phases[0].Dur); !slices.Equal(got, []bool{true, false, false, false, false, false}) || d.Phases[0].Dur[1] != 8 {
		t.Errorf("rollout's durations %v, want none in step 1 and 8 s (40%% of 20 s) in step 2", d.Phases[0].Dur)
	}
	if got := nulls(d.Phases[1].Dur); !slices.Equal(got, []bool{true, true, false, true, true, false}) || d.Phases[1].Runs[2] != 2 {
		t.Errorf("eval's durations %v and runs %v, want them in steps 3 and 6, open twice", d.Phases[1].Dur, d.Phases[1].Runs)
	}

	// The whole step's keys, sorted, then the rollout's and the eval's, as trackers log them.
	whole := len(recs[1].Metrics)
	if !slices.IsSorted(d.Keys[:whole]) || strings.Count(strings.Join(d.Keys[:whole], " "), "rollout") != 0 {
		t.Errorf("the whole step's keys are not first: %v", d.Keys)
	}
	wantPhaseKeys := []string{
		"vllm/rollout/generation_tokens_per_s", "vllm/rollout/kv_cache_usage_perc/max", "vllm/rollout/kv_cache_usage_perc/mean",
		"vllm/rollout/num_requests_running/mean", "vllm/rollout/prefix_cache_hit_rate", "vllm/rollout/time_to_first_token_seconds/p50",
		"vllm/eval/generation_tokens_per_s", "vllm/eval/kv_cache_usage_perc/mean", "vllm/eval/time_to_first_token_seconds/p99",
	}
	if !slices.Equal(d.Keys[whole:], wantPhaseKeys) {
		t.Errorf("phase keys %v\nwant %v", d.Keys[whole:], wantPhaseKeys)
	}
	for i, k := range d.Keys {
		phase, _, _ := strings.Cut(strings.TrimPrefix(k, "vllm/"), "/")
		if i < whole && (d.KeyPhase[i] != "" || d.KeyOf[i] != k) || i >= whole && (d.KeyPhase[i] != phase || step.PhaseKey("vllm", phase, d.KeyOf[i]) != k) {
			t.Errorf("key %s: phase %q, of %q", k, d.KeyPhase[i], d.KeyOf[i])
		}
	}
	i := slices.Index(d.Keys, "vllm/rollout/generation_tokens_per_s")
	if got := nulls(d.Values[i]); !slices.Equal(got, []bool{true, false, false, false, false, false}) || d.Values[i][1] != recs[1].Phases["rollout"].Metrics["vllm/generation_tokens_per_s"] {
		t.Errorf("rollout's generation rate %v", d.Values[i])
	}

	// A phase's key is in the chart of the whole step's key, after it.
	charts := map[string][]string{}
	for _, g := range d.Groups {
		for _, c := range g.Charts {
			for _, k := range c.Keys {
				charts[c.ID] = append(charts[c.ID], d.Keys[k])
			}
		}
	}
	for title, want := range map[string][]string{
		"generation_tokens_per_s": {"vllm/generation_tokens_per_s", "vllm/rollout/generation_tokens_per_s", "vllm/eval/generation_tokens_per_s"},
		"kv_cache_usage_perc": {"vllm/kv_cache_usage_perc/max", "vllm/kv_cache_usage_perc/mean", "vllm/rollout/kv_cache_usage_perc/max",
			"vllm/rollout/kv_cache_usage_perc/mean", "vllm/eval/kv_cache_usage_perc/mean"},
		"prefix_cache_hit_rate": {"vllm/prefix_cache_hit_rate", "vllm/rollout/prefix_cache_hit_rate"},
	} {
		if !slices.Equal(charts[title], want) {
			t.Errorf("chart %s holds %v, want %v", title, charts[title], want)
		}
	}
	if _, ok := charts["rollout"]; ok {
		t.Errorf("a chart of its own for the phase's keys: %v", charts)
	}

	// The step view's figures are keys of the whole step.
	for _, f := range d.PhaseFigures {
		if !slices.Contains(d.Keys, "vllm/"+f.Key) && f.Key != "prompt_tokens_per_s" && f.Key != "num_requests_waiting/mean" {
			t.Errorf("figure %s is no key of the test run", f.Key)
		}
	}
}

// TestReportWithoutPhases: records without phases give a page without any of the phase fields.
func TestReportWithoutPhases(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir, 3, 2, 10, true)
	var b bytes.Buffer
	if err := Write(&b, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"phases"`, `"keyPhase"`, `"keyOf"`, `"phaseFigures"`} {
		if bytes.Contains(b.Bytes(), []byte(field)) {
			t.Errorf("the page of a run without phases has %s", field)
		}
	}
}

// nulls tells which values are null in the page (NaN here).
func nulls(vs values) []bool {
	out := make([]bool, len(vs))
	for i, v := range vs {
		out[i] = math.IsNaN(v)
	}
	return out
}
