package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// sglangFleet starts a simulated SGLang fleet of servers × dp ranks running batches GRPO
// batches, which waits for its driver: to start (once the run has made its first scrapes), and
// at each batch's end for the step's end (Fleet.Resume).
func sglangFleet(t *testing.T, servers, dp, batches int, straggler float64, seed int64) *sim.Fleet {
	t.Helper()
	sc := sim.DefaultConfig()
	sc.Engine = sim.EngineSGLang
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = servers, dp, 0, 10, seed
	sc.BlocksPerEngine = demoBlocks // the batches retract
	sc.Workload.Batches = batches
	sc.Workload.Straggler = straggler
	sc.WaitForDriver = true // each batch's end waits for its step's end
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	return fleet
}

// recordSGLangRun runs "vllmstat run" against fleet with --per-worker, recording to rec, ending
// a step at the end of each of batches batches and one after them, and returns steps.jsonl,
// the simulator's totals at the end of each batch and the run's stderr.
func recordSGLangRun(t *testing.T, fleet *sim.Fleet, batches int, rec string) ([]byte, []map[string]float64, string) {
	t.Helper()
	out := t.TempDir()
	args := []string{"--per-worker", "--record", rec, "--interval", "0.2"}
	for _, u := range fleet.URLs() {
		args = append(args, "--target", u)
	}
	l := startLive(t, out, args...)
	// A loaded machine once started the run after the first batch had begun: step 1 and the
	// run's sums then lacked what the first pages already held.
	l.scrapedBeforeWork(fleet)
	fleet.Resume() // the batches start
	var totals []map[string]float64
	for range batches {
		select {
		case n := <-fleet.Batches():
			totals = append(totals, fleet.Totals()) // as the pages show the batch's end
			l.endStep(n)
			fleet.Resume()
		case <-time.After(2 * time.Minute):
			l.stop()
			t.Fatalf("no batch finished\n%s", l.stderr.String())
		}
	}
	// The counters are final once the last batch is done: a step of a few idle scrapes more
	// holds none of them.
	before := l.liveScrapes()
	testkit.WaitFor(t, 10*time.Second, "the fleet to be scraped", func() bool { return l.liveScrapes() >= before+4 })
	l.endStep(batches + 1)
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}
	return mustRead(t, filepath.Join(out, "steps.jsonl")), totals, l.stderr.String()
}

