package cli

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// mpSimKeys are the simulator's Totals keys of the counters a step has, by step key.
var mpSimKeys = map[string]string{
	"vllm/prompt_tokens": "prompt_tokens", "vllm/generation_tokens": "generation_tokens",
	"vllm/prefix_cache_queries": "prefix_cache_queries", "vllm/prefix_cache_hits": "prefix_cache_hits",
	"vllm/num_preemptions": "num_preemptions", "vllm/request_success/stop": "request_success/stop",
	"vllm/request_success/length": "request_success/length",
}

func refuses(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	c, err := net.DialTimeout("tcp", p.Host, time.Second)
	if err != nil {
		return true
	}
	c.Close()
	return false
}

// engineTokens is the generated tokens of server's engines in g.
func engineTokens(g sim.GroundTruth, server int) int64 {
	var n int64
	for _, e := range g.Engines {
		if e.Server == server {
			n += e.GenerationTokens
		}
	}
	return n
}

// pageCounts sums the counters of mpSimKeys over a vLLM page's engines, by step key.
func pageCounts(t *testing.T, u string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("page of %s: %v", u, err)
	}
	m := map[string]float64{}
	for key := range mpSimKeys {
		name, reason, _ := strings.Cut(strings.TrimPrefix(key, "vllm/"), "/")
		for _, mt := range fams["vllm:"+name+"_total"].GetMetric() {
			for _, l := range mt.Label {
				if reason == "" || l.GetName() == "finished_reason" && l.GetValue() == reason {
					m[key] += mt.Counter.GetValue()
					break
				}
			}
		}
	}
	return m
}

// TestRunMultiprocessSimulator runs "vllmstat run" against a simulated fleet of two vLLM 0.20
// servers with --api-server-count 2 and two engines each, whose pages are prometheus_client's
// multiprocess pages (no _created), through two GRPO batches, ending a step at the end of each
// batch and one after them. On the wall clock from the fleet's start (simulated time runs 10
// times faster), the first batch runs from 2 s to about 3 s, the second from about 21 s to 22 s:
//   - server 1's port refuses connections from before the run's start until 4 s, after its
//     engines ran the first batch: its first page already holds that work, and counts whole, in
//     the first step;
//   - server 0 restarts at 17.5 s, its port refusing connections from 16.5 s to 23.5 s, over the
//     second batch: no scrape sees the restart, and the first page after it holds the second
//     batch's work, some of its counters below their values before the restart and some above.
//     A counter going down is a restart of every counter of the worker: all count from zero.
//
// Step 1 must end between server 1's return and server 0's fall: 12 s of wall time. With 2.5 s
// (server 0 down from 6.5 s), a loaded gate once ended it after, with the second batch in it.
//
// Each step's counts are the simulator's own counts of the step, which Totals keeps over the
// restart.
func TestRunMultiprocessSimulator(t *testing.T) {
	t.Parallel()
	sc := sim.DefaultConfig()
	sc.Servers, sc.DP, sc.Port, sc.Speed, sc.Seed = 2, 2, 0, 10, 3
	sc.APIServerCount = 2
	sc.BlocksPerEngine = demoBlocks // the batches preempt
	sc.Workload.Batches = 2
	sc.Workload.StartDelay = 20 * time.Second
	sc.Workload.Pause = 180 * time.Second
	for _, f := range []string{"down@0s+4s:server=1", "down@16.5s+7s:server=0", "restart@17.5s:server=0"} {
		fault, err := sim.ParseFault(f)
		if err != nil {
			t.Fatal(err)
		}
		sc.Faults = append(sc.Faults, fault)
	}
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	urls := fleet.URLs()
	testkit.WaitFor(t, 10*time.Second, "server 1's port to refuse connections", func() bool { return refuses(urls[1]) })

	out := t.TempDir()
	rec := filepath.Join(t.TempDir(), "run.jsonl.gz")
	r := &scriptRun{out: out, rec: rec}
	r.liveRun = startLive(t, out, "--per-worker", "--record", rec, "--target", urls[0], "--target", urls[1])

	var atBatch []map[string]float64
	waitBatch := func(n int) {
		t.Helper()
		select {
		case b := <-fleet.Batches():
			if b != n {
				t.Fatalf("batch %d done, want %d", b, n)
			}
			atBatch = append(atBatch, fleet.Totals()) // as the pages show the batch's end
		case <-time.After(2 * time.Minute):
			r.stop()
			t.Fatalf("batch %d did not finish\n%s", n, r.stderr.String())
		}
	}
	scraped := func(what string, n int) {
		t.Helper()
		before := r.liveScrapes()
		testkit.WaitFor(t, 10*time.Second, what, func() bool { return r.liveScrapes() >= before+n })
	}
	waitBatch(1)
	if fleet.Totals()["restarts"] != 0 {
		t.Fatal("server 0 restarted before the first batch's end")
	}
	before := pageCounts(t, urls[0]) // its counters are final until the restart
	testkit.WaitFor(t, 30*time.Second, "server 1 to come back", func() bool { return !refuses(urls[1]) })
	if n := engineTokens(fleet.GroundTruth(), 1); n == 0 {
		t.Fatal("server 1 came back before its engines generated a token")
	}
	scraped("server 1 to be scraped", 6)
	r.endStep(1)
	waitBatch(2)
	testkit.WaitFor(t, 30*time.Second, "server 0 to come back", func() bool { return !refuses(urls[0]) })
	after := pageCounts(t, urls[0])
	scraped("server 0 to be scraped", 6)
	r.endStep(2)
	scraped("the fleet to be scraped", 4)
	r.endStep(3)
	final := fleet.Totals()
	if final["restarts"] != 1 {
		t.Fatalf("the fleet restarted %v times, want once", final["restarts"])
	}
	steps := r.finish()
	bounds := []map[string]float64{{}, atBatch[0], atBatch[1], final}
	for n := int64(1); n <= 3; n++ {
		rec, ok := steps[n]
		if !ok {
			t.Fatalf("no step %d", n)
		}
		for key, simKey := range mpSimKeys {
			want := bounds[n][simKey] - bounds[n-1][simKey]
			if got := rec.Metrics[key]; got != want {
				t.Errorf("step %d: %s = %v, the simulator counted %v", n, key, got, want)
			}
		}
	}
	// Server 1's workers count their first page whole in the first step.
	var first float64
	for _, w := range steps[1].PerWorker {
		if w.Target == urls[1] {
			first += w.Metrics["vllm/generation_tokens"]
		}
	}
	if first == 0 {
		t.Error("server 1's first page counted no tokens in step 1")
	}
	// The restart left some of server 0's counters below their old values and some above.
	var down, up []string
	for key := range mpSimKeys {
		switch {
		case after[key] < before[key]:
			down = append(down, key)
		case after[key] > before[key]:
			up = append(up, key)
		}
	}
	if len(down) == 0 || len(up) == 0 {
		t.Errorf("server 0's counters before the restart %v, after %v: want some lower and some higher", before, after)
	}
}
