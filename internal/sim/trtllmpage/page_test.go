package trtllmpage

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// familiesOf returns the families a page has, in its order.
func familiesOf(t *testing.T, page string) []string {
	t.Helper()
	var names []string
	for _, f := range simtest.ParseStructure(t, page) {
		names = append(names, f.Name)
	}
	return names
}

// firstFinish advances s in steps of 10 ms until a request finished on engine 0 and returns the
// page of that moment.
func firstFinish(t *testing.T, s *fleetmodel.Sim) string {
	t.Helper()
	for at := 10 * time.Millisecond; at < time.Minute; at += 10 * time.Millisecond {
		s.AdvanceTo(at)
		if s.Engines[0].Stats.Trt.First.Logs > 0 {
			return string(s.Page(0, simtest.Start))
		}
	}
	t.Fatal("no request finished within a minute")
	return ""
}

// TestCreationPoints follows a server's page from its start: before any request it has only
// what trtllm-serve makes at start (prompt_cached_tokens_total and the config info gauges);
// the per-request and iteration families come with the first finished request, request_success
// with a child per finish reason seen, in the order they were first seen.
func TestCreationPoints(t *testing.T) {
	cfg := trtllmConfig()
	cfg.Workload.MaxTokens = 64 // some outputs are cut: reason length
	s := mustSim(t, cfg)
	start := familiesOf(t, pageAt(s, 0))
	if want := []string{"trtllm_prompt_cached_tokens_total", "trtllm_model_config_info", "trtllm_parallel_config_info",
		"trtllm_kv_cache_config_info"}; !slices.Equal(start, want) {
		t.Errorf("before any request the page has %v, want %v", start, want)
	}
	first := familiesOf(t, firstFinish(t, s))
	for _, name := range []string{"trtllm_request_success_total", "trtllm_prompt_tokens_total", "trtllm_generation_tokens_total",
		"trtllm_num_requests_completed_total", "trtllm_num_requests_running", "trtllm_num_requests_waiting", "trtllm_kv_cache_hit_rate",
		"trtllm_kv_cache_utilization", "trtllm_num_paused_requests", "trtllm_e2e_request_latency_seconds",
		"trtllm_time_to_first_token_seconds", "trtllm_prompt_cached_tokens_per_request"} {
		if !slices.Contains(first, name) {
			t.Errorf("after the first finished request the page lacks %s: %v", name, first)
		}
	}
	s.AdvanceTo(2 * time.Minute)
	tr := &s.Engines[0].Stats.Trt
	if tr.Success[0] == 0 || tr.Success[1] == 0 {
		t.Fatalf("the batch did not finish requests with both reasons: %v", tr.Success)
	}
	var reasons []string
	for _, line := range strings.Split(string(s.Page(0, simtest.Start)), "\n") {
		if strings.HasPrefix(line, "trtllm_request_success_total{") {
			_, rest, _ := strings.Cut(line, `finished_reason="`)
			r, _, _ := strings.Cut(rest, `"`)
			reasons = append(reasons, r)
		}
	}
	want := []string{"stop", "length"}
	if tr.First.Reason[1] < tr.First.Reason[0] {
		want = []string{"length", "stop"}
	}
	if !slices.Equal(reasons, want) {
		t.Errorf("request_success children %v, want %v (the order of their first requests)", reasons, want)
	}
}

// TestGaugesHoldBetweenFinishes: trtllm-serve logs iteration statistics only while a drain
// begun at a request's finish goes on, so after a batch the page keeps its last iteration's
// figures, which counted the finishing request as active, while the engine is idle.
func TestGaugesHoldBetweenFinishes(t *testing.T) {
	s := mustSim(t, trtllmConfig())
	s.AdvanceTo(2 * time.Minute)
	e := s.Engines[0]
	if e.Busy() {
		t.Fatal("the engine is still busy two minutes in")
	}
	g := samplesOf(t, string(s.Page(0, simtest.Start)), "finished_reason")
	if r := g["trtllm_num_requests_running"]; r < 1 || r != float64(e.Stats.Trt.Logged.Active) {
		t.Errorf("the idle engine's page shows %v running, the last logged iteration %d", r, e.Stats.Trt.Logged.Active)
	}
	if l := g["trtllm_iteration_latency_seconds"]; l <= 0 {
		t.Errorf("the idle engine's page shows iteration latency %v, not the batch's last iteration's", l)
	}
}

