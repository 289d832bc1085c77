package tensorboard_test

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/cli"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/sink/tensorboard"
)

// TestDemoWritesTensorBoard runs "vllmstat demo" with the tensorboard sink and checks that the
// independent reader decodes exactly the step records of steps.jsonl.
func TestDemoWritesTensorBoard(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := cli.Run([]string{"demo", "--steps", "2", "--servers", "1", "--dp", "2", "--speed", "6", "--interval", "0.2",
		"--sinks", "jsonl,tensorboard", "--out", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("demo exited %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	compareEvents(t, out, true)
}

// compareEvents checks that the run's event file holds exactly the records of its steps.jsonl,
// decoded by the independent reader; with plots, every step also carries images.
func compareEvents(t *testing.T, out string, plots bool) {
	t.Helper()
	recs := tensorboard.ReadSteps(t, filepath.Join(out, "steps.jsonl"))
	files, _ := filepath.Glob(filepath.Join(out, "tensorboard", "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("event files %v", files)
	}
	evs := tensorboard.PythonRead(t, files[0])
	if len(evs) != len(recs)+1 || evs[0].FileVersion != "brain.Event:2" {
		t.Fatalf("%d events for %d steps", len(evs), len(recs))
	}
	for i, r := range recs {
		ev := evs[i+1]
		if ev.Step != r.Step {
			t.Errorf("event %d: step %d, want %d", i+1, ev.Step, r.Step)
		}
		wt, _ := strconv.ParseFloat(ev.WallTime, 64)
		if math.Abs(wt-float64(r.End.UnixNano())/1e9) > 1e-6 {
			t.Errorf("step %d: wall time %v, want %v", r.Step, wt, r.End)
		}
		got := map[string]float64{}
		images := 0
		for _, v := range ev.Values {
			if v.Image != nil {
				images++ // the demo draws timeline plots: they come as image summaries
				continue
			}
			f, _ := strconv.ParseFloat(v.Simple, 64)
			got[v.Tag] = f
		}
		if plots && images == 0 {
			t.Errorf("step %d: no timeline plots among the events", r.Step)
		}
		if len(got) != len(r.Metrics) {
			t.Errorf("step %d: %d scalars, steps.jsonl has %d", r.Step, len(got), len(r.Metrics))
		}
		for k, v := range r.Metrics {
			if g, ok := got[k]; !ok || float32(g) != float32(v) {
				t.Errorf("step %d: %s = %v, steps.jsonl says %v", r.Step, k, g, v)
			}
		}
	}
}

// TestRunWritesTensorBoard runs "vllmstat run" against a simulated fleet with sinks
// [jsonl, tensorboard] from a config file, stops it as SIGINT would, and checks the event file
// with the independent reader.
func TestRunWritesTensorBoard(t *testing.T) {
	sc := sim.DefaultConfig()
	sc.Servers, sc.DP, sc.Port, sc.Speed = 1, 2, 0, 4
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	out := t.TempDir()
	cfg := filepath.Join(out, "vllmstat.yaml")
	os.WriteFile(cfg, []byte("sinks: [jsonl, tensorboard]\n"), 0o644)
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
	compareEvents(t, out, false)
}
