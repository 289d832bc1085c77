package readtest

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	spb "github.com/wandb/wandb/core/pkg/service_go_proto"

	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/sink/wandb"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit/sinkspec"
)

// openSink opens the wandb sink as a run does: the registry's type, its settings parsed and
// opened with the run's environment.
func openSink(t *testing.T, out, settings string, resume bool) *wandb.Writer {
	t.Helper()
	env := sink.Env{OutDir: out, MetricPrefix: "vllm", Resume: resume}
	p, err := wandb.Type.Parse(env, sinkspec.Parse(t, "sinks[0]", settings))
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Open(env)
	if err != nil {
		t.Fatal(err)
	}
	return s.(*wandb.Writer)
}

// runInto writes rs as one run into out and returns its log.
func runInto(t *testing.T, out, settings string, resume bool, rs []*step.Record) string {
	t.Helper()
	w := openSink(t, out, settings, resume)
	for _, r := range rs {
		if err := w.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

// instance is one offline run directory's log, read with W&B's reader.
type instance struct {
	run     *spb.RunRecord
	history []*spb.HistoryRecord
	exit    *spb.RunExitRecord
}

func readInstance(t *testing.T, path string) instance {
	t.Helper()
	recs, err := readRun(path)
	if err != nil {
		t.Fatalf("W&B reader, %s: %v", path, err)
	}
	var in instance
	for _, rec := range recs {
		switch {
		case rec.GetRun() != nil:
			in.run = rec.GetRun()
		case rec.GetHistory() != nil:
			in.history = append(in.history, rec.GetHistory())
		case rec.GetExit() != nil:
			in.exit = rec.GetExit()
		}
	}
	if in.run == nil {
		t.Fatalf("%s: no Run record", path)
	}
	return in
}

// lastRuntime is the _runtime of an instance's last History record.
func lastRuntime(t *testing.T, in instance) float64 {
	t.Helper()
	for _, it := range in.history[len(in.history)-1].GetItem() {
		if it.GetKey() == "_runtime" {
			return number(t, it.GetValueJson())
		}
	}
	t.Fatal("no _runtime in the last History record")
	return 0
}

// runFiles lists out's offline run logs.
func runFiles(t *testing.T, out string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(out, "wandb", "offline-run-*", "run-*.wandb"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkContinues checks that next is a resumed instance of prev's run, as an online resumed
// run's Run record says it (W&B's runbranch): the same run id, entity and project, resumed,
// starting_step its first step and runtime prev's; its steps follow prev's, its start time
// (by which W&B's sync orders the instances of one run) is later, and its _runtime goes on
// from prev's last.
func checkContinues(t *testing.T, prev, next instance, rs []*step.Record) {
	t.Helper()
	p, n := prev.run, next.run
	if n.GetRunId() != p.GetRunId() || n.GetEntity() != p.GetEntity() || n.GetProject() != p.GetProject() {
		t.Errorf("run %s/%s/%s does not continue %s/%s/%s", n.GetEntity(), n.GetProject(), n.GetRunId(), p.GetEntity(), p.GetProject(), p.GetRunId())
	}
	if !n.GetResumed() || n.GetStartingStep() != rs[0].Step {
		t.Errorf("run record resumed %v starting_step %d, want true and %d", n.GetResumed(), n.GetStartingStep(), rs[0].Step)
	}
	if !n.GetStartTime().AsTime().After(p.GetStartTime().AsTime()) {
		t.Errorf("start time %v is not after the earlier instance's %v", n.GetStartTime().AsTime(), p.GetStartTime().AsTime())
	}
	offset := lastRuntime(t, prev)
	if n.GetRuntime() != int32(offset) {
		t.Errorf("run record runtime %d, want the earlier instance's %v in whole seconds", n.GetRuntime(), offset)
	}
	if len(next.history) != len(rs) {
		t.Fatalf("%d History records, want %d", len(next.history), len(rs))
	}
	last := prev.history[len(prev.history)-1].GetStep().GetNum()
	start := rs[0].Start.Add(-time.Duration(offset * float64(time.Second)))
	for i, r := range rs {
		if r.Step <= last {
			t.Fatalf("test records: step %d does not follow %d", r.Step, last)
		}
		checkHistory(t, next.history[i], r, start, false)
	}
	want := int32(math.Round(offset + rs[len(rs)-1].End.Sub(rs[0].Start).Seconds()))
	if next.exit == nil || next.exit.GetExitCode() != 0 || next.exit.GetRuntime() != want {
		t.Errorf("exit record %v, want code 0 and runtime %d", next.exit, want)
	}
}

// TestResumeContinuesRun reproduces two runs into one out_dir, the second continuing the
// first's steps: before, the second made a W&B run of its own (a new random id), which wandb
// sync uploads as a second run. Now it is a second offline instance of the same run, which sync
// appends to it in start-time order.
func TestResumeContinuesRun(t *testing.T) {
	out := t.TempDir()
	rs := records(12, 5)
	for _, r := range rs {
		r.Start = r.Start.Add(time.Duration(r.Step) * 7 * time.Second) // gaps of a restart
		r.End = r.End.Add(time.Duration(r.Step) * 7 * time.Second)
	}
	settings := "{type: wandb, project: rl, entity: team}"
	runInto(t, out, settings, false, rs[:5])
	runInto(t, out, settings, true, rs[5:9])
	runInto(t, out, settings, true, rs[9:])
	files := runFiles(t, out)
	if len(files) != 3 {
		t.Fatalf("run logs %v, want three instances of one run", files)
	}
	ins := make([]instance, len(files))
	for i, f := range files {
		ins[i] = readInstance(t, f)
	}
	slices.SortFunc(ins, func(a, b instance) int { return a.run.GetStartTime().AsTime().Compare(b.run.GetStartTime().AsTime()) })
	if ins[0].run.GetResumed() || ins[0].run.GetStartingStep() != 0 || ins[0].run.GetRuntime() != 0 {
		t.Errorf("first instance's run record %v says it resumed", ins[0].run)
	}
	checkHistory(t, ins[0].history[0], rs[0], rs[0].Start, false)
	checkContinues(t, ins[0], ins[1], rs[5:9])
	checkContinues(t, ins[1], ins[2], rs[9:])
}

// TestResumeAfterKill continues a run whose log was cut in the middle of a record, as a kill
// in the middle of a write leaves it: the instance goes on from the last whole step.
func TestResumeAfterKill(t *testing.T) {
	out := t.TempDir()
	rs := records(6, 4)
	w, sizes := writeRun(t, out, "{type: wandb}", rs[:4])
	// Cut the log in the middle of step 3's History record: no step 3, no summary, no exit.
	if err := os.Truncate(w.Path(), sizes[2]+(sizes[3]-sizes[2])/2); err != nil {
		t.Fatal(err)
	}
	recs, err := readRun(w.Path())
	if err == nil {
		t.Fatal("W&B's reader reads the cut log without an error")
	}
	cut := instance{run: recs[0].GetRun()}
	for _, rec := range recs[1:] {
		cut.history = append(cut.history, rec.GetHistory())
	}
	if len(cut.history) != 3 || slices.Contains(cut.history, nil) {
		t.Fatalf("cut log: records %v, want Run and 3 History", recs)
	}
	runInto(t, out, "{type: wandb}", true, rs[4:])
	files := runFiles(t, out)
	if len(files) != 2 {
		t.Fatalf("run logs %v, want two instances", files)
	}
	var next instance
	for _, f := range files {
		if f != w.Path() {
			next = readInstance(t, f)
		}
	}
	checkContinues(t, cut, next, rs[4:])
}

// TestResumeWithRunIDGiven: a run_id in the config names the run, whatever the out_dir holds;
// it continues the instance of that id if there is one.
func TestResumeWithRunIDGiven(t *testing.T) {
	out := t.TempDir()
	rs := records(9, 3)
	runInto(t, out, "{type: wandb, run_id: first}", false, rs[:3])
	other := readInstance(t, runInto(t, out, "{type: wandb, run_id: second}", true, rs[3:6]))
	if other.run.GetRunId() != "second" || other.run.GetResumed() {
		t.Errorf("run %s resumed %v, want a new run named second", other.run.GetRunId(), other.run.GetResumed())
	}
	again := readInstance(t, runInto(t, out, "{type: wandb, run_id: first}", true, rs[6:]))
	var first instance
	for _, f := range runFiles(t, out) {
		if in := readInstance(t, f); in.run.GetRunId() == "first" && !in.run.GetResumed() {
			first = in
		}
	}
	checkContinues(t, first, again, rs[6:])
}

// TestNoResumeNewRun: a run that does not continue the out_dir's steps starts a W&B run of its
// own, as before.
func TestNoResumeNewRun(t *testing.T) {
	out := t.TempDir()
	rs := records(4, 3)
	a := readInstance(t, runInto(t, out, "{type: wandb}", false, rs[:2]))
	b := readInstance(t, runInto(t, out, "{type: wandb}", false, rs[2:]))
	if a.run.GetRunId() == b.run.GetRunId() || b.run.GetResumed() {
		t.Errorf("second run %s (resumed %v), first %s: want a new run", b.run.GetRunId(), b.run.GetResumed(), a.run.GetRunId())
	}
}
