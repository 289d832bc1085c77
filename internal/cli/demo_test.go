package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDemo runs the demo at a reduced size and speed-up, and checks that what it printed is what
// it wrote, and that every metric the demo is meant to show moves.
func TestDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := demoWith(context.Background(), []string{"--steps", "2", "--servers", "1", "--dp", "2", "--speed", "6", "--interval", "0.2", "--out", dir}, &out, &errb)
	if code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	steps, _ := readSteps(t, filepath.Join(dir, "steps.jsonl"))
	if len(steps) != 2 {
		t.Fatalf("%d steps written, want 2\n%s", len(steps), out.String())
	}
	lines := strings.Split(out.String(), "\n")
	var rows [][]string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) > 3 && (f[0] == "1" || f[0] == "2") {
			rows = append(rows, f)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("table rows %d, want 2:\n%s", len(rows), out.String())
	}
	for i, s := range steps {
		m := s.Metrics
		hit, ok := m["vllm/prefix_cache_hit_rate"]
		if !ok || hit <= 0 || hit >= 1 {
			t.Errorf("step %d: hit rate %v, want in (0,1)", s.Step, hit)
		}
		if m["vllm/kv_cache_usage_perc/max"] <= m["vllm/kv_cache_usage_perc/mean"] {
			t.Errorf("step %d: KV usage does not vary", s.Step)
		}
		if m["vllm/generation_tokens"] <= 0 || s.Workers != 2 {
			t.Errorf("step %d: generation tokens %v, workers %d", s.Step, m["vllm/generation_tokens"], s.Workers)
		}
		// the printed row shows the same numbers
		if got := rows[i][3]; got != strconv.FormatFloat(hit*100, 'f', 1, 64)+"%" {
			t.Errorf("step %d: printed hit rate %s, written %v", s.Step, got, hit)
		}
		if got := rows[i][4]; got != strconv.FormatFloat(m["vllm/num_preemptions"], 'f', 0, 64) {
			t.Errorf("step %d: printed preemptions %s, written %v", s.Step, got, m["vllm/num_preemptions"])
		}
	}
	if steps[0].Metrics["vllm/num_preemptions"]+steps[1].Metrics["vllm/num_preemptions"] == 0 {
		t.Errorf("no preemptions in the demo")
	}
}
