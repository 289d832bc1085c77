package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/config"
)

// TestResumeFromRefusedBySinkCut: a run resumed from step 3 whose CSV sink cannot cut its file
// back (here its new file cannot be made: a directory is where it goes) is refused at start,
// naming the sink and the step, and leaves steps.jsonl as it was: it is cut only after every
// sink's file was, so that a refused run leaves the out_dir's steps whole for the next try.
func TestResumeFromRefusedBySinkCut(t *testing.T) {
	out := t.TempDir()
	cfg, err := config.Parse([]byte("out_dir: " + out + "\nvllm_metrics_log_timeline_plots: false\nresume_from: 3\nlisten: 127.0.0.1:0\n" +
		"sinks: [jsonl, {type: csv, keys: [vllm/prefix_cache_hit_rate]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	var steps, rows strings.Builder
	rows.WriteString("step,vllm/prefix_cache_hit_rate\n")
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&steps, "{\"step\":%d,\"metrics\":{}}\n", i)
		fmt.Fprintf(&rows, "%d,0.5\n", i)
	}
	stepsPath, csvPath := filepath.Join(out, "steps.jsonl"), filepath.Join(out, "steps.csv")
	for path, b := range map[string]string{stepsPath: steps.String(), csvPath: rows.String()} {
		if err := os.WriteFile(path, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(csvPath+".tmp", 0o755); err != nil {
		t.Fatal(err)
	}

	p := New(cfg, Options{})
	err = p.Start(context.Background())
	if err == nil {
		p.Stop(context.Background())
		t.Fatal("the run started although the CSV sink could not cut its file")
	}
	if msg := err.Error(); !strings.Contains(msg, "resume from step 3") || !strings.Contains(msg, "csv sink") {
		t.Errorf("error %q, want it to name the step and the CSV sink", msg)
	}
	if b, err := os.ReadFile(stepsPath); err != nil || string(b) != steps.String() {
		t.Errorf("steps.jsonl changed (%v):\n%s", err, b)
	}
	if side, _ := filepath.Glob(stepsPath + ".cut-*"); len(side) != 0 {
		t.Errorf("steps.jsonl was cut, into %v", side)
	}
	if b, err := os.ReadFile(csvPath); err != nil || string(b) != rows.String() {
		t.Errorf("steps.csv changed (%v):\n%s", err, b)
	}
}
