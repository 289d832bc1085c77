package sink_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/vllmstat/vllmstat/internal/e2etest"
	"github.com/vllmstat/vllmstat/internal/keyset"
	"github.com/vllmstat/vllmstat/internal/report"
	"github.com/vllmstat/vllmstat/internal/step"
)

// TestRunKeyedJSONL runs "vllmstat run" with a second jsonl file of the summary keys, then
// again resumed from step 1 (which cuts the later steps out): the file holds the steps of steps.jsonl, once each and in order,
// with the summary's keys of each and their values.
func TestRunKeyedJSONL(t *testing.T) {
	out := t.TempDir()
	lean := filepath.Join(out, "lean.jsonl")
	yaml := "sinks: [jsonl, {type: jsonl, path: " + lean + ", keys: summary}]\n"
	e2etest.Run(t, out, yaml, 3)
	// The second run cuts steps.jsonl back to one line, then writes until it has one more line
	// than the first run left: its own steps, whatever the first run's count.
	e2etest.Run(t, out, yaml+"resume_from: 1\n", len(e2etest.Steps(t, out))+1)

	full := e2etest.Steps(t, out)
	got := readRecords(t, lean)
	var fullSteps, gotSteps []int64
	for _, r := range full {
		fullSteps = append(fullSteps, r.Step)
	}
	for _, r := range got {
		gotSteps = append(gotSteps, r.Step)
	}
	if !slices.Equal(gotSteps, fullSteps) || len(got) < 4 {
		t.Fatalf("lean.jsonl holds steps %v, steps.jsonl %v", gotSteps, fullSteps)
	}
	if cut, _ := filepath.Glob(lean + ".cut-*"); len(cut) != 1 {
		t.Errorf("files of the steps cut from lean.jsonl: %v, want one", cut)
	}
	set := keyset.Settings{Keys: keyset.Summary}.Compile("vllm")
	for i, r := range got {
		f := full[i]
		want := 0
		for k, v := range f.Metrics {
			if !set.Keep(k) {
				continue
			}
			want++
			if g, ok := r.Metrics[k]; !ok || g != v {
				t.Errorf("step %d %s: %v (present %v), want %v", r.Step, k, g, ok, v)
			}
		}
		if len(r.Metrics) != want || want == 0 || want > 40 || len(f.Metrics) <= want {
			t.Errorf("step %d: %d keys, want the summary's %d of %d", r.Step, len(r.Metrics), want, len(f.Metrics))
		}
		if r.Workers != f.Workers || !r.End.Equal(f.End) || r.DurationS != f.DurationS {
			t.Errorf("step %d: the step's own fields differ from steps.jsonl's", r.Step)
		}
	}
}

func readRecords(t *testing.T, path string) []*step.Record {
	t.Helper()
	out, err := report.ReadSteps(path)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
