package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// TestDemoMFU runs the demo with --gpu H100 and without: its engines estimate their FLOPs either
// way, so every step has the achieved TFLOP/s per GPU; with the GPU named the step has MFU, the
// achieved TFLOP/s over H100's peak, and the table an mfu column that prints it, which it lacks
// without; an SGLang fleet's likewise, from SGLang's counters.
func TestDemoMFU(t *testing.T) {
	t.Parallel()
	peak, err := vllm.GPUPeak("H100")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		gpu    bool
		engine string
	}{{true, "vllm"}, {false, "vllm"}, {true, "sglang"}} {
		gpu, p := c.gpu, c.engine+"/"
		t.Run(c.engine+" gpu "+strconv.FormatBool(gpu), func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"--steps", "2", "--servers", "1", "--dp", "2", "--speed", "6", "--interval", "0.2",
				"--plots=false", "--terminal-timelines=false", "--out", dir, "--engine", c.engine}
			if gpu {
				args = append(args, "--gpu", "H100")
			}
			var out, errb bytes.Buffer
			if code := demoWith(context.Background(), args, &out, &errb); code != 0 {
				t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
			}
			steps, _ := readSteps(t, filepath.Join(dir, "steps.jsonl"))
			if len(steps) != 2 {
				t.Fatalf("%d steps written, want 2\n%s", len(steps), out.String())
			}
			var head []string
			rows := map[string][]string{}
			for _, l := range strings.Split(out.String(), "\n") {
				f := strings.Fields(l)
				switch {
				case len(f) > 0 && f[0] == "step":
					head = f
				case len(f) > 10:
					rows[f[0]] = f
				}
			}
			if has := slices.Contains(head, "mfu"); has != gpu || gpu && head[len(head)-2] != "mfu" {
				t.Fatalf("table head %q: mfu column %v, want %v, last before the straggler", head, has, gpu)
			}
			for _, s := range steps {
				tf, ok := s.Metrics[p+"achieved_tflops_per_gpu"]
				if !ok || !(tf > 0) {
					t.Errorf("step %d: achieved TFLOP/s per GPU %v (present %v), want some", s.Step, tf, ok)
				}
				mfu, ok := s.Metrics[p+"mfu"]
				if ok != gpu {
					t.Errorf("step %d: has mfu %v, want %v", s.Step, ok, gpu)
				}
				if !gpu {
					continue
				}
				if want := tf / peak.TFLOPS; mfu != want {
					t.Errorf("step %d: mfu %v, want %v TFLOP/s / %v", s.Step, mfu, tf, peak.TFLOPS)
				}
				// mfu is the last column, the straggler's name after it.
				row := rows[strconv.FormatInt(s.Step, 10)]
				if want := strconv.FormatFloat(mfu*100, 'f', 1, 64) + "%"; len(row) < 2 || row[len(row)-2] != want {
					t.Errorf("step %d: printed row %v, mfu written %s", s.Step, row, want)
				}
			}
		})
	}
}