// TestPageCountsEqualTotals runs a batch with aborted requests and preemptions and checks that
// the page's counters and histograms equal the model's counts at the finishes (Totals), which
// once the batch is over equal the engine's counts of tokens as they were computed, and that
// every finishing iteration was logged: num_requests_completed_total counts every finished
// request, aborted ones (cancelled) too.
func TestPageCountsEqualTotals(t *testing.T) {
	cfg := trtllmConfig()
	cfg.Workload.Abort = 0.2
	cfg.Workload.MaxTokens = 64
	cfg.BlocksPerEngine = 300 // small enough to preempt
	s := mustSim(t, cfg)
	s.AdvanceTo(2 * time.Minute)
	g := samplesOf(t, string(s.Page(0, simtest.Start)), "finished_reason")
	tot := s.Totals()
	for _, k := range []string{"prompt_tokens", "generation_tokens", "prompt_cached_tokens"} {
		if g["trtllm_"+k+"_total"] != tot[k] || tot[k] == 0 {
			t.Errorf("%s: page %v, Totals %v", k, g["trtllm_"+k+"_total"], tot[k])
		}
	}
	finished := 0.0
	for _, r := range []string{"stop", "length", "cancelled"} {
		if g["trtllm_request_success_total{"+r+"}"] != tot["request_success/"+r] || tot["request_success/"+r] == 0 {
			t.Errorf("request_success{%s}: page %v, Totals %v", r, g["trtllm_request_success_total{"+r+"}"], tot["request_success/"+r])
		}
		finished += tot["request_success/"+r]
	}
	// Once every request finished, the counts logged at the finishes equal the engine's own,
	// counted as tokens were computed and generated.
	es := &s.Engines[0].Stats
	for _, c := range []struct {
		what       string
		page, want float64
	}{{"prompt tokens", g["trtllm_prompt_tokens_total"], float64(es.PromptTokens)},
		{"generated tokens", g["trtllm_generation_tokens_total"], float64(es.GenerationTokens)},
		{"cached prompt tokens", g["trtllm_prompt_cached_tokens_total"], float64(es.PromptCached)},
		{"stop", g["trtllm_request_success_total{stop}"], float64(es.Success[0])},
		{"length", g["trtllm_request_success_total{length}"], float64(es.Success[1])}} {
		if c.page != c.want {
			t.Errorf("%s: page %v, the engine counted %v", c.what, c.page, c.want)
		}
	}
	if tot["request_success/cancelled"] != tot["requests_aborted"] {
		t.Errorf("%v cancelled, %v aborted", tot["request_success/cancelled"], tot["requests_aborted"])
	}
	if g["trtllm_num_requests_completed_total"] != finished {
		t.Errorf("num_requests_completed_total %v, %v finished requests", g["trtllm_num_requests_completed_total"], finished)
	}
	if tot["num_preemptions"] == 0 {
		t.Error("the batch preempted nothing: the test does not check paused requests")
	}
	for _, h := range []string{"e2e_request_latency_seconds", "time_to_first_token_seconds", "time_per_output_token_seconds",
		"request_prefill_time_seconds", "request_decode_time_seconds", "request_inference_time_seconds"} {
		c, sum := g["trtllm_"+h+"_count"], g["trtllm_"+h+"_sum"]
		if c != tot[h+"_count"] || math.Abs(sum-tot[h+"_sum"]) > 1e-9*sum || c == 0 {
			t.Errorf("%s: page count %v sum %v, Totals %v %v", h, c, sum, tot[h+"_count"], tot[h+"_sum"])
		}
	}
}

const python = "/usr/bin/python3"

// parseScript prints the page on stdin as prometheus_client's parser reads it: each sample's
// family, type, name, labels and value, as JSON.
const parseScript = `
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    for s in f.samples:
        out.append([f.name, f.type, s.name, s.labels, s.value])
json.dump(out, sys.stdout)
`

// TestPageParsesWithPrometheusClient reads a page of a batch in flight with Debian's
// prometheus_client parser: every sample is read, under its family and type, with the value
// the page has.
func TestPageParsesWithPrometheusClient(t *testing.T) {
	if out, err := exec.Command(python, "-c", "import prometheus_client").CombinedOutput(); err != nil {
		msg := "SKIPPED: needs " + python + " with prometheus_client (Debian: python3-prometheus-client): " + strings.TrimSpace(string(out)) + " " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cfg := trtllmConfig()
	cfg.Workload.MaxTokens = 64
	s := mustSim(t, cfg)
	page := pageAt(s, 20*time.Second)
	cmd := exec.Command(python, "-c", parseScript)
	cmd.Stdin = strings.NewReader(page)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("prometheus_client cannot parse the page: %v", err)
	}
	var samples [][]any
	if err := json.Unmarshal(out, &samples); err != nil {
		t.Fatal(err)
	}
	want := samplesOf(t, page, "finished_reason", "le")
	types := map[string]string{}
	for _, f := range simtest.ParseStructure(t, page) {
		types[strings.TrimSuffix(f.Name, "_total")] = f.Type
	}
	if len(samples) != len(want) || len(samples) < 100 {
		t.Fatalf("prometheus_client reads %d samples, the page has %d", len(samples), len(want))
	}
	for _, smp := range samples {
		family, typ, name, labels, value := smp[0].(string), smp[1].(string), smp[2].(string), smp[3].(map[string]any), smp[4].(float64)
		if types[family] != typ {
			t.Errorf("%s: prometheus_client reads type %s, the page says %s", family, typ, types[family])
		}
		key := name
		var keep []string
		for _, l := range []string{"finished_reason", "le"} {
			if v, ok := labels[l]; ok {
				keep = append(keep, v.(string))
			}
		}
		if len(keep) > 0 {
			key += "{" + strings.Join(keep, ",") + "}"
		}
		if w, ok := want[key]; !ok || w != value {
			t.Errorf("%s: prometheus_client reads %v, the page has %v (%v)", key, value, w, ok)
		}
	}
}
