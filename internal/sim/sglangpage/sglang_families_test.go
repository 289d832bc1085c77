package sglangpage

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// sglangDeclared is what SGLang declares of each family the simulator serves, written from
// python/sglang/srt/observability/metrics_collector.py (SchedulerMetricsCollector.__init__,
// TokenizerMetricsCollector.__init__): its type, HELP text, the labels it adds to its
// collector's (extra), and its bucket bounds. Gauges without multiprocess_mode are rendered per
// process by prometheus_client, with pid.
var sglangDeclared = map[string]struct {
	typ, help string
	tokenizer bool // the tokenizer's labels (model_name, engine_type), not the scheduler's
	extra     []string
	buckets   []float64
}{
	"sglang:num_running_reqs":   {typ: "gauge", help: "The number of running requests."},
	"sglang:num_queue_reqs":     {typ: "gauge", help: "The number of requests in the waiting queue."},
	"sglang:gen_throughput":     {typ: "gauge", help: "The generation throughput (token/s)."},
	"sglang:cache_hit_rate":     {typ: "gauge", help: "The prefix cache hit rate."},
	"sglang:token_usage":        {typ: "gauge", help: "The token usage."},
	"sglang:num_used_tokens":    {typ: "gauge", help: "The number of used tokens."},
	"sglang:spec_accept_length": {typ: "gauge", help: "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward)."},
	"sglang:spec_accept_rate":   {typ: "gauge", help: "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch)."},
	"sglang:num_retracted_reqs": {typ: "gauge", help: "The number of retracted requests.", extra: []string{"pid"}},
	"sglang:num_paused_reqs":    {typ: "gauge", help: "The number of paused requests by async weight sync.", extra: []string{"pid"}},
	"sglang:weight_load_duration_seconds": {typ: "gauge", extra: []string{"source"},
		help: "Wall time of the most recent update_weights_from_<source> call on this scheduler rank (seconds). `source` label is one of: disk, distributed, tensor, ipc. Event-detection via changes(...[<range>]) > 0 — no separate counter needed."},
	"sglang:num_retracted_requests_total": {typ: "counter", help: "Total number of retracted requests."},
	"sglang:realtime_tokens_total": {typ: "counter", extra: []string{"mode"},
		help: "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode."},
	"sglang:queue_time_seconds": {typ: "histogram", help: "Histogram of queueing time in seconds.",
		buckets: []float64{0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
			200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000}},

	"sglang:prompt_tokens_total":     {typ: "counter", help: "Number of prefill tokens processed.", tokenizer: true, extra: []string{"is_streaming"}},
	"sglang:generation_tokens_total": {typ: "counter", help: "Number of generation tokens processed.", tokenizer: true, extra: []string{"is_streaming"}},
	"sglang:cached_tokens_total": {typ: "counter", help: "Number of cached prompt tokens by source (device/host/storage).", tokenizer: true,
		extra: []string{"cache_source"}},
	"sglang:num_requests_total":         {typ: "counter", help: "Number of requests processed.", tokenizer: true, extra: []string{"is_streaming"}},
	"sglang:num_aborted_requests_total": {typ: "counter", help: "Number of requests aborted.", tokenizer: true},
	"sglang:time_to_first_token_seconds": {typ: "histogram", help: "Histogram of time to first token in seconds.", tokenizer: true,
		extra: []string{"is_streaming"}, buckets: []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}},
	"sglang:inter_token_latency_seconds": {typ: "histogram", help: "Histogram of inter-token latency in seconds.", tokenizer: true,
		buckets: []float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
			0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000}},
	"sglang:e2e_request_latency_seconds": {typ: "histogram", help: "Histogram of End-to-end request latency in seconds", tokenizer: true,
		extra: []string{"is_streaming"}, buckets: []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400}},
	"sglang:spec_verify_calls_total": {typ: "counter", help: "Number of speculative decoding verification calls.", tokenizer: true},
	"sglang:prompt_tokens_histogram": {typ: "histogram", help: "Histogram of prompt token length.", tokenizer: true, buckets: sglangPromptBuckets},
	"sglang:generation_tokens_histogram": {typ: "histogram", help: "Histogram of generation token length.", tokenizer: true,
		buckets: sglangPromptBuckets},

	"sglang:estimated_flops_per_gpu_total": {typ: "counter",
		help: "Estimated number of floating point operations per GPU (for Model FLOPs Utilization calculations)."},
	"sglang:estimated_read_bytes_per_gpu_total": {typ: "counter",
		help: "Estimated number of bytes read from memory per GPU (for Model FLOPs Utilization calculations)."},
	"sglang:estimated_write_bytes_per_gpu_total": {typ: "counter",
		help: "Estimated number of bytes written to memory per GPU (for Model FLOPs Utilization calculations)."},
	"sglang:kv_available_tokens":               {typ: "gauge", help: "Number of free token slots in the KV cache pool."},
	"sglang:kv_evictable_tokens":               {typ: "gauge", help: "Number of evictable (radix-cached) token slots in the KV cache pool."},
	"sglang:kv_used_tokens":                    {typ: "gauge", help: "Number of actively used token slots in the KV cache pool."},
	"sglang:max_total_num_tokens":              {typ: "gauge", help: "Maximum total number of tokens in the KV cache pool."},
	"sglang:num_retracted_input_tokens_total":  {typ: "counter", help: "Total number of retracted input tokens."},
	"sglang:num_retracted_output_tokens_total": {typ: "counter", help: "Total number of retracted output tokens."},
	"sglang:prefill_effective_tokens_total": {typ: "counter", extra: []string{"mode"},
		help: "Effective prefill tokens with retracted-request re-counts excluded, updated on each log interval. mode: device_hit, " +
			"host_hit, storage_hit, input. Windowed prefix cache hit rate = rate(sum of *_hit) / rate(sum of all modes); " +
			"per-tier rate uses a single *_hit mode in the numerator."},
}

