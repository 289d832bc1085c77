package readtest

import (
	"context"
	"math"
	"testing"

	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/sink/wandb"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit/sinkspec"
)

// TestPhases writes steps with phases under two metric prefixes and reads them back with W&B's
// reader: each phase's keys are history keys <prefix>/<phase>/<rest of the key>, beside the
// step's own, and the summary holds the last step's.
func TestPhases(t *testing.T) {
	for _, prefix := range []string{"vllm", "rl/gen"} {
		t.Run(prefix, func(t *testing.T) {
			rs := records(4, 3)
			for _, r := range rs {
				m := map[string]float64{}
				for k, v := range r.Metrics {
					m[prefix+k[len("vllm"):]] = v
				}
				r.Metrics = m
			}
			rs[1].Phases = map[string]*step.Phase{"rollout": {DurationS: 20, Intervals: 1, Metrics: map[string]float64{
				prefix + "/prefix_cache_hit_rate": 0.75, prefix + "/generation_tokens_per_s": 1234.5}}}
			rs[2].Phases = map[string]*step.Phase{
				"rollout": {DurationS: 10, Intervals: 2, Metrics: map[string]float64{prefix + "/prefix_cache_hit_rate": 0.5}},
				"eval":    {DurationS: 5, Intervals: 1, Metrics: map[string]float64{prefix + "/generation_tokens_per_s": math.NaN()}},
			}
			want := []map[string]float64{
				1: {prefix + "/rollout/prefix_cache_hit_rate": 0.75, prefix + "/rollout/generation_tokens_per_s": 1234.5},
				2: {prefix + "/rollout/prefix_cache_hit_rate": 0.5, prefix + "/eval/generation_tokens_per_s": math.NaN()},
				3: {},
			}
			env := sink.Env{OutDir: t.TempDir(), MetricPrefix: prefix}
			p, err := wandb.Type.Parse(env, sinkspec.Parse(t, "sinks[0]", "{type: wandb}"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := p.Open(env)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if err := s.Write(context.Background(), r); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			recs, err := readRun(s.(*wandb.Writer).Path())
			if err != nil || len(recs) != len(rs)+3 {
				t.Fatalf("W&B reader: %d records, %v", len(recs), err)
			}
			for i, r := range rs {
				got := map[string]float64{}
				for _, it := range recs[i+1].GetHistory().GetItem() {
					got[it.GetKey()] = number(t, it.GetValueJson())
				}
				if len(got) != 3+len(r.Metrics)+len(want[i]) {
					t.Errorf("step %d: %d history items, want %d", r.Step, len(got), 3+len(r.Metrics)+len(want[i]))
				}
				for k, v := range r.Metrics {
					if !same(got[k], v) {
						t.Errorf("step %d: %s = %v, want %v", r.Step, k, got[k], v)
					}
				}
				for k, v := range want[i] {
					if g, ok := got[k]; !ok || !same(g, v) {
						t.Errorf("step %d: %s = %v (present %v), want %v", r.Step, k, g, ok, v)
					}
				}
			}
		})
	}
}
