package report

import (
	"slices"
	"testing"
)

// The new families land in the groups the spec gives them; split keys share a chart per
// family (per value when they have statistics).
func TestGroupsOfOptionalFamilies(t *testing.T) {
	keys := []string{
		"vllm/spec_decode_acceptance_rate",
		"vllm/spec_decode_acceptance_rate_per_pos/0",
		"vllm/spec_decode_acceptance_rate_per_pos/1",
		"vllm/external_prefix_cache_hit_rate",
		"vllm/num_requests_waiting_by_reason/capacity/mean",
		"vllm/num_requests_waiting_by_reason/capacity/p95",
		"vllm/num_requests_waiting_by_reason/deferred/mean",
		"vllm/request_success/stop",
		"vllm/request_success/length",
		"vllm/corrupted_requests",
	}
	charts := map[string][]string{} // group -> chart titles
	members := map[string][]string{}
	for _, g := range groupKeys(keys) {
		for _, c := range g.Charts {
			charts[g.Name] = append(charts[g.Name], c.Title)
			for _, i := range c.Keys {
				members[c.Title] = append(members[c.Title], keys[i])
			}
		}
	}
	for group, want := range map[string][]string{
		"Speculative decoding": {"spec_decode_acceptance_rate", "spec_decode_acceptance_rate_per_pos"},
		"Prefix cache":         {"external_prefix_cache_hit_rate"},
		"Queue":                {"num_requests_waiting_by_reason/capacity", "num_requests_waiting_by_reason/deferred"},
		"Throughput":           {"request_success"},
		"Other":                {"corrupted_requests"},
	} {
		if !slices.Equal(charts[group], want) {
			t.Errorf("group %s: charts %v, want %v", group, charts[group], want)
		}
	}
	if got := members["spec_decode_acceptance_rate_per_pos"]; len(got) != 2 {
		t.Errorf("per-position chart holds %v, want both positions", got)
	}
}
