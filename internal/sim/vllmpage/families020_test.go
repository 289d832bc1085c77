package vllmpage

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// TestVLLM020Families checks the families vLLM 0.20's PrometheusStatLogger creates that the
// rendered reference page leaves out: num_requests_waiting_by_reason (children reason by
// reason, engine by engine, as the logger creates them) and request_prefill_kv_computed_tokens
// (1-2-5 buckets up to max_model_len), each with vLLM's HELP text; and that the older layouts
// have neither.
func TestVLLM020Families(t *testing.T) {
	fams := simtest.ParseStructure(t, renderIdle(t, simtest.GoldenConfig("0.20")))
	byName := map[string]simtest.PageFamily{}
	var order []string
	for _, f := range fams {
		byName[f.Name] = f
		order = append(order, f.Name)
	}
	model := `model_name="Qwen/Qwen3-1.7B"`
	w := byName["vllm:num_requests_waiting_by_reason"]
	if w.Type != "gauge" || w.Help != "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "+
		"'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting." {
		t.Errorf("waiting by reason: type %q help %q", w.Type, w.Help)
	}
	var want []string
	for _, reason := range []string{"capacity", "deferred"} {
		for e := range 2 {
			want = append(want, fmt.Sprintf(`vllm:num_requests_waiting_by_reason{engine="%d",%s,reason="%s"}`, e, model, reason))
		}
	}
	if !slices.Equal(w.Samples, want) {
		t.Errorf("waiting by reason samples:\n got %q\nwant %q", w.Samples, want)
	}
	// vLLM registers it right after num_requests_waiting and before the sleep state.
	if i := slices.Index(order, "vllm:num_requests_waiting_by_reason"); i < 1 || order[i-1] != "vllm:num_requests_waiting" || order[i+1] != "vllm:engine_sleep_state" {
		t.Errorf("waiting by reason is not between num_requests_waiting and engine_sleep_state: %q", order)
	}

	k := byName["vllm:request_prefill_kv_computed_tokens"]
	if k.Type != "histogram" || k.Help != "Histogram of new KV tokens computed during prefill (excluding cached tokens)." {
		t.Errorf("prefill kv computed: type %q help %q", k.Type, k.Help)
	}
	want = nil
	for e := range 2 {
		for _, le := range strings.Fields("1.0 2.0 5.0 10.0 20.0 50.0 100.0 200.0 500.0 1000.0 2000.0 +Inf") {
			want = append(want, fmt.Sprintf(`vllm:request_prefill_kv_computed_tokens_bucket{engine="%d",le="%s",%s}`, e, le, model))
		}
		want = append(want, fmt.Sprintf(`vllm:request_prefill_kv_computed_tokens_count{engine="%d",%s}`, e, model),
			fmt.Sprintf(`vllm:request_prefill_kv_computed_tokens_sum{engine="%d",%s}`, e, model))
	}
	if !slices.Equal(k.Samples, want) {
		t.Errorf("prefill kv computed samples:\n got %q\nwant %q", k.Samples, want)
	}
	if c := byName["vllm:request_prefill_kv_computed_tokens_created"]; c.Type != "gauge" || len(c.Samples) != 2 {
		t.Errorf("prefill kv computed _created: %+v", c)
	}

	for _, version := range []string{"0.10", "0.8"} {
		page := renderIdle(t, simtest.GoldenConfig(version))
		for _, name := range []string{"vllm:num_requests_waiting_by_reason", "vllm:request_prefill_kv_computed_tokens"} {
			if strings.Contains(page, name) {
				t.Errorf("the %s page has %s, which that release did not export", version, name)
			}
		}
	}
}

// TestVLLM020FamilyValues runs a busy fleet that preempts and checks the new families' values
// against the simulation's own requests at several moments: every waiting request waits for
// capacity (the scheduler defers none), and the prefill KV computed histogram holds one
// observation per finished request whose sum is the prompt tokens those requests did not find
// in a cache: the local_compute tokens counted at first tokens, minus those of the requests that
// have their first token but have not finished.
func TestVLLM020FamilyValues(t *testing.T) {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	cfg.KVConnector = true
	s := mustSim(t, cfg)
	for _, at := range []time.Duration{700 * time.Millisecond, 3 * time.Second, 9 * time.Second, 21 * time.Second} {
		s.AdvanceTo(at)
		var waitingPage, capacity, deferred, kvCount, kvSum, computed, success float64
		for i := range s.Servers {
			fams := simtest.ParsePage(t, s.Page(i, simtest.Start))
			for _, m := range fams["vllm:num_requests_waiting"].Metric {
				waitingPage += m.Gauge.GetValue()
			}
			for _, m := range fams["vllm:num_requests_waiting_by_reason"].Metric {
				switch labelOf(m, "reason") {
				case "capacity":
					capacity += m.Gauge.GetValue()
				case "deferred":
					deferred += m.Gauge.GetValue()
				default:
					t.Fatalf("waiting reason %q", labelOf(m, "reason"))
				}
			}
			for _, m := range fams["vllm:request_prefill_kv_computed_tokens"].Metric {
				kvCount += float64(m.Histogram.GetSampleCount())
				kvSum += m.Histogram.GetSampleSum()
			}
			for _, m := range fams["vllm:prompt_tokens_by_source_total"].Metric {
				if labelOf(m, "source") == "local_compute" {
					computed += m.Counter.GetValue()
				}
			}
			for _, m := range fams["vllm:request_success_total"].Metric {
				success += m.Counter.GetValue()
			}
		}
		var inFlight, waiting float64
		for _, e := range s.Engines {
			waiting += float64(e.Waiting.Len())
			count := func(r *core.Request) {
				if r.NumOutput >= 1 && r.NumOutput < r.OutputLen {
					inFlight += float64(r.PromptLen - r.CachedTokens - r.ExternalTokens)
				}
			}
			for _, r := range e.Running {
				count(r)
			}
			for i := range e.Waiting.Len() {
				count(e.Waiting.Buf[(e.Waiting.Head+i)%len(e.Waiting.Buf)])
			}
		}
		if capacity != waitingPage || capacity != waiting || deferred != 0 {
			t.Errorf("at %s: waiting %v on the pages, %v in the queues; by reason capacity %v deferred %v", at, waitingPage, waiting, capacity, deferred)
		}
		if kvCount != success {
			t.Errorf("at %s: %v prefill KV observations, %v finished requests", at, kvCount, success)
		}
		if kvSum != computed-inFlight {
			t.Errorf("at %s: prefill KV computed sum %v, want local_compute %v minus %v of unfinished requests", at, kvSum, computed, inFlight)
		}
	}
	tot := s.Totals()
	if tot["num_preemptions"] == 0 || tot["prompt_tokens_by_source/local_cache_hit"] == 0 ||
		tot["prompt_tokens_by_source/external_kv_transfer"] == 0 || tot["request_prefill_kv_computed_tokens_count"] == 0 {
		t.Errorf("the run never preempted, hit a cache or finished a request: %v", tot)
	}
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
