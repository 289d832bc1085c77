package page

import (
	"maps"
	"slices"
	"testing"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The TensorRT-LLM fixtures are rendered from TensorRT-LLM's declarations
// (tensorrt_llm/metrics/collector.py, restated in testdata/trtllm-render/trtllm_decl.py: names,
// HELP texts, labels, buckets, and which call creates which series) by Debian's
// prometheus_client, in multiprocess mode as trtllm-serve serves /prometheus/metrics, its
// gauges labelled with the server's pid:
//   - trtllm-fresh: a server just started: the config info gauges and prompt_cached_tokens_total,
//     created at 0 with the collector, and nothing else;
//   - trtllm-serve: after three requests finished (two stopped, one at its length) and one
//     drain of the iteration statistics (3 running, 2 waiting, 1000 of 4000 KV blocks used, 1
//     paused, 300 draft tokens of which 180 accepted);
//   - trtllm-dynamo-colon: the same figures spelled trtllm:, as Dynamo's older releases
//     re-export them.

// The served model's labels, which every series of the fixtures carries.
const trtllmSeries = `engine_type="pytorch",model_name="Qwen3-8B"`

func TestTRTLLMFixturePages(t *testing.T) {
	for _, file := range []string{"prometheus-client-render-trtllm-serve.prom", "prometheus-client-render-trtllm-dynamo-colon.prom"} {
		t.Run(file, func(t *testing.T) {
			p, err := ParsePage(readPage(t, file))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Engines) != 1 {
				t.Fatalf("%d workers, want the server alone: %+v", len(p.Engines), p.Engines)
			}
			ep := &p.Engines[0]
			if ep.Kind != vllm.TRTLLM || ep.Engine != "" || ep.Labels != "" || ep.Copy != "" || ep.Tokenizer() {
				t.Errorf("worker kind %v engine %q labels %q copy %q tokenizer %v, want one TensorRT-LLM worker of no labels",
					ep.Kind, ep.Engine, ep.Labels, ep.Copy, ep.Tokenizer())
			}
			gauges := map[vllm.Gauge]float64{vllm.Running: 3, vllm.Waiting: 2, vllm.KVUsage: 0.25, vllm.TRTLLMPausedReqs: 1}
			for g := range vllm.NumGauges {
				want, ok := gauges[g]
				if ep.HasGauge[g] != ok || ep.Gauges[g] != want {
					t.Errorf("gauge %s = %v (%v), want %v (%v)", vllm.Gauges[g].Name, ep.Gauges[g], ep.HasGauge[g], want, ok)
				}
			}
			counters := map[string]float64{
				"prompt_tokens/" + trtllmSeries:     3 * 1024,
				"generation_tokens/" + trtllmSeries: 256 + 257 + 258,
				"cached_tokens/" + trtllmSeries:     3 * 512,
				"request_success/" + `engine_type="pytorch",finished_reason="stop",model_name="Qwen3-8B"`:   2,
				"request_success/" + `engine_type="pytorch",finished_reason="length",model_name="Qwen3-8B"`: 1,
				"spec_decode_num_draft_tokens/" + trtllmSeries:                                              300,
				"spec_decode_num_accepted_tokens/" + trtllmSeries:                                           180,
			}
			got := map[string]float64{}
			for _, c := range ep.Counters {
				got[vllm.Counters[c.Family].Name+"/"+c.Key] = c.Value
				if c.Family == vllm.RequestSuccess && c.Reason == "" {
					t.Errorf("request_success series %s without its finished_reason", c.Key)
				}
				if c.HasCreated {
					t.Errorf("%s has a _created on a multiprocess page", vllm.Counters[c.Family].Name)
				}
			}
			if !maps.Equal(got, counters) {
				t.Errorf("counters\n%v\nwant\n%v", got, counters)
			}
			// Every latency histogram observed the three requests, the per-request TPOT under its
			// own family, not as vLLM's inter-token latency.
			hists := []vllm.Hist{vllm.TTFT, vllm.E2E, vllm.QueueTime, vllm.ReqPrefillTime, vllm.ReqDecodeTime, vllm.ReqInferenceTime, vllm.ReqTPOT}
			var fams []vllm.Hist
			for _, h := range ep.Hists {
				fams = append(fams, h.Family)
				if h.Key != trtllmSeries || h.Count != 3 || !h.HasSum || h.Buckets[len(h.Buckets)-1].Count != 3 {
					t.Errorf("%s: key %s count %v sum %v, want 3 requests of the served model", vllm.Hists[h.Family].Name, h.Key, h.Count, h.HasSum)
				}
			}
			slices.Sort(fams)
			if !slices.Equal(fams, hists) {
				t.Errorf("histograms %v, want %v", fams, hists)
			}
		})
	}
}

// A server that has not finished a request yet shows its cached-token counter at 0 and none
// of the families that its first finish and its first drain of iteration statistics create:
// no gauge, so no ledger state but idle's absence, and a hit rate with nothing to divide.
func TestTRTLLMFreshPage(t *testing.T) {
	p, err := ParsePage(readPage(t, "prometheus-client-render-trtllm-fresh.prom"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Engines) != 1 || p.Engines[0].Kind != vllm.TRTLLM {
		t.Fatalf("workers %+v, want one TensorRT-LLM worker", p.Engines)
	}
	ep := &p.Engines[0]
	for g := range vllm.NumGauges {
		if ep.HasGauge[g] {
			t.Errorf("gauge %s on a page whose only gauges are config info", vllm.Gauges[g].Name)
		}
	}
	if len(ep.Counters) != 1 || ep.Counters[0].Family != vllm.CachedTokens || ep.Counters[0].Value != 0 || ep.Counters[0].Key != trtllmSeries {
		t.Errorf("counters %+v, want cached_tokens at 0 alone", ep.Counters)
	}
	if len(ep.Hists) != 0 {
		t.Errorf("histograms %+v before any request", ep.Hists)
	}
}

// A vLLM page and a TensorRT-LLM page read alike give workers of their own kinds: the names
// do not cross (TensorRT-LLM's time_per_output_token_seconds is no vLLM worker's ITL, nor
// vLLM's its TPOT).
func TestTRTLLMNamesStayApart(t *testing.T) {
	body := string(readPage(t, "prometheus-client-render-trtllm-serve.prom")) +
		"# TYPE vllm:time_per_output_token_seconds histogram\n" +
		`vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf"} 4` + "\n" +
		`vllm:time_per_output_token_seconds_count{engine="0"} 4` + "\n" +
		`vllm:time_per_output_token_seconds_sum{engine="0"} 0.2` + "\n"
	p, err := ParsePage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[vllm.Engine][]vllm.Hist{}
	for _, ep := range p.Engines {
		for _, h := range ep.Hists {
			kinds[ep.Kind] = append(kinds[ep.Kind], h.Family)
		}
	}
	if v := kinds[vllm.VLLM]; !slices.Equal(v, []vllm.Hist{vllm.ITL}) {
		t.Errorf("vLLM worker's histograms %v, want its ITL alone", v)
	}
	if slices.Contains(kinds[vllm.TRTLLM], vllm.ITL) || !slices.Contains(kinds[vllm.TRTLLM], vllm.ReqTPOT) {
		t.Errorf("TensorRT-LLM worker's histograms %v, want its per-request TPOT and no ITL", kinds[vllm.TRTLLM])
	}
}
