package selfmetrics

import (
	"bytes"
	"os/exec"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/promtest"
)

// The optional families' keys become step gauges with their split values and statistics as
// labels, which promtool accepts.
func TestOptionalFamiliesAsGauges(t *testing.T) {
	run, err := promtest.SimulateRun(promtest.RunOptions{Servers: 2, DP: 1, Steps: 3, Scrapes: 5, Interval: time.Second,
		End: time.Now(), Prefix: "vllm", PerWorker: true, Seed: 3, SpecDecode: 3, KVConnector: true})
	if err != nil {
		t.Fatal(err)
	}
	m := New(Options{})
	feed(m, run)
	body := get(t, m.Handler())
	got := parse(t, body)
	last := &run.Records[len(run.Records)-1]
	for series, key := range map[string]string{
		`vllmstat_step_vllm_spec_decode_acceptance_rate{}`:                   "vllm/spec_decode_acceptance_rate",
		`vllmstat_step_vllm_spec_decode_acceptance_rate_per_pos{position=2}`: "vllm/spec_decode_acceptance_rate_per_pos/2",
		`vllmstat_step_vllm_spec_decode_mean_acceptance_length{}`:            "vllm/spec_decode_mean_acceptance_length",
		`vllmstat_step_vllm_external_prefix_cache_queries{}`:                 "vllm/external_prefix_cache_queries",
	} {
		v, ok := last.Metrics[key]
		if !ok {
			t.Errorf("the last step has no %s", key)
			continue
		}
		if g, ok := got[series]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", series, g, ok, v)
		}
	}
	promtool, err := promtest.Binary("promtool")
	promtest.Require(t, err)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