// sglangPromptBuckets are TokenizerMetricsCollector's default_bucket_prompt_tokens.
var sglangPromptBuckets = []float64{100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000,
	12500, 15000, 17500, 20000, 22500, 25000, 27500, 30000, 35000, 40000, 60000, 80000, 100000, 200000, 300000, 400000,
	600000, 800000, 1000000, 1100000}

// sampleLabels splits a sample (name and labels, no value) into its name and label names, and
// gives le's value.
func sampleLabels(t *testing.T, s string) (name string, labels []string, le string) {
	t.Helper()
	name, rest, _ := strings.Cut(s, "{")
	for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), `",`) {
		k, v, ok := strings.Cut(kv, `="`)
		if !ok {
			t.Fatalf("sample %q", s)
		}
		if k == "le" {
			le = strings.TrimSuffix(v, `"`)
			continue
		}
		labels = append(labels, k)
	}
	return name, labels, le
}

// Every family on the simulator's SGLang pages has SGLang's declared type, HELP text, labels and
// bucket bounds, on a server with and without data parallelism, before and after requests have
// finished, in the asynchronous loop's weight syncs and with speculative decoding; every family
// declared is served but
// aborted requests, which the simulator has none of.
func TestSGLangFamiliesAsDeclared(t *testing.T) {
	async := simtest.AsyncConfig()
	async.Engine = fleetconfig.EngineSGLang
	async.Servers = 1
	seen := map[string]bool{}
	for _, c := range []struct {
		dp                    int
		async, priority, spec bool
	}{{1, false, false, false}, {2, false, false, false}, {2, true, false, false}, {2, false, true, false}, {2, false, false, true}} {
		dp := c.dp
		cfg := simtest.SGLangConfig(1, dp)
		cfg.Workload.Batches = 1
		if c.async {
			cfg = async
		}
		cfg.Priority = c.priority
		if c.spec {
			cfg.SpecDecode = 3
			cfg.MFUMetrics = true
		}
		s := mustSim(t, cfg)
		for _, at := range []time.Duration{0, 20 * time.Second, 40 * time.Second} {
			s.AdvanceTo(at)
			for _, f := range simtest.ParseStructure(t, string(s.Page(0, simtest.Start))) {
				d, ok := sglangDeclared[f.Name]
				if !ok {
					t.Errorf("dp %d: %s is no family of SGLang's", dp, f.Name)
					continue
				}
				seen[f.Name] = true
				if f.Type != d.typ || f.Help != d.help {
					t.Errorf("dp %d: %s: TYPE %q HELP %q, SGLang declares %q %q", dp, f.Name, f.Type, f.Help, d.typ, d.help)
				}
				want := []string{"engine_type", "model_name"}
				if !d.tokenizer {
					want = append(want, "moe_ep_rank", "pp_rank", "tp_rank")
					if dp > 1 {
						want = append(want, "dp_rank")
					}
					if c.priority {
						want = append(want, "priority")
					}
				}
				want = append(want, d.extra...)
				slices.Sort(want)
				les := map[string][]float64{}
				for _, smp := range f.Samples {
					name, labels, le := sampleLabels(t, smp)
					if !slices.Equal(labels, want) {
						t.Errorf("dp %d: %s: labels %q, SGLang's %q", dp, name, labels, want)
					}
					if d.typ != "histogram" && name != f.Name {
						t.Errorf("dp %d: sample %s in family %s", dp, name, f.Name)
					}
					if name == f.Name+"_bucket" {
						key := strings.Replace(smp, `le="`+le+`"`, "", 1)
						v, err := strconv.ParseFloat(le, 64)
						if err != nil {
							t.Fatal(err)
						}
						les[key] = append(les[key], v)
					}
				}
				if d.typ == "histogram" && len(les) == 0 {
					t.Errorf("dp %d: %s has no bucket", dp, f.Name)
				}
				for key, got := range les {
					if want := append(slices.Clone(d.buckets), math.Inf(1)); !slices.Equal(got, want) {
						t.Errorf("dp %d: %s: buckets %v, SGLang's %v", dp, key, got, want)
					}
				}
			}
		}
	}
	for name := range sglangDeclared {
		if !seen[name] && name != "sglang:num_aborted_requests_total" {
			t.Errorf("no page had %s", name)
		}
	}
}

