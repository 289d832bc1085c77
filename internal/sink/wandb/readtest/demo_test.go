package readtest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/e2etest"
)

// TestDemoWritesWandb runs "vllmstat demo" with the wandb sink and checks with W&B's own reader
// that the offline run holds exactly the step records of steps.jsonl, plots as files, then a
// clean exit.
func TestDemoWritesWandb(t *testing.T) {
	out := t.TempDir()
	e2etest.Demo(t, out, "--sinks", "jsonl,wandb")
	compareRun(t, out, "", "", true)
}

// TestRunWritesWandb runs "vllmstat run" against a simulated fleet with sinks [jsonl, wandb]
// from a config file, stops it as SIGINT would, and checks the offline run with W&B's reader.
func TestRunWritesWandb(t *testing.T) {
	out := t.TempDir()
	e2etest.Run(t, out, "sinks: [jsonl, {type: wandb, project: rl, group: grpo}]\nper_worker: true\n", 3)
	compareRun(t, out, "rl", "grpo", false)
}

// compareRun reads the run's offline W&B run with W&B's reader and compares it with steps.jsonl:
// the Run record first (with project and group when given), one History record per step with
// exactly the step's metrics, Files records when plots are on, and an Exit record with code 0.
func compareRun(t *testing.T, out, project, group string, plots bool) {
	t.Helper()
	rs := e2etest.Steps(t, out)
	files, _ := filepath.Glob(filepath.Join(out, "wandb", "offline-run-*", "run-*.wandb"))
	if len(files) != 1 {
		t.Fatalf("run files %v", files)
	}
	recs, err := readRun(files[0])
	if err != nil {
		t.Fatalf("W&B reader: %v", err)
	}
	last := recs[len(recs)-1]
	if len(rs) < 2 || len(recs) < len(rs)+3 || recs[0].GetRun() == nil || last.GetExit() == nil || last.GetExit().GetExitCode() != 0 {
		t.Fatalf("%d records for %d steps; want run, one history per step, summary, exit 0", len(recs), len(rs))
	}
	if project != "" && (recs[0].GetRun().GetProject() != project || recs[0].GetRun().GetRunGroup() != group) {
		t.Errorf("run project %q group %q, want %q and %q", recs[0].GetRun().GetProject(), recs[0].GetRun().GetRunGroup(), project, group)
	}
	var hist []int
	nfiles := 0
	for i, rec := range recs {
		switch {
		case rec.GetHistory() != nil:
			hist = append(hist, i)
		case rec.GetFiles() != nil:
			nfiles++ // each step's timeline plots come as files
		}
	}
	if len(hist) != len(rs) || plots != (nfiles > 0) {
		t.Fatalf("%d history records for %d steps, %d files records (plots %v)", len(hist), len(rs), nfiles, plots)
	}
	for i, r := range rs {
		other := checkHistory(t, recs[hist[i]].GetHistory(), r, rs[0].Start, false)
		for k, v := range other {
			if !strings.HasPrefix(k, "plots/") || !strings.Contains(v, "image-file") {
				t.Errorf("step %d: key %s = %s is not in steps.jsonl", r.Step, k, v)
			}
		}
	}
}