// TestRunSGLangFleet runs "vllmstat run" against a simulated SGLang fleet of 2 servers with 2
// DP ranks each, one of them a straggler, ending a step at the end of each batch: each step's
// totals are the simulator's own counts of the batch for every counter SGLang exports (as SGLang
// counts them), and so is its hit rate; the straggler is named in each batch's step; and
// replaying the run's recording writes its steps.jsonl byte for byte.
func TestRunSGLangFleet(t *testing.T) {
	t.Parallel()
	const batches = 2
	fleet := sglangFleet(t, 2, 2, batches, 4, 3)
	rec := filepath.Join(t.TempDir(), "run.jsonl.gz")
	live, atBatch, logs := recordSGLangRun(t, fleet, batches, rec)
	totals := fleet.Totals()
	atBatch = append(atBatch, totals) // the last step, after the batches, counts nothing

	var recs []step.Record
	for _, l := range bytes.Split(bytes.TrimSpace(live), []byte("\n")) {
		var r step.Record
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("steps.jsonl line %q: %v", l, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != batches+1 {
		t.Fatalf("%d steps, want %d", len(recs), batches+1)
	}
	keys := map[string]string{"prompt_tokens": "prompt_tokens", "generation_tokens": "generation_tokens", "cached_tokens": "cached_tokens",
		"num_requests": "num_requests", "num_retracted_requests": "num_preemptions", "realtime_tokens/prefill_compute": "realtime_tokens/prefill_compute",
		"realtime_tokens/prefill_cache": "realtime_tokens/prefill_cache", "realtime_tokens/decode": "realtime_tokens/decode",
		"num_retracted_input_tokens": "num_retracted_input_tokens", "num_retracted_output_tokens": "num_retracted_output_tokens",
		"prefill_effective_tokens/input": "prefill_effective_tokens/input", "prefill_effective_tokens/device_hit": "prefill_effective_tokens/device_hit"}
	sum := map[string]float64{}
	for i, r := range recs {
		// The simulator's counts of the step: from the previous batch's end to this one's.
		for simKey, key := range keys {
			want := atBatch[i][simKey]
			if i > 0 {
				want -= atBatch[i-1][simKey]
			}
			if got := r.Metrics["sglang/"+key]; got != want {
				t.Errorf("step %d: %s = %v, the simulator counted %v", r.Step, key, got, want)
			}
		}
		for k, v := range r.Metrics {
			if !strings.HasPrefix(k, "sglang/") {
				t.Fatalf("step %d: key %s of an SGLang fleet", r.Step, k)
			}
			sum[strings.TrimPrefix(k, "sglang/")] += v
		}
		if in, out := r.Metrics["sglang/num_retracted_input_tokens"], r.Metrics["sglang/num_retracted_output_tokens"]; r.Metrics["sglang/recomputed_tokens"] != in+out {
			t.Errorf("step %d: recomputed tokens %v, retracted %v + %v", r.Step, r.Metrics["sglang/recomputed_tokens"], in, out)
		}
		if p := r.Metrics["sglang/prompt_tokens"]; p > 0 {
			if h, want := r.Metrics["sglang/prefix_cache_hit_rate"], r.Metrics["sglang/cached_tokens"]/p; h != want {
				t.Errorf("step %d: hit rate %v, its cached / prompt tokens %v", r.Step, h, want)
			}
		}
		if i < batches {
			checkSummaryLine(t, logs, r, "", "sglang")
			last := fleet.URLs()[len(fleet.URLs())-1]
			if len(r.Stragglers) == 0 || r.Stragglers[0].Target != last || r.Stragglers[0].Labels["dp_rank"] != "1" {
				t.Errorf("step %d names stragglers %+v, want DP rank 1 of %s", r.Step, r.Stragglers, last)
			}
		}
	}
	for simKey, key := range keys {
		if totals[simKey] == 0 || sum[key] != totals[simKey] {
			t.Errorf("%s: the steps add up to %v, the simulator counted %v", key, sum[key], totals[simKey])
		}
	}
	if got, want := sum["cached_tokens"]/sum["prompt_tokens"], totals["cached_tokens"]/totals["prompt_tokens"]; got != want {
		t.Errorf("the run's hit rate %v, the simulator's %v", got, want)
	}

	var out, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &out, &errb); code != 0 || errb.Len() > 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	if !bytes.Equal(out.Bytes(), live) {
		t.Fatalf("replay differs from the live steps.jsonl\nreplay:\n%s\nlive:\n%s", out.String(), live)
	}
}

// TestReplaySGLangRecording replays a kept recording of a run against a simulated SGLang fleet
// (testdata/recordings/sglang): its output must equal the steps.jsonl the live run wrote, byte
// for byte. -update records it again; -update-steps only rewrites steps.jsonl from replay (see
// TestReplayRecordings).
func TestReplaySGLangRecording(t *testing.T) {
	dir := filepath.Join("testdata", "recordings", "sglang")
	rec := filepath.Join(dir, "run.jsonl.gz")
	if testkit.Update() {
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		fleet := sglangFleet(t, 1, 2, 2, 1, 7)
		steps, _, _ := recordSGLangRun(t, fleet, 2, rec)
		if err := os.WriteFile(filepath.Join(dir, "steps.jsonl"), steps, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if segs, err := record.Segments(rec); err != nil || len(segs) != 1 {
		t.Fatalf("segments %v, %v", segs, err)
	}
	want := mustRead(t, filepath.Join(dir, "steps.jsonl"))
	var out, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &out, &errb); code != 0 || errb.Len() > 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	if *updateSteps && !testkit.Update() {
		if err := os.WriteFile(filepath.Join(dir, "steps.jsonl"), out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		want = out.Bytes()
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("replay differs from the live steps.jsonl\nreplay:\n%s\nlive:\n%s", out.String(), want)
	}
	if !bytes.Contains(want, []byte(`"sglang/prefix_cache_hit_rate"`)) || bytes.Contains(want, []byte(`"vllm/`)) {
		t.Error("the recording's steps do not have the sglang keys alone")
	}
}

// TestRunSGLangSetupHints: a target that answers 404, one whose page has no family vllmstat
// reads, and one that shows SGLang's DP rank 0 only each get one message, however many times
// they are scraped: the 404 says there is no metrics page at its URL (a wrong port or path)
// before naming SGLang's flag; the page without families names vLLM's and SGLang's flags that
// leave them out; the DP rank names SGLang's flag. A page registered through the API that holds
// vLLM's families before any has a series (prometheus_client renders their HELP and TYPE lines
// alone) gets no message.
func TestRunSGLangSetupHints(t *testing.T) {
	dpAttention := mustRead(t, filepath.Join("..", "page", "testdata", "prometheus-client-render-sglang-dp-attention.prom"))
	var declared []byte // a vLLM page without its samples
	for _, l := range bytes.SplitAfter(testkit.ReadFixture(t, "prometheus-client-render-vllm-0.20.prom"), []byte("\n")) {
		if bytes.HasPrefix(l, []byte("#")) {
			declared = append(declared, l...)
		}
	}
	serve := func(code int, body []byte) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if code != http.StatusOK {
				http.Error(w, `{"detail":"Not Found"}`, code)
				return
			}
			w.Write(body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/metrics"
	}
	targets := []string{serve(http.StatusNotFound, nil), serve(http.StatusOK, nil), serve(http.StatusOK, dpAttention)}
	registered := serve(http.StatusOK, declared)
	out := t.TempDir()
	args := []string{}
	for _, u := range targets {
		args = append(args, "--target", u)
	}
	l := startLive(t, out, args...)
	resp, err := http.Post(l.api+"/v1/targets", "application/json", strings.NewReader(`{"targets": ["`+registered+`"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	testkit.WaitFor(t, 10*time.Second, "the targets to be scraped", func() bool { return l.liveScrapes() >= 20 })
	l.stop()
	logs := l.stderr.String()
	for i, hint := range []string{page.HintNotFound, page.HintNoFamily, page.HintDPRankZero} {
		if n := strings.Count(logs, hint); n != 1 {
			t.Errorf("target %s: hint %q logged %d times, want once\n%s", targets[i], hint, n, logs)
		}
	}
	for _, want := range []string{
		"no metrics page at " + targets[0] + ": wrong port or path? An SGLang server serves /metrics only when started with --enable-metrics\"",
		"--disable-log-stats", "--enable-metrics,", "--enable-metrics-for-all-schedulers",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("no message says %q\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "target="+registered) {
		t.Errorf("a message about the registered page of families without series:\n%s", logs)
	}
}

// TestRunSGLangRouter runs "vllmstat run" against the router of a simulated SGLang fleet alone:
// its /engine_metrics gives a worker per server (worker_addr), and the steps' totals add up to
// the simulator's own counts.
func TestRunSGLangRouter(t *testing.T) {
	sc := sim.DefaultConfig()
	sc.Engine, sc.Router = sim.EngineSGLang, true
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = 2, 1, 0, 10, 5
	sc.BlocksPerEngine = demoBlocks
	sc.Workload.Batches = 1
	// The batch waits 3 s (at speed 10) for the run's first scrape: realtime_tokens counts at
	// every batch, and what the router's first page holds is its baseline, in no step.
	sc.Workload.StartDelay = 30 * time.Second
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	out := t.TempDir()
	l := startLive(t, out, "--per-worker", "--interval", "0.2", "--target", fleet.RouterURL())
	l.scrapedBeforeWork(fleet)
	select {
	case <-fleet.Batches():
	case <-time.After(2 * time.Minute):
		l.stop()
		t.Fatal("no batch finished")
	}
	l.endStep(1)
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}
	totals := fleet.Totals()
	recs, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(recs) != 1 {
		t.Fatalf("%d steps", len(recs))
	}
	r := recs[0]
	checkSummaryLine(t, l.stderr.String(), r, "", "sglang")
	addrs := map[string]bool{}
	for _, w := range r.PerWorker {
		addrs[w.Labels["worker_addr"]] = true
	}
	for _, u := range fleet.URLs() {
		if !addrs[strings.TrimSuffix(u, "/metrics")] {
			t.Errorf("no worker of %s: %v", u, addrs)
		}
	}
	for simKey, key := range map[string]string{"prompt_tokens": "prompt_tokens", "generation_tokens": "generation_tokens",
		"cached_tokens": "cached_tokens", "num_retracted_requests": "num_preemptions", "realtime_tokens/decode": "realtime_tokens/decode"} {
		if got := r.Metrics["sglang/"+key]; totals[simKey] == 0 || got != totals[simKey] {
			t.Errorf("%s: the step counts %v, the simulator %v", key, got, totals[simKey])
		}
	}
}

// TestRunMixedFleet runs "vllmstat run" against a vLLM server and an SGLang server at once: each
// kind's keys hold its own fleet's counts, under its own prefix.
func TestRunMixedFleet(t *testing.T) {
	vc := sim.DefaultConfig()
	vc.Servers, vc.DP, vc.Port, vc.Speed, vc.Seed = 1, 2, 0, 10, 11
	vc.Workload.Batches = 1
	vc.Workload.StartDelay = 30 * time.Second // 3 s at speed 10, for the run's first scrapes, as sglangFleet's
	vfleet, err := sim.Start(context.Background(), vc)
	if err != nil {
		t.Fatal(err)
	}
	defer vfleet.Close()
	sfleet := sglangFleet(t, 1, 2, 1, 1, 12)
	out := t.TempDir()
	l := startLive(t, out, "--interval", "0.2", "--target", vfleet.URLs()[0], "--target", sfleet.URLs()[0])
	l.scrapedBeforeWork(vfleet)
	l.scrapedBeforeWork(sfleet)
	sfleet.Resume() // the SGLang batch starts
	for _, f := range []*sim.Fleet{vfleet, sfleet} {
		select {
		case <-f.Batches():
		case <-time.After(2 * time.Minute):
			l.stop()
			t.Fatal("no batch finished")
		}
	}
	l.endStep(1)
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}
	recs, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(recs) != 1 {
		t.Fatalf("%d steps", len(recs))
	}
	m := recs[0].Metrics
	checkSummaryLine(t, l.stderr.String(), recs[0], "vLLM ", "vllm")
	checkSummaryLine(t, l.stderr.String(), recs[0], "SGLang ", "sglang")
	vt, st := vfleet.Totals(), sfleet.Totals()
	for key, want := range map[string]float64{
		"vllm/prompt_tokens":       vt["prompt_tokens"],
		"vllm/generation_tokens":   vt["generation_tokens"],
		"vllm/prefix_cache_hits":   vt["prefix_cache_hits"],
		"sglang/prompt_tokens":     st["prompt_tokens"],
		"sglang/generation_tokens": st["generation_tokens"],
		"sglang/cached_tokens":     st["cached_tokens"],
	} {
		if m[key] != want || want == 0 {
			t.Errorf("%s = %v, its fleet counted %v", key, m[key], want)
		}
	}
	if m["vllm/prefix_cache_hit_rate"] != vt["prefix_cache_hits"]/vt["prefix_cache_queries"] ||
		m["sglang/prefix_cache_hit_rate"] != st["cached_tokens"]/st["prompt_tokens"] {
		t.Errorf("hit rates %v and %v", m["vllm/prefix_cache_hit_rate"], m["sglang/prefix_cache_hit_rate"])
	}
	if recs[0].Workers != 4 {
		t.Errorf("%d workers, want 2 vLLM engines and 2 SGLang DP ranks, SGLang's tokenizer no engine", recs[0].Workers)
	}
}

// checkSummaryLine checks the summary line that logs hold for step r: it shows the figures of
// r's keys under prefix (each after name, for a fleet of two engine kinds), which a step of a
// batch has, never a dash in their place.
func checkSummaryLine(t *testing.T, logs string, r step.Record, name, prefix string) {
	t.Helper()
	var line string
	for _, l := range strings.Split(logs, "\n") {
		if strings.HasPrefix(l, fmt.Sprintf("step %d | ", r.Step)) {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no summary line of step %d:\n%s", r.Step, logs)
	}
	m := func(key string) float64 {
		v, ok := r.Metrics[prefix+"/"+key]
		if !ok {
			t.Fatalf("step %d has no %s/%s", r.Step, prefix, key)
		}
		return v
	}
	computed := ""
	if c, ok := r.Metrics[prefix+"/prompt_tokens_computed"]; ok {
		computed = fmt.Sprintf(" (computed %.1f%%)", 100*c/(c+m("prompt_tokens_cached")+m("prompt_tokens_transferred")))
	}
	want := name + fmt.Sprintf("hit %.1f%%%s | preempt %.0f | kv %.2f/%.2f | run %.1f wait %.1f | gen %.0f tok/s | ttft p50 %.3fs",
		100*m("prefix_cache_hit_rate"), computed, m("num_preemptions"), m("kv_cache_usage_perc/mean"), m("kv_cache_usage_perc/max"),
		m("num_requests_running/mean"), m("num_requests_waiting/mean"), m("generation_tokens_per_s"), m("time_to_first_token_seconds/p50"))
	if !strings.Contains(line, want) {
		t.Errorf("step %d's summary line lacks its %s figures %q:\n%s", r.Step, prefix, want, line)
	}
}
