package run

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/selfmetrics"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
)

// sinkResumeRecords makes steps from..to-1 with a key and, from step 4 on, a phase rollout.
func sinkResumeRecords(from, to int) []*step.Record {
	t0 := time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC)
	var rs []*step.Record
	for i := from; i < to; i++ {
		r := &step.Record{Step: int64(i), Start: t0.Add(time.Duration(i) * time.Minute), End: t0.Add(time.Duration(i+1) * time.Minute),
			DurationS: 60, Metrics: map[string]float64{"vllm/prefix_cache_hit_rate": float64(i) / 10}}
		if i >= 4 {
			r.Phases = map[string]*step.Phase{"rollout": {DurationS: 30, Intervals: 1, Metrics: map[string]float64{"vllm/prefix_cache_hit_rate": 0.5}}}
		}
		rs = append(rs, r)
	}
	return rs
}

// sinkResumeRun runs the sinks of cfg over rs as a run does: steps.jsonl inline, the others
// behind the runtime, opened with resume as given.
func sinkResumeRun(t *testing.T, cfg config.Config, resume bool, rs []*step.Record) {
	t.Helper()
	planned, err := parseSinks(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := sink.OpenJSONL(filepath.Join(cfg.OutDir, "steps.jsonl"), sink.JSONLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt := buildSinks(cfg, planned, steps, selfmetrics.New(selfmetrics.Options{Prefix: cfg.MetricPrefix}), slog.New(slog.DiscardHandler), resume)
	rt.Start()
	for _, r := range rs {
		if err := rt.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func sinkResumeConfig(t *testing.T, out string) config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte("out_dir: " + out + "\nvllm_metrics_log_timeline_plots: false\n" +
		"sinks: [jsonl, tensorboard, {type: wandb, project: rl}, {type: csv, keys: [vllm/prefix_cache_hit_rate, vllm/rollout/prefix_cache_hit_rate]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// wandbRunIDs lists the run ids of out's offline W&B instances, by directory name.
func wandbRunIDs(t *testing.T, out string) []string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(out, "wandb", "offline-run-*"))
	var ids []string
	for _, d := range dirs {
		ids = append(ids, filepath.Base(d)[len("offline-run-20250701_120000-"):])
	}
	return ids
}

// TestSinkResumeContinuesEverySink runs twice into one out_dir, the second run continuing the
// first's steps as the caller says with resume: steps.jsonl has every step once, the CSV file
// one header and a row per step, W&B two instances of one run, TensorBoard two event files
// read in the order they were written.
func TestSinkResumeContinuesEverySink(t *testing.T) {
	out := t.TempDir()
	cfg := sinkResumeConfig(t, out)
	sinkResumeRun(t, cfg, false, sinkResumeRecords(0, 3))
	sinkResumeRun(t, cfg, true, sinkResumeRecords(3, 6))

	f, err := os.Open(filepath.Join(out, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []int64
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var r step.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Step)
	}
	if want := []int64{0, 1, 2, 3, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("steps.jsonl steps %v, want %v", got, want)
	}

	cf, err := os.Open(filepath.Join(out, "steps.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	rows, err := csv.NewReader(cf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 7 || rows[0][0] != "step" || slices.ContainsFunc(rows[1:], func(r []string) bool { return r[0] == "step" }) {
		t.Fatalf("csv rows %q, want one header and 6 rows", rows)
	}
	if rows[5][3] != "0.5" || rows[4][3] != "" {
		t.Errorf("phase column %q, %q; want empty before the phase, then 0.5", rows[4][3], rows[5][3])
	}

	ids := wandbRunIDs(t, out)
	if len(ids) != 2 || ids[0] != ids[1] {
		t.Errorf("W&B instances of run ids %v, want two of one run", ids)
	}

	files, _ := filepath.Glob(filepath.Join(out, "tensorboard", "events.out.tfevents.*"))
	if len(files) != 2 {
		t.Errorf("event files %v, want one per run in one directory", files)
	}
}

// TestSinkNoResumeNewRun: a run that starts its steps anew starts a new W&B run.
func TestSinkNoResumeNewRun(t *testing.T) {
	out := t.TempDir()
	cfg := sinkResumeConfig(t, out)
	sinkResumeRun(t, cfg, false, sinkResumeRecords(0, 2))
	sinkResumeRun(t, cfg, false, sinkResumeRecords(0, 2))
	if ids := wandbRunIDs(t, out); len(ids) != 2 || ids[0] == ids[1] {
		t.Errorf("W&B instances of run ids %v, want two runs", ids)
	}
}

// TestContinueAfterSinks: the steps that the sinks' files hold count when steps.jsonl holds
// fewer, or none (deleted): the run continues after the last of them all and names each file
// that holds steps past steps.jsonl's. A sink's step that no run can continue after refuses the
// run, naming the file.
func TestContinueAfterSinks(t *testing.T) {
	out := t.TempDir()
	cfg := sinkResumeConfig(t, out)
	sinkResumeRun(t, cfg, false, sinkResumeRecords(0, 3)) // steps 0-2 everywhere
	planned, err := parseSinks(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	held, err := sinkSteps(planned)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, h := range held {
		if h.Step != 2 {
			t.Errorf("%s holds step %d, want 2", h.File, h.Step)
		}
		files = append(files, h.sinkType+" "+filepath.Base(filepath.Dir(h.File))+"/"+filepath.Base(h.File))
	}
	tb, _ := filepath.Glob(filepath.Join(out, "tensorboard", "events.out.tfevents.*"))
	if want := []string{"tensorboard tensorboard/" + filepath.Base(tb[0]), "csv " + filepath.Base(out) + "/steps.csv"}; !slices.Equal(files, want) {
		t.Errorf("files that hold steps %q, want %q (W&B starts a run of its own when it does not continue)", files, want)
	}

	path := filepath.Join(out, "steps.jsonl")
	for _, tt := range []struct {
		name       string
		after      int64
		resume     bool
		want       int64
		warnings   int
		stepsJSONL string
	}{
		{"steps.jsonl deleted", 0, false, 2, 2, "steps_last_step=none"},
		{"steps.jsonl holds fewer", 1, true, 2, 2, "steps_last_step=1"},
		{"steps.jsonl holds as many", 2, true, 2, 0, ""},
		{"steps.jsonl holds more", 9, true, 9, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			after, resume := continueAfterSinks(held, path, tt.after, tt.resume, slog.New(slog.NewTextHandler(&logs, nil)))
			if after != tt.want || !resume {
				t.Errorf("continues after %d (%v), want %d", after, resume, tt.want)
			}
			if n := strings.Count(logs.String(), "holds steps that steps.jsonl does not"); n != tt.warnings {
				t.Errorf("%d warnings, want %d:\n%s", n, tt.warnings, logs.String())
			}
			if tt.warnings > 0 && (!strings.Contains(logs.String(), "file="+filepath.Join(out, "steps.csv")) ||
				!strings.Contains(logs.String(), "file="+tb[0]) || !strings.Contains(logs.String(), tt.stepsJSONL)) {
				t.Errorf("warnings do not name the files and steps.jsonl's last step:\n%s", logs.String())
			}
		})
	}

	for _, bad := range []string{"-5", "9007199254740992"} {
		if err := os.WriteFile(filepath.Join(out, "steps.csv"), []byte("step,end\n1,x\n"+bad+",x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := sinkSteps(planned)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", filepath.Join(out, "steps.csv"))) || !strings.Contains(err.Error(), "ends at step "+bad) ||
			!strings.Contains(err.Error(), "move that file away") {
			t.Errorf("steps.csv ending at step %s: %v", bad, err)
		}
	}
}
