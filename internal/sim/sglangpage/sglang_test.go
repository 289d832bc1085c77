package sglangpage

import (
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// sglangShape is a sample line's name and label names, the label values left out but le's.
func sglangShape(line string) string {
	name, rest, _ := strings.Cut(line[:strings.LastIndexByte(line, ' ')], "{")
	var names []string
	for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), `",`) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if k == "le" {
				k += v
			}
			names = append(names, k)
		}
	}
	return name + "{" + strings.Join(names, ",") + "}"
}

// The simulator's SGLang page has the families, types, HELP texts, label names and bucket
// bounds of a page that Python's prometheus_client renders from SGLang's metric definitions (a
// multiprocess registry of a server with two DP ranks: testdata/prometheus-client-render-
// sglang-dp2.prom); it leaves out families vllmstat does not read and SGLang sets only in cases
// the simulator has none of (grammars, disaggregation, LoRA).
func TestSGLangPageLayout(t *testing.T) {
	ref := simtest.ParseStructure(t, string(mustReadFile(t, "testdata/prometheus-client-render-sglang-dp2.prom")))
	want := map[string]simtest.PageFamily{}
	shapes := map[string]bool{}
	for _, f := range ref {
		want[f.Name] = f
		for _, s := range f.Samples {
			shapes[sglangShape(s+" 0")] = true
		}
	}
	s := mustSim(t, simtest.SGLangConfig(1, 2))
	s.AdvanceTo(20 * time.Second)
	got := simtest.ParseStructure(t, string(s.Page(0, simtest.Start)))
	seen := map[string]bool{}
	for _, f := range got {
		w, ok := want[f.Name]
		if !ok {
			t.Errorf("family %s is not on SGLang's page", f.Name)
			continue
		}
		seen[f.Name] = true
		if f.Type != w.Type || f.Help != w.Help {
			t.Errorf("%s: TYPE %q HELP %q, SGLang's are %q %q", f.Name, f.Type, f.Help, w.Type, w.Help)
		}
		for _, smp := range f.Samples {
			if sh := sglangShape(smp + " 0"); !shapes[sh] {
				t.Errorf("%s: sample %s has labels SGLang's page has not", f.Name, sh)
			}
		}
	}
	for _, name := range []string{"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage", "sglang:prompt_tokens_total",
		"sglang:generation_tokens_total", "sglang:cached_tokens_total", "sglang:num_retracted_requests_total", "sglang:realtime_tokens_total",
		"sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds", "sglang:e2e_request_latency_seconds", "sglang:queue_time_seconds"} {
		if !seen[name] {
			t.Errorf("the simulator's page lacks %s", name)
		}
	}
}

func mustReadFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pageCounters adds up a parsed SGLang page's counters and histogram counts over its workers,
// keyed like Totals.
func pageCounters(t *testing.T, body []byte, m map[string]float64) {
	t.Helper()
	p, err := page.ParsePage(body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[vllm.Counter]string{vllm.PromptTokens: "prompt_tokens", vllm.GenerationTokens: "generation_tokens",
		vllm.CachedTokens: "cached_tokens", vllm.NumRequests: "num_requests", vllm.Preemptions: "num_retracted_requests",
		vllm.RetractedInputTokens: "num_retracted_input_tokens", vllm.RetractedOutputTokens: "num_retracted_output_tokens",
		vllm.SpecVerifyCalls: "spec_verify_calls", vllm.EstFlops: "estimated_flops_per_gpu", vllm.EstReadBytes: "estimated_read_bytes_per_gpu",
		vllm.EstWriteBytes: "estimated_write_bytes_per_gpu"}
	for _, ep := range p.Engines {
		if ep.Kind != vllm.SGLang {
			t.Fatalf("worker %+v is not SGLang's", ep)
		}
		for _, cs := range ep.Counters {
			if n, ok := names[cs.Family]; ok {
				m[n] += cs.Value
			}
			switch cs.Family {
			case vllm.RealtimeTokens:
				m["realtime_tokens/"+cs.Reason] += cs.Value
			case vllm.PrefillEffectiveTokens:
				m["prefill_effective_tokens/"+cs.Reason] += cs.Value
			}
		}
		for _, hs := range ep.Hists {
			name := vllm.Hists[hs.Family].SGLang[0]
			m[name+"_count"] += hs.Count
			m[name+"_sum"] += hs.Sum
		}
	}
}

// An SGLang fleet's pages count what the simulator counted, as SGLang counts it, at any time;
// a DP server's page has a worker per DP rank and, once a request has finished, its
// tokenizer's.
func TestSGLangPagesAgreeWithTotals(t *testing.T) {
	cfg := simtest.SGLangConfig(2, 2)
	cfg.Workload.Batches = 2
	cfg.MFUMetrics = true
	s := mustSim(t, cfg)
	for _, at := range []time.Duration{500 * time.Millisecond, 4 * time.Second, 9 * time.Second, 40 * time.Second} {
		s.AdvanceTo(at)
		got := map[string]float64{}
		for i := range cfg.Servers {
			body := s.Page(i, simtest.Start)
			pageCounters(t, body, got)
			p, _ := page.ParsePage(body)
			var labels []string
			for _, ep := range p.Engines {
				labels = append(labels, ep.Labels)
			}
			// The tokenizer's worker appears with the first finished request (none by 500 ms).
			want := []string{"", `dp_rank="0"`, `dp_rank="1"`}
			if at < time.Second {
				want = want[1:]
			}
			if !slices.Equal(labels, want) {
				t.Fatalf("at %s: workers %q, want %q", at, labels, want)
			}
		}
		tot := s.Totals()
		for k, v := range tot {
			if k == "requests_lost" || k == "restarts" {
				continue
			}
			// Sums of seconds are added in another order on a page of two engines' requests.
			if got[k] != v && !(strings.HasSuffix(k, "_sum") && math.Abs(got[k]-v) <= 1e-12*v) {
				t.Errorf("at %s: %s = %v on the pages, %v in Totals", at, k, got[k], v)
			}
		}
		if at == 40*time.Second && (tot["prompt_tokens"] == 0 || tot["cached_tokens"] == 0 || tot["num_retracted_requests"] == 0) {
			t.Errorf("the fleet counted no prompt, cached tokens or retractions: %v", tot)
		}
	}
	if keys := slices.Sorted(maps.Keys(s.Totals())); !slices.Contains(keys, "realtime_tokens/decode") {
		t.Errorf("Totals keys %v", keys)
	}
}

// SGLang sets its gauges at log points only: after a batch ends, the page shows the last log
// point's load until the idle scheduler logs again 30 s after it.
func TestSGLangGaugesAtLogPoints(t *testing.T) {
	cfg := simtest.SGLangConfig(1, 1)
	cfg.Workload.Batches = 1
	s := mustSim(t, cfg)
	running := func() float64 {
		p, err := page.ParsePage(s.Page(0, simtest.Start))
		if err != nil || len(p.Engines) != 1 {
			t.Fatalf("page: %v %+v", err, p)
		}
		return p.Engines[0].Gauges[vllm.Running]
	}
	end := batchEnd(t, s)
	e := s.Engines[0]
	if e.Busy() {
		t.Fatal("the engine is busy after its batch")
	}
	s.AdvanceTo(end + time.Second)
	if r := running(); r == 0 {
		t.Errorf("a second after the batch the page shows %v running: the last log point's figure was during the batch", r)
	}
	s.AdvanceTo(e.Sg.LastLog + core.SglangIdleLog - time.Millisecond)
	stale := running()
	s.AdvanceTo(end + core.SglangIdleLog + time.Second)
	if r := running(); r != 0 || stale == 0 {
		t.Errorf("running %v just before the idle log point, %v after it; want the stale figure, then 0", stale, r)
	}
}

// TestSGLangEagerGauges: with Config.SGLangEagerGauges the scheduler sets its gauges after
// every iteration, so a page a second after the batch shows it idle, where SGLang's log points
// (TestSGLangGaugesAtLogPoints) still show the batch's running requests.
func TestSGLangEagerGauges(t *testing.T) {
	for _, eager := range []bool{false, true} {
		cfg := simtest.SGLangConfig(1, 1)
		cfg.Workload.Batches = 1
		cfg.SGLangEagerGauges = eager
		s := mustSim(t, cfg)
		end := batchEnd(t, s)
		s.AdvanceTo(end + time.Second)
		p, err := page.ParsePage(s.Page(0, simtest.Start))
		if err != nil {
			t.Fatal(err)
		}
		if r := p.Engines[0].Gauges[vllm.Running]; (r == 0) != eager {
			t.Errorf("eager %v: a second after the batch the page shows %v running", eager, r)
		}
	}
}

// TestSGLangStageMetrics: with Config.SGLangStageMetrics a page has the scheduler's stage
// seconds by category and its idle seconds, each engine's equal to its ground truth: run_batch
// its generating time, idle its idle and paused time, process_input_requests its weight loads,
// all of them its time since its server started; scheduler_idle_seconds_total its idle time.
// Without it the page has neither family.
func TestSGLangStageMetrics(t *testing.T) {
	cfg := simtest.SGLangConfig(1, 2)
	cfg.Workload.Async, cfg.Workload.Pause = true, 2*time.Second
	cfg.Workload.StepTime, cfg.Workload.Lag, cfg.Workload.LoadTime = 6*time.Second, time.Second, time.Second
	cfg.SGLangStageMetrics = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := mustSim(t, cfg)
	s.AdvanceTo(20 * time.Second)
	body := s.Page(0, simtest.Start)
	p, err := page.ParsePage(body)
	if err != nil {
		t.Fatal(err)
	}
	g := s.GroundTruth()
	var seen [core.NumStates]bool
	ranks := 0
	for _, ep := range p.Engines {
		if ep.Tokenizer() {
			continue
		}
		ranks++
		i, err := strconv.Atoi(page.LabelMap(ep.Labels)["dp_rank"])
		if err != nil {
			t.Fatalf("worker %q: %v", ep.Labels, err)
		}
		truth := g.Engines[i]
		var through time.Duration
		for st, d := range truth.Time {
			through += d
			seen[st] = seen[st] || d > 0
		}
		stages := map[string]float64{}
		var idle float64
		for _, c := range ep.Counters {
			switch c.Family {
			case vllm.SchedulerStageSeconds:
				stages[c.Reason] += c.Value
				stages[""] += c.Value
			case vllm.SchedulerIdleSeconds:
				idle += c.Value
			}
		}
		near := func(what string, got float64, want time.Duration) {
			if math.Abs(got-want.Seconds()) > 1e-6 {
				t.Errorf("engine %d: %s %v, truth %v", i, what, got, want.Seconds())
			}
		}
		near("run_batch", stages["run_batch"], truth.Time[core.StateGenerating])
		near("idle", stages["idle"], truth.Time[core.StateIdle]+truth.Time[core.StatePaused])
		near("process_input_requests", stages["process_input_requests"], truth.Time[core.StateLoadingWeights])
		near("the stages' sum", stages[""], through)
		near("idle seconds", idle, truth.Time[core.StateIdle])
	}
	if ranks != 2 {
		t.Fatalf("%d DP ranks on the page, want 2", ranks)
	}
	for _, st := range []core.State{core.StateGenerating, core.StateIdle, core.StateLoadingWeights} {
		if !seen[st] {
			t.Errorf("no engine has %s time: the test does not check its stage", st)
		}
	}
	cfg.SGLangStageMetrics = false
	s = mustSim(t, cfg)
	s.AdvanceTo(20 * time.Second)
	if body := string(s.Page(0, simtest.Start)); strings.Contains(body, "scheduler_stage_seconds") || strings.Contains(body, "scheduler_idle_seconds") {
		t.Error("the stage families without Config.SGLangStageMetrics")
	}
}

// TestSGLangStageMetricsRestart: a restart starts the scheduler's stage seconds again from zero,
// as a new process's counters do: a page after it counts the time since the restart only.
func TestSGLangStageMetricsRestart(t *testing.T) {
	cfg := simtest.SGLangConfig(1, 1)
	cfg.SGLangStageMetrics = true
	cfg.Faults = []fleetconfig.Fault{{Kind: fleetconfig.FaultRestart, At: 10 * time.Second, Server: fleetconfig.AllServers}}
	s := mustSim(t, cfg)
	total := func() float64 {
		p, err := page.ParsePage(s.Page(0, simtest.Start))
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, c := range p.Engines[0].Counters {
			if c.Family == vllm.SchedulerStageSeconds {
				sum += c.Value
			}
		}
		return sum
	}
	s.AdvanceTo(9 * time.Second)
	if got := total(); math.Abs(got-9) > 0.5 { // an iteration may run past the time advanced to
		t.Errorf("9 s in, the stages add up to %v s", got)
	}
	s.AdvanceTo(13 * time.Second)
	if got := total(); math.Abs(got-3) > 0.5 {
		t.Errorf("3 s after the restart, the stages add up to %v s", got)
	}
}

// batchEnd advances s in steps of 100 ms from 1 s until a batch finishes, within a minute, and
// returns when it finished.
func batchEnd(t *testing.T, s *fleetmodel.Sim) time.Duration {
	t.Helper()
	var end time.Duration
	for at := time.Second; end == 0 && at < time.Minute; at += 100 * time.Millisecond {
		s.AdvanceTo(at)
		for _, b := range s.TakeBatches() {
			end = b.At
		}
	}
	if end == 0 {
		t.Fatal("the batch did not finish")
	}
	return end
}

// mustSim builds the model of cfg with this package's page writer.
func mustSim(t testing.TB, cfg fleetconfig.Config) *fleetmodel.Sim {
	t.Helper()
	s := simtest.Build(t, fleetmodel.New, cfg)
	s.SetPages(NewSGLangPageWriter(cfg))
	return s
}
