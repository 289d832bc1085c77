package readtest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/cli"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
)

// TestDemoWritesWandb runs "vllmstat demo" with the wandb sink and checks with W&B's own reader
// that the offline run holds exactly the step records of steps.jsonl, then a clean exit.
func TestDemoWritesWandb(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := cli.Run([]string{"demo", "--steps", "2", "--servers", "1", "--dp", "2", "--speed", "6", "--interval", "0.2",
		"--sinks", "jsonl,wandb", "--out", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("demo exited %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var rs []*step.Record
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		r := &step.Record{}
		if err := json.Unmarshal(l, r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	files, _ := filepath.Glob(filepath.Join(out, "wandb", "offline-run-*", "run-*.wandb"))
	if len(files) != 1 {
		t.Fatalf("run files %v", files)
	}
	recs, err := readRun(files[0])
	if err != nil {
		t.Fatalf("W&B reader: %v", err)
	}
	if len(recs) < len(rs)+3 || recs[0].GetRun() == nil || recs[len(recs)-1].GetExit() == nil || recs[len(recs)-1].GetExit().GetExitCode() != 0 {
		t.Fatalf("%d records for %d steps; want run, one history per step, summary, exit", len(recs), len(rs))
	}
	var hist []int
	nfiles := 0
	for i, rec := range recs {
		switch {
		case rec.GetHistory() != nil:
			hist = append(hist, i)
		case rec.GetFiles() != nil:
			nfiles++ // the demo draws timeline plots: each step's images come as files
		}
	}
	if len(hist) != len(rs) || nfiles == 0 {
		t.Fatalf("%d history records for %d steps, %d files records", len(hist), len(rs), nfiles)
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

// TestRunWritesWandb runs "vllmstat run" against a simulated fleet with sinks [jsonl, wandb]
// from a config file, stops it as SIGINT would, and checks the offline run with W&B's reader.
func TestRunWritesWandb(t *testing.T) {
	sc := sim.DefaultConfig()
	sc.Servers, sc.DP, sc.Port, sc.Speed = 1, 2, 0, 4
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	out := t.TempDir()
	cfg := filepath.Join(out, "vllmstat.yaml")
	os.WriteFile(cfg, []byte("sinks: [jsonl, {type: wandb, project: rl, group: grpo}]\nper_worker: true\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var stderr bytes.Buffer
	go func() {
		done <- cli.RunContext(ctx, []string{"run", "--config", cfg, "--target", fleet.URLs()[0], "--interval", "0.2",
			"--scrape-timeout", "2s", "--step-every", "1s", "--listen", "", "--out", out}, &bytes.Buffer{}, &stderr)
	}()
	steps := filepath.Join(out, "steps.jsonl")
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if b, _ := os.ReadFile(steps); bytes.Count(b, []byte("\n")) >= 3 {
			break
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(steps)
	if err != nil {
		t.Fatal(err)
	}
	var rs []*step.Record
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		r := &step.Record{}
		if err := json.Unmarshal(l, r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	files, _ := filepath.Glob(filepath.Join(out, "wandb", "offline-run-*", "run-*.wandb"))
	if len(files) != 1 {
		t.Fatalf("run files %v", files)
	}
	recs, err := readRun(files[0])
	if err != nil {
		t.Fatalf("W&B reader: %v", err)
	}
	if len(rs) < 3 || len(recs) != len(rs)+3 || recs[0].GetRun().GetProject() != "rl" || recs[0].GetRun().GetRunGroup() != "grpo" ||
		recs[len(recs)-1].GetExit() == nil || recs[len(recs)-1].GetExit().GetExitCode() != 0 {
		t.Fatalf("%d records for %d steps; want run (project rl, group grpo), one history per step, summary, exit 0", len(recs), len(rs))
	}
	for i, r := range rs {
		if other := checkHistory(t, recs[i+1].GetHistory(), r, rs[0].Start, false); len(other) > 0 {
			t.Errorf("step %d: keys not in steps.jsonl: %v", r.Step, other)
		}
	}
}
