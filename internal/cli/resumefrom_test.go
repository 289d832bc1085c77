package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/outdir"
)

// TestResumeFrom: a trainer that ended steps 1-5, crashed and resumed from its checkpoint of
// step 3 ends step 4 next, which a run continuing after step 5 refused (409), while
// steps.jsonl, steps.csv and the event files would hold steps 4 and 5 twice. With
// --resume-from 3 the run cuts the out_dir back to step 3 first, keeping what it cut beside
// each file (steps.jsonl.cut-1, steps.csv.cut-1, an event file's cut named without
// "tfevents"), says so, refuses step 3 again and ends step 4, whose record starts at the run's
// start.
func TestResumeFrom(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 36)
	out := t.TempDir()
	sinks := runWithSinks(t, a, out, 5)
	path := filepath.Join(out, "steps.jsonl")
	before, old := readSteps(t, path)
	csvPath := filepath.Join(out, "steps.csv")
	oldCSV := mustRead(t, csvPath)

	// The lock file still names the first run's API, which startLive would take for the next's.
	if err := os.WriteFile(filepath.Join(out, outdir.LockName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	l := startLive(t, out, append(sinks, "--resume-from", "3")...)
	if code, _ := l.tryEndStep(3); code != http.StatusConflict {
		t.Errorf("step 3 again: %d, want 409", code)
	}
	l.endStep(4)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}

	recs, b := readSteps(t, path)
	var got []int64
	for _, r := range recs {
		got = append(got, r.Step)
	}
	if fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("steps.jsonl steps %v, want [1 2 3 4]", got)
	}
	if !strings.HasPrefix(string(b), string(old[:len(old)-len(linesFrom(old, 3))])) {
		t.Errorf("steps 1-3 of steps.jsonl changed:\n%s", b)
	}
	if r := recs[3]; r.Start.Before(started) || r.Start.Before(before[2].End) {
		t.Errorf("step 4 starts at %v, before the resumed run's start %v", r.Start, started)
	}
	if cut := mustRead(t, path+".cut-1"); string(cut) != string(linesFrom(old, 3)) {
		t.Errorf("steps.jsonl.cut-1:\n%s\nwant the old steps 4 and 5:\n%s", cut, linesFrom(old, 3))
	}
	if s := csvSteps(t, csvPath); fmt.Sprint(s) != "[1 2 3 4]" {
		t.Errorf("steps.csv steps %v, want [1 2 3 4]", s)
	}
	if cut := mustRead(t, csvPath+".cut-1"); string(cut) != string(linesFrom(oldCSV, 4)) {
		t.Errorf("steps.csv.cut-1:\n%s\nwant the old rows of steps 4 and 5:\n%s", cut, linesFrom(oldCSV, 4))
	}
	files, _ := filepath.Glob(filepath.Join(out, "tensorboard", "events.out.tfevents.*"))
	slices.Sort(files)
	var tb []int64
	for _, f := range files {
		tb = append(tb, eventFileSteps(t, f)...)
	}
	if fmt.Sprint(tb) != "[1 2 3 4]" {
		t.Errorf("event files %v hold steps %v, want [1 2 3 4]", files, tb)
	}
	cutTB, _ := filepath.Glob(filepath.Join(out, "tensorboard", "events.out.tfrecords.*.cut-1"))
	if len(cutTB) != 1 || fmt.Sprint(eventFileSteps(t, cutTB[0])) != "[4 5]" {
		t.Errorf("the event files' cut: %v, want one file of steps 4 and 5", cutTB)
	}
	log := l.stderr.String()
	for _, want := range []string{path + ".cut-1", csvPath + ".cut-1", "resume_from=3", "last_step=3"} {
		if !strings.Contains(log, want) {
			t.Errorf("the run did not say %q at start:\n%s", want, log)
		}
	}
}

// TestResumeFromRefused: a step number no run can resume from is refused at start, naming the
// flag, and the out_dir is left as it was.
func TestResumeFromRefused(t *testing.T) {
	out := t.TempDir()
	steps := []byte(`{"step":1,"metrics":{}}` + "\n" + `{"step":2,"metrics":{}}` + "\n")
	if err := os.WriteFile(filepath.Join(out, "steps.jsonl"), steps, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"-1", "9007199254740992"} {
		code, stderr, started := runUntilStarted(t, "--target", "127.0.0.1:1", "--out", out, "--resume-from", n)
		if code == 0 || started || !strings.Contains(stderr, "--resume-from") || !strings.Contains(stderr, n) {
			t.Errorf("--resume-from %s: exit %d, started %v:\n%s", n, code, started, stderr)
		}
	}
	if b := mustRead(t, filepath.Join(out, "steps.jsonl")); string(b) != string(steps) {
		t.Errorf("steps.jsonl changed: %q", b)
	}
}

// linesFrom is the lines of b from its line k on (k from 0).
func linesFrom(b []byte, k int) []byte {
	for ; k > 0; k-- {
		i := strings.IndexByte(string(b), '\n')
		if i < 0 {
			return nil
		}
		b = b[i+1:]
	}
	return b
}

// TestReplayAfterResumeFrom: a recorded run that ended steps 1-3 (and its last, 4, at exit),
// then a run with the same recording resumed from step 2 that ended a new step 3: steps.jsonl
// holds 1, 2 and the new 3, and replay of the recording's two segments must print the same
// lines, not the first run's 3 and 4 as well.
func TestReplayAfterResumeFrom(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 36)
	out := t.TempDir()
	rec := filepath.Join(t.TempDir(), "run.jsonl.gz")
	l := startLive(t, out, "--target", a.url(), "--record", rec, "--per-worker")
	for n := 1; n <= 3; n++ {
		l.endStep(n)
	}
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	// The lock file still names the first run's API, which startLive would take for the next's.
	if err := os.WriteFile(filepath.Join(out, outdir.LockName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l = startLive(t, out, "--target", a.url(), "--record", rec, "--per-worker", "--resume-from", "2")
	l.endStep(3)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}

	recs, want := readSteps(t, filepath.Join(out, "steps.jsonl"))
	var steps []int64
	for _, r := range recs {
		steps = append(steps, r.Step)
	}
	if fmt.Sprint(steps[:3]) != "[1 2 3]" {
		t.Fatalf("steps.jsonl steps %v, want 1, 2 and the new 3 first", steps)
	}
	var got, stderr bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &got, &stderr); code != 0 {
		t.Fatalf("replay exited %d: %s", code, stderr.String())
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("replay differs from steps.jsonl\nreplay:\n%s\nsteps.jsonl:\n%s", got.String(), want)
	}
}
