package page

import (
	"reflect"
	"testing"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The current SGLang fixtures are rendered from SGLang's declarations of today
// (python/sglang/srt/observability/metrics_collector.py: the scheduler's and the tokenizer's
// families, names, HELP texts, labels, buckets) by Debian's prometheus_client, in multiprocess
// mode with one process per SGLang process, as SGLang serves them (its "mostrecent" gauges as
// "max", which that prometheus_client predates and which renders the same when one process sets
// each series):
//   - current-dp2-tp2: DP 2 × TP 2 with --enable-metrics-for-all-schedulers, the tokenizer's
//     series split by is_streaming (three requests not streamed, one streamed);
//   - current-priority: one server with --enable-priority-scheduling: every scheduler series
//     labelled priority="", the running and queue gauges also per priority;
//   - sgl-model-gateway-engine-metrics: two DP-2 servers' pages (10.0.0.2's counts twice
//     10.0.0.1's) merged as sgl-model-gateway's /engine_metrics writes them
//     (core/metrics_aggregator.rs over the openmetrics-parser crate: ':' made '_', labels
//     sorted with le last, buckets then _sum then _count, Rust's numbers, families in the
//     arbitrary order of a HashMap, a blank line between them);
//   - sgl-model-gateway-label-mismatch.txt: the router's answer (status 500) when one of two
//     servers has DP and the other not;
//   - ray-sglang-two-replicas: two Ray Serve LLM replicas of SGLang (0.5.15 or later, metrics
//     through Ray) as Ray's metrics agent renders them with prometheus_client: SGLang's names
//     with ':' made '_' and Ray's "ray_" prefix, Ray's tags (ReplicaId, WorkerId, ...) beside
//     SGLang's labels.

// sglangCounts is what a test expects of a worker's tokenizer counts beside sglangWorker's.
type sglangCounts struct {
	generation, requests float64
	ttftCount, e2eCount  float64
}

func TestSGLangCurrentFixturePages(t *testing.T) {
	const (
		a = `worker_addr="http://10.0.0.1:30000"`
		b = `worker_addr="http://10.0.0.2:30000"`
	)
	tok := func(labels string, prompt, cached float64) sglangWorker {
		return sglangWorker{labels: labels, running: -1, retractions: -1, realtime: -1, prompt: prompt, cached: cached, hists: 4}
	}
	rank := func(labels string, running, waiting, kv, retractions, realtime float64) sglangWorker {
		return sglangWorker{labels: labels, running: running, waiting: waiting, kv: kv, retractions: retractions, realtime: realtime, prompt: -1, hists: 1}
	}
	tests := []struct {
		file    string
		workers []sglangWorker
		counts  map[string]sglangCounts // by worker labels
	}{
		{"prometheus-client-render-sglang-current-dp2-tp2.prom", []sglangWorker{
			// TTFT and e2e a series per is_streaming value, beside ITL and the prompt lengths.
			{labels: "", running: -1, retractions: -1, realtime: -1, prompt: 3*1024 + 2048, cached: 3 * 512, hists: 6},
			rank(`dp_rank="0"`, 3, 1, 0.25, 5, 113952),
			rank(`dp_rank="1"`, 4, 2, 0.35, 10, 2*113952),
		}, map[string]sglangCounts{"": {generation: 256 + 257 + 258 + 128, requests: 4, ttftCount: 4, e2eCount: 4}}},
		{"prometheus-client-render-sglang-current-priority.prom", []sglangWorker{
			// The totals under priority="", not the per-priority series added to them.
			{labels: "", running: 3, waiting: 1, kv: 0.25, retractions: 5, realtime: 113952, prompt: 3 * 1024, cached: 3 * 512, hists: 5},
		}, map[string]sglangCounts{"": {generation: 256 + 257 + 258, requests: 3, ttftCount: 3, e2eCount: 3}}},
		{"sgl-model-gateway-engine-metrics.prom", []sglangWorker{
			tok(a, 3*1024, 3*512),
			rank(`dp_rank="0",`+a, 3, 1, 0.25, 5, 113952),
			rank(`dp_rank="1",`+a, 4, 2, 0.35, 10, 2*113952),
			tok(b, 6*1024, 6*512),
			rank(`dp_rank="0",`+b, 3, 1, 0.25, 10, 2*113952),
			rank(`dp_rank="1",`+b, 4, 2, 0.35, 20, 4*113952),
		}, map[string]sglangCounts{
			a: {generation: 256 + 257 + 258, requests: 3, ttftCount: 3, e2eCount: 3},
			b: {generation: 6*256 + 15, requests: 6, ttftCount: 6, e2eCount: 6},
		}},
		{"ray-sglang-two-replicas.prom", []sglangWorker{
			{labels: replicaA, running: 3, waiting: 1, kv: 0.21, retractions: 2, realtime: 12000, prompt: 40960, cached: 20480, hists: 3},
			{labels: replicaB, running: 6, waiting: 2, kv: 0.42, retractions: 4, realtime: 24000, prompt: 81920, cached: 40960, hists: 3},
		}, map[string]sglangCounts{
			replicaA: {generation: 12000, requests: 40, ttftCount: 40, e2eCount: 40},
			replicaB: {generation: 24000, requests: 80, ttftCount: 80, e2eCount: 80},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body := readPage(t, tt.file)
			p, err := ParsePage(body)
			if err != nil {
				t.Fatal(err)
			}
			byLabels := map[string]EnginePage{}
			for _, ep := range p.Engines {
				if ep.Kind != vllm.SGLang || ep.Engine != "" {
					t.Errorf("worker %q is %v, engine %q: want SGLang's", ep.Labels, ep.Kind, ep.Engine)
				}
				byLabels[ep.Labels] = ep
			}
			if len(p.Engines) != len(tt.workers) || len(byLabels) != len(tt.workers) {
				t.Fatalf("workers %v, want %d", mapKeys(byLabels), len(tt.workers))
			}
			for _, w := range tt.workers {
				ep, ok := byLabels[w.labels]
				if !ok {
					t.Errorf("no worker %q among %v", w.labels, mapKeys(byLabels))
					continue
				}
				checkSGLangWorker(t, ep, w)
				if c, ok := tt.counts[w.labels]; ok {
					checkTokenizerCounts(t, ep, c)
				}
			}
			ps := NewParser(Options{})
			for range 2 {
				pg, err := ps.Parse(body)
				if err != nil || !reflect.DeepEqual(stripOwner(pg), p) {
					t.Fatalf("Parser: %v; its page differs from ParsePage's", err)
				}
			}
		})
	}
}

func mapKeys(m map[string]EnginePage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// checkTokenizerCounts checks a worker's generated tokens and requests, and its TTFT and e2e
// counts, added up over is_streaming's values.
func checkTokenizerCounts(t *testing.T, ep EnginePage, c sglangCounts) {
	t.Helper()
	if gen, _, _ := counter(ep, vllm.GenerationTokens); gen != c.generation {
		t.Errorf("%q: generation tokens %v, want %v", ep.Labels, gen, c.generation)
	}
	if req, _, _ := counter(ep, vllm.NumRequests); req != c.requests {
		t.Errorf("%q: requests %v, want %v", ep.Labels, req, c.requests)
	}
	var ttft, e2e float64
	for _, h := range ep.Hists {
		switch h.Family {
		case vllm.TTFT:
			ttft += h.Count
		case vllm.E2E:
			e2e += h.Count
		}
	}
	if ttft != c.ttftCount || e2e != c.e2eCount {
		t.Errorf("%q: TTFT count %v, e2e count %v; want %v and %v", ep.Labels, ttft, e2e, c.ttftCount, c.e2eCount)
	}
}

// The router's answer when a family's label names differ between its servers is no page: no
// SGLang worker is read from it.
func TestSGLangRouterMismatchAnswer(t *testing.T) {
	p, err := ParsePage(readPage(t, "sgl-model-gateway-label-mismatch.txt"))
	if err == nil && len(p.Engines) > 0 {
		t.Fatalf("workers %+v from the router's error", p.Engines)
	}
}
