package termline

import (
	"slices"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
)

// TestUndeterminedNamesItsEngine: the line under a step's timelines that tells of undetermined
// time says why in the words of the engine kind that had it: SGLang's repeated log points,
// TensorRT-LLM's gauges of the last iteration it logged; one line per kind, under each kind's
// prefix, a metric prefix of one's own too.
func TestUndeterminedNamesItsEngine(t *testing.T) {
	r := step.Record{Metrics: map[string]float64{
		"sglang/time/undetermined_s": 3, "sglang/time/undetermined_fraction": 0.5,
		"trtllm/time/undetermined_s": 1.5, "trtllm/time/undetermined_fraction": 0.25,
		"rollout/trtllm/time/undetermined_s": 2,
		"vllm/time/undetermined_s":           0,
	}}
	want := []string{
		"rollout/trtllm: 2.0 engine-s undetermined: the pages kept the gauges of the last iteration TensorRT-LLM logged, generating or idle; their running requests may be stale",
		"sglang: 3.0 engine-s undetermined (50%): the pages repeated an old log point of SGLang's scheduler, generating or idle; their running requests may be stale",
		"trtllm: 1.5 engine-s undetermined (25%): the pages kept the gauges of the last iteration TensorRT-LLM logged, generating or idle; their running requests may be stale",
	}
	if got := undetermined(&r); !slices.Equal(got, want) {
		t.Errorf("lines\n%q\nwant\n%q", got, want)
	}
}
