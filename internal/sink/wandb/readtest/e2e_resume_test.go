package readtest

import (
	"slices"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/e2etest"
)

// TestRunResumedWritesOneRun runs "vllmstat run" twice into one out_dir: the second run
// continues the first's steps, and its W&B instance continues the first's run: the same run id,
// a Run record that says it resumed, and between the two instances every step of steps.jsonl
// once, in order, with its values.
func TestRunResumedWritesOneRun(t *testing.T) {
	out := t.TempDir()
	const yaml = "sinks: [jsonl, {type: wandb, project: rl}]\n"
	e2etest.Run(t, out, yaml, 2)
	first := len(e2etest.Steps(t, out))
	e2etest.Run(t, out, yaml, first+2)
	rs := e2etest.Steps(t, out)
	for i := 1; i < len(rs); i++ {
		if rs[i].Step <= rs[i-1].Step {
			t.Fatalf("steps.jsonl: step %d after %d", rs[i].Step, rs[i-1].Step)
		}
	}
	files := runFiles(t, out)
	if len(files) != 2 {
		t.Fatalf("run logs %v, want two instances of one run", files)
	}
	ins := []instance{readInstance(t, files[0]), readInstance(t, files[1])}
	slices.SortFunc(ins, func(a, b instance) int { return a.run.GetStartTime().AsTime().Compare(b.run.GetStartTime().AsTime()) })
	if ins[0].run.GetResumed() || !ins[1].run.GetResumed() || ins[0].run.GetRunId() != ins[1].run.GetRunId() {
		t.Fatalf("run records %v and %v: want the second to resume the first's run", ins[0].run, ins[1].run)
	}
	var hist []int64
	for _, in := range ins {
		for _, h := range in.history {
			hist = append(hist, h.GetStep().GetNum())
		}
	}
	var want []int64
	for _, r := range rs {
		want = append(want, r.Step)
	}
	if !slices.Equal(hist, want) {
		t.Fatalf("history steps %v, want those of steps.jsonl %v", hist, want)
	}
	if ins[1].run.GetStartingStep() != rs[first].Step {
		t.Errorf("starting_step %d, want the second run's first step %d", ins[1].run.GetStartingStep(), rs[first].Step)
	}
	for i, r := range rs {
		in, j := ins[0], i
		start := rs[0].Start
		if i >= first {
			in, j = ins[1], i-first
			start = rs[first].Start.Add(-time.Duration(lastRuntime(t, ins[0]) * float64(time.Second)))
		}
		if other := checkHistory(t, in.history[j], r, start, false); len(other) > 0 {
			t.Errorf("step %d: keys not in steps.jsonl %v", r.Step, other)
		}
	}
}
