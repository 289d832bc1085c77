package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemoBadStraggler(t *testing.T) {
	for _, v := range []string{"0.5", "0", "-1", "NaN", "x"} {
		t.Run(v, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := demoWith(context.Background(), []string{"--straggler", v, "--out", t.TempDir()}, &out, &errb); code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, errb.String())
			}
			want := "--straggler must be a number of at least 1"
			if v == "x" || v == "NaN" {
				want = `invalid value "` + v + `" for flag -straggler`
			}
			if !strings.Contains(errb.String(), want) {
				t.Errorf("stderr %q lacks %q", errb.String(), want)
			}
		})
	}
}

// TestDemoStraggler runs one step of the demo with a straggler and reads its effect back from
// the step record, through the whole scrape pipeline: the straggler (the last engine) generated
// about four times the tokens of the other engine.
func TestDemoStraggler(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"--steps", "1", "--servers", "1", "--dp", "2", "--speed", "12", "--interval", "0.2", "--straggler", "4",
		"--plots=false", "--terminal-timelines=false", "--out", dir}
	if code := demoWith(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "Straggler: engine 1 of ") {
		t.Errorf("the demo does not say which engine straggles:\n%s", out.String())
	}
	steps, _ := readSteps(t, filepath.Join(dir, "steps.jsonl"))
	if len(steps) != 1 || len(steps[0].PerWorker) != 2 {
		t.Fatalf("want 1 step of 2 workers, got %+v", steps)
	}
	gen := map[string]float64{}
	for _, w := range steps[0].PerWorker {
		gen[w.Engine] = w.Metrics["vllm/generation_tokens"]
	}
	ratio := gen["1"] / gen["0"]
	t.Logf("generation tokens per engine: %v (straggler/other %.2f)", gen, ratio)
	if ratio < 3 || ratio > 5.5 {
		t.Errorf("the straggler generated %.2f times the other engine's tokens, want about 4: %v", ratio, gen)
	}
}
