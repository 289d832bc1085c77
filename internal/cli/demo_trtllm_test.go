package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoTRTLLM runs the demo on simulated TensorRT-LLM servers: it says the keys are under
// trtllm/, steps.jsonl has TensorRT-LLM's keys with values and none of vLLM's, and every column
// of the table prints the written value of its trtllm/ key (the paused requests where vLLM's
// table has preemptions, which TensorRT-LLM's page does not count).
func TestDemoTRTLLM(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := demoWith(context.Background(), []string{"--engine", "trtllm", "--steps", "2", "--servers", "2", "--speed", "6", "--interval", "0.2",
		"--plots=false", "--terminal-timelines=false", "--out", dir}, &out, &errb)
	if code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "Simulated TensorRT-LLM fleet: 2 servers (trtllm-serve pages, keys under trtllm/)") {
		t.Errorf("the demo does not say where the keys are:\n%s", out.String())
	}
	steps, _ := readSteps(t, filepath.Join(dir, "steps.jsonl"))
	if len(steps) != 2 {
		t.Fatalf("%d steps written, want 2\n%s", len(steps), out.String())
	}
	// The columns after step, secs and workers, and the keys whose values they print.
	cols := []struct{ head, key, format string }{
		{"hit rate", "prefix_cache_hit_rate", "%.1f%%"},
		{"paused", "num_paused_requests/max", "%.0f"},
		{"kv mean", "kv_cache_usage_perc/mean", "%.2f"},
		{"kv max", "kv_cache_usage_perc/max", "%.2f"},
		{"run mean", "num_requests_running/mean", "%.1f"},
		{"run max", "num_requests_running/max", "%.0f"},
		{"wait mean", "num_requests_waiting/mean", "%.1f"},
		{"wait max", "num_requests_waiting/max", "%.0f"},
		{"gen tok/s", "generation_tokens_per_s", "%.0f"},
		{"ttft p50", "time_to_first_token_seconds/p50", "%.3fs"},
		{"ttft p95", "time_to_first_token_seconds/p95", "%.3fs"},
	}
	var heads []string
	for _, c := range cols {
		heads = append(heads, c.head)
	}
	if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), "workers "+strings.Join(heads, " ")+" tail s straggler") {
		t.Errorf("the table's header lacks %q:\n%s", strings.Join(heads, " "), out.String())
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > len(cols)+3 && f[0] != "step" {
			rows[f[0]] = f
		}
	}
	for _, s := range steps {
		m := s.Metrics
		for k := range m {
			if !strings.HasPrefix(k, "trtllm/") {
				t.Errorf("step %d has %s, not a TensorRT-LLM key", s.Step, k)
			}
		}
		if m["trtllm/prompt_tokens"] <= 0 || m["trtllm/generation_tokens"] <= 0 || m["trtllm/finished_requests"] <= 0 || s.Workers != 2 {
			t.Errorf("step %d: %v prompt and %v generation tokens, %v requests finished, %d workers",
				s.Step, m["trtllm/prompt_tokens"], m["trtllm/generation_tokens"], m["trtllm/finished_requests"], s.Workers)
		}
		if hit := m["trtllm/prefix_cache_hit_rate"]; hit <= 0 || hit >= 1 || hit != m["trtllm/cached_tokens"]/m["trtllm/prompt_tokens"] {
			t.Errorf("step %d: hit rate %v, want cached over prompt tokens in (0,1)", s.Step, hit)
		}
		if e := m["trtllm/time/engine_s"]; e <= 0 || m["trtllm/time/generating_s"] <= 0 {
			t.Errorf("step %d: %v engine-s, %v generating", s.Step, e, m["trtllm/time/generating_s"])
		}
		row := rows[fmt.Sprint(s.Step)]
		if row == nil {
			t.Fatalf("no row of step %d:\n%s", s.Step, out.String())
		}
		for i, c := range cols {
			v, ok := m["trtllm/"+c.key]
			if !ok {
				t.Errorf("step %d has no trtllm/%s", s.Step, c.key)
				continue
			}
			if c.head == "hit rate" {
				v *= 100
			}
			if got, want := row[3+i], fmt.Sprintf(c.format, v); got != want {
				t.Errorf("step %d: %s printed %s, written %s", s.Step, c.head, got, want)
			}
		}
	}
}
