package selfmetrics

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/promtest"
)

// TestGaugesShowPhases reads /metrics as a scraper does: the last step's phases are series with
// a phase label beside the whole step's, and go away with a step without phases.
func TestGaugesShowPhases(t *testing.T) {
	run := testRun(t)
	r, rollout, eval := promtest.WithPhases(t, run)
	m := New(Options{})
	m.StepClosed(r)
	body := get(t, m.Handler())
	got := parse(t, body)
	checks := map[string]float64{
		`vllmstat_step_vllm_prefix_cache_hit_rate{}`:                      r.Metrics["vllm/prefix_cache_hit_rate"],
		`vllmstat_step_vllm_prefix_cache_hit_rate{phase=rollout}`:         rollout.Metrics["vllm/prefix_cache_hit_rate"],
		`vllmstat_step_vllm_prefix_cache_hit_rate{phase=eval}`:            eval.Metrics["vllm/prefix_cache_hit_rate"],
		`vllmstat_step_vllm_kv_cache_usage_perc{phase=rollout,stat=p95}`:  rollout.Metrics["vllm/kv_cache_usage_perc/p95"],
		`vllmstat_step_vllm_generation_tokens_per_second{phase=eval}`:     eval.Metrics["vllm/generation_tokens_per_s"],
		`vllmstat_step_duration_seconds{}`:                                r.DurationS,
		`vllmstat_step_duration_seconds{phase=rollout}`:                   12.5,
		`vllmstat_step_phase_intervals{phase=eval}`:                       2,
		`vllmstat_step_vllm_kv_cache_usage_perc{phase=eval,stat=max}`:     eval.Metrics["vllm/kv_cache_usage_perc/max"],
		`vllmstat_step_vllm_num_requests_running{phase=rollout,stat=max}`: rollout.Metrics["vllm/num_requests_running/max"],
	}
	for k, v := range checks {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k, v := range want(r) {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if promtool, err := promtest.Binary("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}
	next := run.Records[3]
	next.End = r.End.Add(time.Minute)
	m.StepClosed(&next)
	for k := range parse(t, get(t, m.Handler())) {
		if strings.Contains(k, "phase=") {
			t.Errorf("series %s stays after a step without phases", k)
		}
	}
}