// SGLang's tokenizer series appear at their first observation, not at 0 from the start: TTFT at
// a request's first token, the token and request counters and e2e with the first finished
// request; aborted requests never, as no simulated request is aborted.
func TestSGLangTokenizerSeriesAtFirstRequest(t *testing.T) {
	cfg := simtest.SGLangConfig(1, 1)
	cfg.Workload.Batches = 1
	s := mustSim(t, cfg)
	finish := []string{"sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:num_requests_total", "sglang:e2e_request_latency_seconds"}
	var ttftFirst, finished bool
	for at := time.Duration(0); at < 30*time.Second && !finished; at += 50 * time.Millisecond {
		s.AdvanceTo(at)
		fams := map[string]bool{}
		for _, f := range simtest.ParseStructure(t, string(s.Page(0, simtest.Start))) {
			fams[f.Name] = len(f.Samples) > 0
		}
		if fams["sglang:num_aborted_requests_total"] {
			t.Fatalf("at %s: aborted requests without an abort", at)
		}
		finished = fams["sglang:num_requests_total"]
		for _, n := range finish {
			if fams[n] != finished {
				t.Fatalf("at %s: %s shown %v, requests %v: want them together", at, n, fams[n], finished)
			}
		}
		if at == 0 && fams["sglang:time_to_first_token_seconds"] {
			t.Fatal("TTFT at 0 before any token")
		}
		if finished && !fams["sglang:time_to_first_token_seconds"] {
			t.Fatalf("at %s: a finished request without TTFT", at)
		}
		ttftFirst = ttftFirst || !finished && fams["sglang:time_to_first_token_seconds"]
	}
	if !finished || !ttftFirst {
		t.Errorf("finished %v, TTFT before the first finish %v: want both", finished, ttftFirst)
	}
}

// With priority scheduling (Config.Priority), every scheduler series is labelled priority="",
// and the running and queue gauges come per priority too, each total the sum of its
// priorities' series (all the priorities known are set at every log point); the page parser
// reads the totals.
func TestSGLangPriorityGauges(t *testing.T) {
	cfg := simtest.SGLangConfig(1, 2)
	cfg.Workload.Batches = 1
	cfg.Priority = true
	s := mustSim(t, cfg)
	var parts int
	for at := time.Second; at <= 20*time.Second; at += time.Second {
		s.AdvanceTo(at)
		body := s.Page(0, simtest.Start)
		totals := map[string]float64{} // by family and dp_rank
		sums := map[string]float64{}
		for _, f := range simtest.ParseStructure(t, string(body)) {
			if f.Name != "sglang:num_running_reqs" && f.Name != "sglang:num_queue_reqs" {
				continue
			}
			for _, smp := range f.Samples {
				line := ""
				for _, l := range strings.Split(string(body), "\n") {
					if strings.HasPrefix(l, smp+" ") {
						line = l
					}
				}
				v, err := strconv.ParseFloat(line[len(smp)+1:], 64)
				if err != nil {
					t.Fatal(err)
				}
				dp := f.Name + "/" + smp[strings.Index(smp, `dp_rank="`)+9:][:1]
				if strings.Contains(smp, `priority=""`) {
					totals[dp] += v
				} else {
					sums[dp] += v
					parts++
				}
			}
		}
		for k, v := range totals {
			if sums[k] != v {
				t.Errorf("at %s: %s total %v, its priorities' series %v", at, k, v, sums[k])
			}
		}
		p, err := page.ParsePage(body)
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range p.Engines {
			if ep.Labels == "" {
				continue // the tokenizer
			}
			dp := ep.Labels[len(`dp_rank="`):][:1]
			if ep.Gauges[vllm.Running] != totals["sglang:num_running_reqs/"+dp] || ep.Gauges[vllm.Waiting] != totals["sglang:num_queue_reqs/"+dp] {
				t.Errorf("at %s: %s reads running %v waiting %v, the totals %v %v", at, ep.Labels, ep.Gauges[vllm.Running], ep.Gauges[vllm.Waiting],
					totals["sglang:num_running_reqs/"+dp], totals["sglang:num_queue_reqs/"+dp])
			}
		}
	}
	if parts == 0 {
		t.Error("no series per priority")
	}
}
