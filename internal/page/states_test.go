package page

import (
	"maps"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// statesPage is a vLLM engine's page with the state families of the time ledger, after a
// sleep(level=1): scheduler paused, weights offloaded, KV cache released. The resource labels
// come in either order.
const statesPage = `vllm:num_requests_running{engine="0",model_name="m"} 0
vllm:engine_sleep_resource_state{engine="0",model_name="m",resource="scheduler",state="running"} 0
vllm:engine_sleep_resource_state{engine="0",model_name="m",resource="scheduler",state="paused"} 1
vllm:engine_sleep_resource_state{engine="0",model_name="m",state="resident",resource="weights"} 0
vllm:engine_sleep_resource_state{engine="0",model_name="m",state="offloaded",resource="weights"} 1
vllm:engine_sleep_resource_state{engine="0",model_name="m",resource="kv_cache",state="released"} 1
vllm:engine_fully_awake{engine="0",model_name="m"} 0
vllm:engine_pause_state{engine="0",model_name="m"} 0
vllm:rl_weight_update_active{engine="0"} 1
`

// The two-label resource state set is read by "resource:state", whatever the order of the
// labels, and the ledger's other state families as plain gauges; a Parser reading the page's
// successors (the same lines, or lines edited) gives what ParsePage gives.
func TestStateFamiliesParse(t *testing.T) {
	want := map[string]float64{"scheduler:running": 0, "scheduler:paused": 1, "weights:resident": 0, "weights:offloaded": 1, "kv_cache:released": 1}
	check := func(name string, p *Page) {
		t.Helper()
		if len(p.Engines) != 1 {
			t.Fatalf("%s: %d workers, want 1", name, len(p.Engines))
		}
		ep := &p.Engines[0]
		if got := ep.SplitGauges[vllm.ResourceState]; !maps.Equal(got, want) {
			t.Errorf("%s: resource states %v, want %v", name, got, want)
		}
		for g, v := range map[vllm.Gauge]float64{vllm.FullyAwake: 0, vllm.PauseState: 0, vllm.WeightUpdateActive: 1} {
			if !ep.HasGauge[g] || ep.Gauges[g] != v {
				t.Errorf("%s: %s = %v (present %v), want %v", name, vllm.Gauges[g].Name, ep.Gauges[g], ep.HasGauge[g], v)
			}
		}
	}
	pg, err := ParsePage([]byte(statesPage))
	if err != nil {
		t.Fatal(err)
	}
	check("ParsePage", pg)
	p := NewParser(Options{})
	for i, body := range []string{statesPage, statesPage, statesPage + "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0\n"} {
		pg, err := p.Parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		check([]string{"first parse", "replay", "partial"}[i], pg)
	}
	if p.partials != 1 {
		t.Errorf("%d pages read by resyncing, want the edited one", p.partials)
	}
}

// SGLang's weight load durations are kept by source, on the worker of their scheduler labels.
func TestWeightLoadParse(t *testing.T) {
	lbl := `engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"`
	body := strings.Join([]string{
		`sglang:num_running_reqs{dp_rank="1",` + lbl + `} 2`,
		`sglang:weight_load_duration_seconds{dp_rank="1",` + lbl + `,source="distributed"} 3.5`,
		`sglang:weight_load_duration_seconds{dp_rank="1",` + lbl + `,source="disk"} 12.25`,
		`sglang:num_requests_total{engine_type="unified",model_name="m"} 7`,
	}, "\n") + "\n"
	p, err := ParsePage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range p.Engines {
		got := ep.SplitGauges[vllm.WeightLoad]
		switch ep.Labels {
		case `dp_rank="1"`:
			if want := map[string]float64{"distributed": 3.5, "disk": 12.25}; !maps.Equal(got, want) {
				t.Errorf("load durations %v, want %v", got, want)
			}
		default: // the tokenizer's worker
			if got != nil || ep.HasGauge[vllm.WeightLoad] {
				t.Errorf("%q: load durations %v", ep.Labels, got)
			}
		}
	}
}
