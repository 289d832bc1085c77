package page

import (
	"maps"
	"testing"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The optional families are read in every spelling, their split label kept as Reason, and a
// split gauge is summed by label value within a worker.
func TestOptionalFamiliesParse(t *testing.T) {
	body := `# TYPE ray_vllm_spec_decode_num_accepted_tokens_per_pos gauge
ray_vllm_spec_decode_num_accepted_tokens_per_pos{WorkerId="w",engine="0",position="0"} 7
ray_vllm_spec_decode_num_accepted_tokens_per_pos{WorkerId="w",engine="0",position="1"} 3
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="a",reason="capacity"} 2
vllm:num_requests_waiting_by_reason{engine="0",model_name="b",reason="capacity"} 3
vllm:num_requests_waiting_by_reason{engine="0",model_name="a",reason="deferred"} 1
# TYPE vllm_spec_decode_num_drafts counter
vllm_spec_decode_num_drafts_total{engine="0"} 5
`
	p, err := ParsePageOptions([]byte(body), Options{WorkerLabels: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Engines) != 1 {
		t.Fatalf("%d workers, want 1", len(p.Engines))
	}
	ep := p.Engines[0]
	if got, want := ep.SplitGauges[vllm.WaitingByReason], map[string]float64{"capacity": 5, "deferred": 1}; !maps.Equal(got, want) {
		t.Errorf("waiting by reason %v, want %v", got, want)
	}
	if !ep.HasGauge[vllm.WaitingByReason] || ep.Gauges[vllm.WaitingByReason] != 6 {
		t.Errorf("waiting by reason combined %v (has %v), want 6", ep.Gauges[vllm.WaitingByReason], ep.HasGauge[vllm.WaitingByReason])
	}
	pos := map[string]float64{}
	var drafts float64
	for _, cs := range ep.Counters {
		switch cs.Family {
		case vllm.SpecAcceptedPerPos:
			pos[cs.Reason] += cs.Value
		case vllm.SpecDrafts:
			drafts += cs.Value
		}
	}
	if want := map[string]float64{"0": 7, "1": 3}; !maps.Equal(pos, want) {
		t.Errorf("accepted per position %v, want %v", pos, want)
	}
	if drafts != 5 {
		t.Errorf("drafts %v, want 5 (vllm_ spelling)", drafts)
	}
}
