package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestRunSGLangRouterDPSteps runs "vllmstat run" against the router of a simulated SGLang fleet
// of 2 servers with 2 DP ranks each and priority scheduling, its /engine_metrics alone as the
// target (the router's own spelling: sglang_ names, blank lines, Rust's numbers, families in
// another order at every answer), ending a step at the end of each batch. The fleet waits 30
// simulated seconds before its first batch, so the run's first pages have no tokenizer series
// (SGLang creates them at the first finished request); each server's tokenizer worker, first
// seen with the first batch's requests, counts them whole: every step's counts are the
// simulator's own counts of its batch. Each DP rank's running and queue gauges are its totals
// (priority=""), not the totals and their priorities' series added up: a step's maximum is the
// largest total its pages showed.
func TestRunSGLangRouterDPSteps(t *testing.T) {
	t.Parallel()
	const batches = 2
	sc := sim.DefaultConfig()
	sc.Engine, sc.Router = sim.EngineSGLang, true
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = 2, 2, 0, 10, 11
	sc.BlocksPerEngine = demoBlocks // the batches retract
	sc.Workload.Batches = batches
	sc.WaitForDriver = true // each batch's end waits for its step's end
	sc.Priority = true
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()

	out := t.TempDir()
	rec := filepath.Join(out, "run.jsonl.gz")
	l := startLive(t, out, "--per-worker", "--record", rec, "--interval", "0.2", "--target", fleet.RouterURL())
	atBatch := l.endStepsAtBatches(fleet, batches) // the pages hold still in the pause after each
	before := l.liveScrapes()
	testkit.WaitFor(t, 10*time.Second, "the router to be scraped", func() bool { return l.liveScrapes() >= before+4 })
	l.endStep(batches + 1)
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}
	atBatch = append(atBatch, fleet.Totals()) // the step after the batches counts nothing

	checkTokenizerArrives(t, rec)
	maxima := pageMaxima(t, rec)
	recs, live := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(recs) != batches+1 {
		t.Fatalf("%d steps, want %d", len(recs), batches+1)
	}
	keys := map[string]string{"prompt_tokens": "prompt_tokens", "generation_tokens": "generation_tokens", "cached_tokens": "cached_tokens",
		"num_requests": "num_requests", "num_retracted_requests": "num_preemptions", "realtime_tokens/prefill_compute": "realtime_tokens/prefill_compute",
		"realtime_tokens/prefill_cache": "realtime_tokens/prefill_cache", "realtime_tokens/decode": "realtime_tokens/decode"}
	for i, r := range recs {
		for simKey, key := range keys {
			want := atBatch[i][simKey]
			if i > 0 {
				want -= atBatch[i-1][simKey]
			}
			if got := r.Metrics["sglang/"+key]; got != want || i == 0 && want == 0 {
				t.Errorf("step %d: %s = %v, the simulator counted %v", r.Step, key, got, want)
			}
		}
	}
	// The first step has each server's tokenizer and DP ranks as workers of the router's page.
	for _, u := range fleet.URLs() {
		addr := strings.TrimSuffix(u, "/metrics")
		tok := workerOf(t, recs[0], fleet.RouterURL(), map[string]string{"worker_addr": addr})
		if tok.Metrics["sglang/prompt_tokens"] == 0 {
			t.Errorf("%s's tokenizer counted no prompt tokens in the first batch: %v", addr, tok.Metrics)
		}
		for _, dp := range []string{"0", "1"} {
			w := workerOf(t, recs[0], fleet.RouterURL(), map[string]string{"dp_rank": dp, "worker_addr": addr})
			if w.Metrics["sglang/realtime_tokens/decode"] == 0 {
				t.Errorf("%s DP rank %s decoded nothing in the first batch", addr, dp)
			}
		}
	}
	for i, r := range recs {
		for _, u := range fleet.URLs() {
			addr := strings.TrimSuffix(u, "/metrics")
			for _, dp := range []string{"0", "1"} {
				m := workerOf(t, r, fleet.RouterURL(), map[string]string{"dp_rank": dp, "worker_addr": addr}).Metrics
				for key, gauge := range map[string]string{"sglang/num_requests_running/max": "num_running_reqs", "sglang/num_requests_waiting/max": "num_queue_reqs"} {
					want := maxima[i][gauge+`{dp_rank="`+dp+`",`+addr]
					if m[key] != want || i == 0 && gauge == "num_running_reqs" && want == 0 {
						t.Errorf("step %d, %s DP rank %s: %s = %v, its pages' largest total %v", r.Step, addr, dp, key, m[key], want)
					}
				}
			}
		}
	}
	var replay, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &replay, &errb); code != 0 || errb.Len() > 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	if !bytes.Equal(replay.Bytes(), live) {
		t.Errorf("replay differs from the live steps.jsonl\nreplay:\n%s\nlive:\n%s", replay.String(), live)
	}
}

