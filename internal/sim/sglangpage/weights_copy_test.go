package sglangpage

import (
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/expo"
)

// samplesOf reads the samples of syncFamilies on body with the project's exposition parser,
// keyed by name and the values of the labels in keep, in that order: `name{v1,v2}`.
func samplesOf(t *testing.T, body []byte, keep ...string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	err := expo.Parse(body, expo.NewNames(syncFamilies), func(s *expo.Sample) {
		var vals []string
		for _, k := range keep {
			for _, l := range s.Labels {
				if l.Name == k {
					vals = append(vals, l.Value)
				}
			}
		}
		key := s.Name + "{" + strings.Join(vals, ",") + "}"
		if _, dup := m[key]; dup {
			t.Errorf("two samples %s", key)
		}
		m[key] = s.Value
	})
	if err != nil {
		t.Fatalf("page does not parse: %v", err)
	}
	return m
}

// syncFamilies are the families of a fleet that syncs weights, read with internal/expo.
var syncFamilies = []string{
	"vllm:engine_sleep_resource_state", "vllm:engine_fully_awake", "vllm:engine_sleep_state",
	"vllm:rl_weight_update_total", "vllm:rl_weight_update_created", "vllm:rl_weight_gen", "vllm:rl_weight_update_active",
	"vllm:rl_weight_update_duration_seconds_count", "vllm:rl_weight_update_duration_seconds_sum",
	"sglang:num_paused_reqs", "sglang:weight_load_duration_seconds",
}
