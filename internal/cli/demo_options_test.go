package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDemoSpecDecodeAndKVConnector runs the demo with speculative decoding and a KV connector:
// the records carry the acceptance keys and the external cache keys, the external cache serves
// the questions that come back in the third batch, and the table prints the written values.
func TestDemoSpecDecodeAndKVConnector(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := demoWith(context.Background(), []string{"--steps", "3", "--servers", "1", "--dp", "2", "--speed", "6", "--interval", "0.2",
		"--plots=false", "--terminal-timelines=false", "--spec-decode", "2", "--kv-connector", "--out", dir}, &out, &errb)
	if code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	steps, _ := readSteps(t, filepath.Join(dir, "steps.jsonl"))
	if len(steps) != 3 {
		t.Fatalf("%d steps written, want 3\n%s", len(steps), out.String())
	}
	// The table's last columns are accept, ext hit and straggler.
	rows := map[string][]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 10 && f[0] != "step" {
			rows[f[0]] = f
		}
	}
	for _, s := range steps {
		m := s.Metrics
		rate, ok := m["vllm/spec_decode_acceptance_rate"]
		if !ok || rate <= 0 || rate >= 1 {
			t.Errorf("step %d: acceptance rate %v, want in (0,1)", s.Step, rate)
		}
		if l := m["vllm/spec_decode_mean_acceptance_length"]; l <= 1 || l > 3 {
			t.Errorf("step %d: mean acceptance length %v, want in (1, 3] for 2 speculative tokens", s.Step, l)
		}
		if _, ok := m["vllm/spec_decode_acceptance_rate_per_pos/1"]; !ok {
			t.Errorf("step %d: no acceptance rate for position 1", s.Step)
		}
		if _, ok := m["vllm/external_prefix_cache_hit_rate"]; !ok {
			t.Errorf("step %d: no external prefix cache hit rate", s.Step)
		}
		row := rows[strconv.FormatInt(s.Step, 10)]
		if row == nil || row[len(row)-3] != strconv.FormatFloat(rate*100, 'f', 1, 64)+"%" {
			t.Errorf("step %d: printed row %v, acceptance rate written %v", s.Step, row, rate)
		}
	}
	if ext := steps[2].Metrics["vllm/external_prefix_cache_hits"]; ext <= 0 {
		t.Errorf("third batch (first questions again): external cache hits %v, want some", ext)
	}
}