// checkTokenizerArrives checks that the recording's first pages have no tokenizer series and
// a later one has: the run saw the tokenizer's workers arrive.
func checkTokenizerArrives(t *testing.T, rec string) {
	t.Helper()
	r, err := record.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var without, with int
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind != record.KindScrape || ev.Body == nil {
			continue
		}
		if !strings.Contains(*ev.Body, "\nsglang_num_requests_total{") {
			if with > 0 {
				t.Fatal("a page without the tokenizer's series after one with them")
			}
			without++
		} else {
			with++
		}
	}
	if without < 2 || with == 0 {
		t.Fatalf("%d pages without the tokenizer's series, then %d with: want some of each", without, with)
	}
}

// pageMaxima reads the recording's pages step by step and returns, per step, the largest value
// of each DP rank's running and queue totals (priority="") on the step's pages, keyed
// `num_running_reqs{dp_rank="0",http://host:port`.
func pageMaxima(t *testing.T, rec string) []map[string]float64 {
	t.Helper()
	r, err := record.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	maxima := []map[string]float64{{}}
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Kind == record.KindStep:
			maxima = append(maxima, map[string]float64{})
		case ev.Kind == record.KindScrape && ev.Body != nil:
			for _, l := range strings.Split(*ev.Body, "\n") {
				name, rest, ok := strings.Cut(l, "{")
				if !ok || name != "sglang_num_running_reqs" && name != "sglang_num_queue_reqs" || !strings.Contains(rest, `priority="",`) {
					continue
				}
				dp := rest[strings.Index(rest, `dp_rank="`):][:len(`dp_rank="0"`)]
				addr := rest[strings.Index(rest, `worker_addr="`)+len(`worker_addr="`):]
				addr = addr[:strings.IndexByte(addr, '"')]
				var v float64
				if _, err := fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v); err != nil {
					t.Fatalf("page line %q: %v", l, err)
				}
				k := strings.TrimPrefix(name, "sglang_") + "{" + dp + "," + addr
				maxima[len(maxima)-1][k] = max(maxima[len(maxima)-1][k], v)
			}
		}
	}
	return maxima
}

