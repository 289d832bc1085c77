package promname

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/promtest"
	"github.com/vllmstat/vllmstat/internal/step"
)

// walked lists every series WalkStep makes of r, in its order.
func walked(prefix string, r *step.Record) []string {
	var out []string
	WalkStep(prefix, r, func(name string, labels []Label, v float64) {
		out = append(out, fmt.Sprintf("%s%v %v", name, labels, v))
	})
	return out
}

// A tracker's record is named from its typed values; the same record read back from its JSON
// line has only keys. Both must give the same series in the same order, split labels,
// statistics, worst workers and per-worker keys included.
func TestWalkStepValuesMatchKeys(t *testing.T) {
	for _, prefix := range []string{"vllm", "rl/gen-1"} {
		run, err := promtest.SimulateRun(promtest.RunOptions{Servers: 2, DP: 2, Steps: 3, Scrapes: 5, Interval: time.Second,
			End: time.Unix(1_800_000_000, 0), Prefix: prefix, PerWorker: true, Seed: 5, SpecDecode: 3, KVConnector: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range run.Records {
			r := &run.Records[i]
			if len(r.Values) == 0 || len(r.PerWorker) == 0 || len(r.PerWorker[0].Values) == 0 {
				t.Fatalf("step %d: the tracker's record has no typed values", r.Step)
			}
			keyed := *r
			keyed.Values = nil
			keyed.PerWorker = slices.Clone(r.PerWorker)
			for j := range keyed.PerWorker {
				keyed.PerWorker[j].Values = nil
			}
			got, want := walked(prefix, r), walked(prefix, &keyed)
			if !slices.Equal(got, want) {
				t.Errorf("prefix %q step %d: series from values\n%v\nwant, as from keys,\n%v", prefix, r.Step, got, want)
			}
			if n := 5 + len(r.Metrics); len(got) < n {
				t.Errorf("prefix %q step %d: %d series, want at least %d", prefix, r.Step, len(got), n)
			}
		}
	}
}

func TestStepFamily(t *testing.T) {
	tests := []struct {
		prefix, key, family string
		label               Label
	}{
		{"vllm", "vllm/prefix_cache_hit_rate", "vllm_prefix_cache_hit_rate", Label{}},
		{"vllm", "vllm/kv_cache_usage_perc/p95", "vllm_kv_cache_usage_perc", Label{"stat", "p95"}},
		{"vllm", "vllm/time_to_first_token_seconds/p99", "vllm_time_to_first_token_seconds", Label{"stat", "p99"}},
		{"vllm", "vllm/num_preemptions/max", "vllm_num_preemptions", Label{"stat", "max"}},
		{"vllm", "vllm/request_success/stop", "vllm_request_success", Label{"reason", "stop"}},
		{"vllm", "vllm/generation_tokens_per_s", "vllm_generation_tokens_per_second", Label{}},
		{"rollout", "rollout/num_preemptions", "rollout_num_preemptions", Label{}},
		{"rl/gen-1", "rl/gen-1/kv_cache_usage_perc/mean", "rl_gen_1_kv_cache_usage_perc", Label{"stat", "mean"}},
		{"vllm", "other/thing", "other_thing", Label{}},
		{"vllm", "vllm/prefix_cache_hit_rate/worst_worker", "vllm_prefix_cache_hit_rate", Label{"stat", "worst_worker"}},
		{"vllm", "vllm/worker_idle_fraction/max", "vllm_worker_idle_fraction", Label{"stat", "max"}},
		{"vllm", "vllm/straggler_tail_s", "vllm_straggler_tail_seconds", Label{}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			f, l := StepFamily(tt.prefix, tt.key)
			if f != tt.family || l != tt.label {
				t.Errorf("StepFamily(%q, %q) = %q, %v; want %q, %v", tt.prefix, tt.key, f, l, tt.family, tt.label)
			}
		})
	}
}