// routerPriorityPage is the n-th page (from 1) of an SGLang router in front of one server
// with 2 DP ranks and --enable-priority-scheduling, in the router's spelling
// (sgl-model-gateway's /engine_metrics: sglang_ names, labels sorted with worker_addr among them
// and le last, buckets then _sum then _count, integers without ".0", families in no order and a
// blank line between them). Every scheduler series is labelled priority="" as SGLang labels
// them; the running and queue gauges also come per priority, their totals under priority="".
// The tokenizer's series appear at page 6, as at a first finished request, and grow at page 14.
func routerPriorityPage(addr string) func(n int) string {
	return func(n int) string {
		sched := func(dp, priority string) string {
			return fmt.Sprintf(`{dp_rank=%q,engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",priority=%q,tp_rank="0",worker_addr=%q}`, dp, priority, addr)
		}
		tok := func(streaming string) string {
			return fmt.Sprintf(`{engine_type="unified",is_streaming=%q,model_name="m",worker_addr=%q}`, streaming, addr)
		}
		var fams []string
		gauge := func(name, help string, parts map[string][3]int) {
			var b strings.Builder
			fmt.Fprintf(&b, "# HELP sglang_%s %s\n# TYPE sglang_%s gauge\n", name, help, name)
			for _, dp := range []string{"0", "1"} {
				for i, p := range []string{"", "0", "1"} {
					fmt.Fprintf(&b, "sglang_%s%s %d\n", name, sched(dp, p), parts[dp][i])
				}
			}
			fams = append(fams, b.String())
		}
		gauge("num_running_reqs", "The number of running requests.", map[string][3]int{"0": {5, 2, 3}, "1": {7, 3, 4}})
		gauge("num_queue_reqs", "The number of requests in the waiting queue.", map[string][3]int{"0": {4, 1, 3}, "1": {2, 2, 0}})
		fams = append(fams, fmt.Sprintf("# HELP sglang_num_retracted_requests_total Total number of retracted requests.\n"+
			"# TYPE sglang_num_retracted_requests_total counter\nsglang_num_retracted_requests_total%s %d\nsglang_num_retracted_requests_total%s %d\n",
			sched("0", ""), rise(n), sched("1", ""), 2*rise(n)))
		if n >= 6 {
			k := 1
			if n >= 14 {
				k = 3
			}
			counter := func(name, help string, falseV, trueV int) {
				fams = append(fams, fmt.Sprintf("# HELP sglang_%s %s\n# TYPE sglang_%s counter\nsglang_%s%s %d\nsglang_%s%s %d\n",
					name, help, name, name, tok("false"), falseV, name, tok("true"), trueV))
			}
			counter("prompt_tokens_total", "Number of prefill tokens processed.", 1000*k, 200*k)
			counter("num_requests_total", "Number of requests processed.", 4*k, 1*k)
			var b strings.Builder
			b.WriteString("# HELP sglang_e2e_request_latency_seconds Histogram of End-to-end request latency in seconds\n" +
				"# TYPE sglang_e2e_request_latency_seconds histogram\n")
			for _, s := range []struct {
				streaming string
				count     int
			}{{"false", 4 * k}, {"true", k}} {
				l := strings.TrimSuffix(tok(s.streaming), "}")
				for _, le := range []string{"1", "2", "4", "+Inf"} {
					fmt.Fprintf(&b, "sglang_e2e_request_latency_seconds_bucket%s,le=%q} %d\n", l, le, s.count)
				}
				fmt.Fprintf(&b, "sglang_e2e_request_latency_seconds_sum%s %v\nsglang_e2e_request_latency_seconds_count%s %d\n",
					tok(s.streaming), 0.5*float64(s.count), tok(s.streaming), s.count)
			}
			fams = append(fams, b.String())
		}
		// The router's families come in a HashMap's order: here, backwards.
		for i, j := 0, len(fams)-1; i < j; i, j = i+1, j-1 {
			fams[i], fams[j] = fams[j], fams[i]
		}
		return strings.Join(fams, "\n")
	}
}

// TestRunSGLangRouterPriorities runs "vllmstat run" against a router's page of a DP server with
// priority scheduling on loopback (routerPriorityPage): each DP rank's running and queue gauges
// are its totals under priority="" (never the totals and their priorities added up), and the
// tokenizer's worker, first seen at page 6 after pages without it, counts its first requests
// whole.
func TestRunSGLangRouterPriorities(t *testing.T) {
	const addr = "http://10.0.0.7:30000"
	srv := servePages(t, routerPriorityPage(addr))
	recs, _ := runPages(t, []*pageServer{srv}, 3, 10, 18)
	for i, want := range []struct{ prompt, requests float64 }{{0, 0}, {1200, 5}, {2400, 10}} {
		r := recs[i]
		if got := r.Metrics["sglang/prompt_tokens"]; got != want.prompt {
			t.Errorf("step %d: prompt tokens %v, want %v", r.Step, got, want.prompt)
		}
		if got := r.Metrics["sglang/num_requests"]; got != want.requests {
			t.Errorf("step %d: requests %v, want %v", r.Step, got, want.requests)
		}
	}
	if got := sum(recs, "sglang/num_preemptions", func(r step.Record) map[string]float64 { return r.Metrics }); got != 3*10 {
		t.Errorf("retractions %v over the steps, want 30", got)
	}
	for _, r := range recs {
		for dp, want := range map[string][2]float64{"0": {5, 4}, "1": {7, 2}} {
			m := workerOf(t, r, srv.url(), map[string]string{"dp_rank": dp, "worker_addr": addr}).Metrics
			for key, v := range map[string]float64{"sglang/num_requests_running/max": want[0], "sglang/num_requests_running/mean": want[0],
				"sglang/num_requests_waiting/max": want[1], "sglang/num_requests_waiting/mean": want[1]} {
				if m[key] != v {
					t.Errorf("step %d, DP rank %s: %s = %v, want %v", r.Step, dp, key, m[key], v)
				}
			}
		}
	}
}
