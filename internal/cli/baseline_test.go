package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// scripted is an engine's /metrics whose page the test sets, counting the answers it gave since.
type scripted struct {
	mu     sync.Mutex
	body   string
	served int
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	body := s.body
	s.served++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	io.WriteString(w, body)
}

// set makes body the page from the next answer on.
func (s *scripted) set(body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.served = body, 0
}

// waitServed waits until the page set last was answered n times.
func (s *scripted) waitServed(t *testing.T, n int) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("%d answers with the page set last", n), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.served >= n
	})
}

// serveScripted serves s on loopback and returns its /metrics URL.
func serveScripted(t *testing.T, s *scripted) string {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// laterServer is a loopback port that refuses connections until up serves a scripted page on
// it: a server that comes up during the run. The port is bound from the start, so no other
// process takes it meanwhile.
type laterServer struct {
	url string
	fd  int
}

func newLaterServer(t *testing.T) *laterServer {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	ls := &laterServer{url: fmt.Sprintf("http://127.0.0.1:%d/metrics", sa.(*syscall.SockaddrInet4).Port), fd: fd}
	t.Cleanup(func() {
		if ls.fd >= 0 {
			syscall.Close(ls.fd)
		}
	})
	return ls
}

// up starts listening on the port and serving s.
func (ls *laterServer) up(t *testing.T, s *scripted) {
	t.Helper()
	if err := syscall.Listen(ls.fd, 128); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(ls.fd), "listener")
	ls.fd = -1
	l, err := net.FileListener(f) // a copy of the descriptor
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: s}}
	srv.Start()
	t.Cleanup(srv.Close)
}

// scriptRun is "vllmstat run --per-worker --record" in this process over scripted targets.
type scriptRun struct {
	*liveRun
	out, rec string
}

func startScriptRun(t *testing.T, targets ...string) *scriptRun {
	t.Helper()
	r := &scriptRun{out: t.TempDir()}
	r.rec = filepath.Join(t.TempDir(), "run.jsonl.gz")
	args := []string{"--per-worker", "--record", r.rec}
	for _, u := range targets {
		args = append(args, "--target", u)
	}
	r.liveRun = startLive(t, r.out, args...)
	return r
}

// finish stops the run, checks that its recording replays to its steps.jsonl byte for byte,
// and returns its steps by number.
func (r *scriptRun) finish() map[int64]step.Record {
	r.t.Helper()
	if code := r.stop(); code != 0 {
		r.t.Fatalf("run exited %d\n%s", code, r.stderr.String())
	}
	steps := filepath.Join(r.out, "steps.jsonl")
	recs, _ := readSteps(r.t, steps)
	replayEquals(r.t, r.rec, steps)
	byN := map[int64]step.Record{}
	for _, rec := range recs {
		byN[rec.Step] = rec
	}
	return byN
}

// checkKeys compares a step's keys with want: each key's value, "-" for a key that must be
// absent. Means are compared to 1e-9.
func checkKeys(t *testing.T, rec step.Record, want map[string]float64) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		got, ok := rec.Metrics[k]
		if w := want[k]; !ok || got-w > 1e-9 || w-got > 1e-9 {
			t.Errorf("step %d: %s = %v (present %v), want %v", rec.Step, k, got, ok, w)
		}
	}
}

// series is one line of exposition text: a name, labels and a value.
type series struct {
	name, labels string
	v            float64
}

func expo(ss ...series) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "%s{%s} %v\n", s.name, s.labels, s.v) // ±Inf as +Inf and -Inf
	}
	return b.String()
}

// histSeries renders a histogram of one bucket bound (and +Inf) with count observations
// summing to sum, all of them at or below le.
func histSeries(name, labels string, le, count, sum float64) []series {
	sep := ""
	if labels != "" {
		sep = ","
	}
	return []series{
		{name + "_bucket", labels + sep + fmt.Sprintf(`le="%v"`, le), count},
		{name + "_bucket", labels + sep + `le="+Inf"`, count},
		{name + "_sum", labels, sum},
		{name + "_count", labels, count},
	}
}

// mpEngine is a vLLM engine's counters as its server in multiprocess mode (--api-server-count
// > 1) shows them: without _created.
type mpEngine struct {
	engine                                    string
	prompt, queries, hits, gen, preempt, corr float64
	success                                   map[string]float64
}

func (e mpEngine) series() []series {
	l := fmt.Sprintf(`engine=%q,model_name="m"`, e.engine)
	ss := []series{
		{"vllm:num_requests_running", l, 1},
		{"vllm:prompt_tokens_total", l, e.prompt},
		{"vllm:prefix_cache_queries_total", l, e.queries},
		{"vllm:prefix_cache_hits_total", l, e.hits},
		{"vllm:generation_tokens_total", l, e.gen},
		{"vllm:num_preemptions_total", l, e.preempt},
		{"vllm:corrupted_requests_total", l, e.corr},
	}
	reasons := make([]string, 0, len(e.success))
	for r := range e.success {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		ss = append(ss, series{"vllm:request_success_total", l + fmt.Sprintf(`,finished_reason=%q`, r), e.success[r]})
	}
	return ss
}

func mpPage(es ...mpEngine) string {
	var ss []series
	for _, e := range es {
		ss = append(ss, e.series()...)
	}
	return expo(ss...)
}

// TestRunInfCounterSampleIsNoSample: a counter sample of +Inf or −Inf between numbers is no
// sample, as a NaN is: the next number continues from the last one. Taken as the last value,
// the Inf made the next number look like a restart, counted whole: 1,400 tokens for a true 600.
func TestRunInfCounterSampleIsNoSample(t *testing.T) {
	s := &scripted{}
	s.set(mpPage(mpEngine{engine: "0", gen: 800, prompt: 100}))
	r := startScriptRun(t, serveScripted(t, s))
	r.endStep(1)
	for _, v := range []float64{math.Inf(1), math.Inf(-1)} {
		s.set(mpPage(mpEngine{engine: "0", gen: v, prompt: v}))
		s.waitServed(t, 2)
	}
	s.set(mpPage(mpEngine{engine: "0", gen: 1400, prompt: 150}))
	r.endStep(2)
	steps := r.finish()
	checkKeys(t, steps[2], map[string]float64{"vllm/generation_tokens": 600, "vllm/prompt_tokens": 50})
}

// TestRunRestartNoScrapeSaw: a vLLM server in multiprocess mode restarted between two scrapes.
// Its pages have no _created, so only counters going down show the restart, series by series;
// rarely used series ended above their old values (abort 1 → 3, error 1 → 2, corrupted 1 → 2)
// and were counted as new minus old (2, 1, 1). Every counter of the worker restarted with the
// ones that went down: each counts from zero at that scrape.
func TestRunRestartNoScrapeSaw(t *testing.T) {
	s := &scripted{}
	s.set(mpPage(mpEngine{engine: "0", prompt: 9000, queries: 9000, hits: 4000, gen: 2000, preempt: 3, corr: 1,
		success: map[string]float64{"stop": 50, "abort": 1, "error": 1}}))
	r := startScriptRun(t, serveScripted(t, s))
	r.endStep(1)
	s.set(mpPage(mpEngine{engine: "0", prompt: 900, queries: 900, hits: 300, gen: 250, preempt: 1, corr: 2,
		success: map[string]float64{"stop": 4, "abort": 3, "error": 2}}))
	r.endStep(2)
	steps := r.finish()
	checkKeys(t, steps[2], map[string]float64{"vllm/prompt_tokens": 900, "vllm/prefix_cache_hits": 300, "vllm/generation_tokens": 250,
		"vllm/num_preemptions": 1, "vllm/request_success/stop": 4, "vllm/request_success/abort": 3, "vllm/request_success/error": 2,
		"vllm/corrupted_requests": 2})
}

// sglangServer is one SGLang server with data parallelism (2 DP ranks), as its page shows it: the
// schedulers' series carry dp_rank; the tokenizer's (tokens, requests, latencies) carry no rank,
// and appear on the page only once its first request finished (tokens false: not yet).
type sglangServer struct {
	addr   string // the router's worker_addr; "" for the server's own page
	tokens bool
	// The tokenizer's counts, and the scheduler's running requests and decode tokens per rank.
	prompt, gen, cached, requests float64
	ttftN, ttftSum, e2eN, e2eSum  float64
	itlN, itlSum                  float64
	running, decode               float64
}

func (s sglangServer) series() []series {
	tok := `engine_type="unified",model_name="m"`
	if s.addr != "" {
		tok += fmt.Sprintf(`,worker_addr=%q`, s.addr)
	}
	var ss []series
	for dp := range 2 {
		l := fmt.Sprintf(`dp_rank="%d",engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"`, dp)
		if s.addr != "" {
			l += fmt.Sprintf(`,worker_addr=%q`, s.addr)
		}
		ss = append(ss,
			series{"sglang:num_running_reqs", l, s.running},
			series{"sglang:num_queue_reqs", l, 0},
			series{"sglang:token_usage", l, 0.1},
			series{"sglang:num_retracted_requests_total", l, 0},
			series{"sglang:realtime_tokens_total", l + `,mode="decode"`, s.decode})
	}
	if !s.tokens {
		return ss
	}
	ss = append(ss,
		series{"sglang:prompt_tokens_total", tok, s.prompt},
		series{"sglang:generation_tokens_total", tok, s.gen},
		series{"sglang:cached_tokens_total", `cache_source="device",` + tok, s.cached},
		series{"sglang:num_requests_total", tok, s.requests})
	ss = append(ss, histSeries("sglang:time_to_first_token_seconds", tok, 1, s.ttftN, s.ttftSum)...)
	ss = append(ss, histSeries("sglang:e2e_request_latency_seconds", tok, 10, s.e2eN, s.e2eSum)...)
	ss = append(ss, histSeries("sglang:inter_token_latency_seconds", tok, 0.1, s.itlN, s.itlSum)...)
	return ss
}

// sglangPage renders servers on one page: a server's own, or the router's /engine_metrics of
// several (worker_addr on every sample, ':' as '_' as its older aggregator writes them).
func sglangPage(router bool, servers ...sglangServer) string {
	var ss []series
	for _, s := range servers {
		ss = append(ss, s.series()...)
	}
	page := expo(ss...)
	if router {
		page = strings.ReplaceAll(page, "sglang:", "sglang_")
	}
	return page
}

// firstBatch is one server's first batch of 4 requests: its tokenizer's series appear with it.
func firstBatch(addr string) sglangServer {
	return sglangServer{addr: addr, tokens: true, prompt: 4000, gen: 800, cached: 1200, requests: 4,
		ttftN: 4, ttftSum: 1.2, e2eN: 4, e2eSum: 10, itlN: 40, itlSum: 0.8, decode: 400}
}

// TestRunSGLangFirstBatch: with DP > 1 an SGLang server's tokenizer series are a worker of their
// own (no dp_rank), which its page shows only once the first request finished. Taken as a
// baseline, the whole first batch was lost, without a warning. A worker that first appears on a
// target whose earlier pages in the run did not show it made all of its counts since the last of
// them: it counts whole. On the server's own page and through the router alike.
func TestRunSGLangFirstBatch(t *testing.T) {
	latencies := map[string]float64{"sglang/time_to_first_token_seconds/mean": 0.3, "sglang/e2e_request_latency_seconds/mean": 2.5,
		"sglang/inter_token_latency_seconds/mean": 0.02}
	t.Run("server", func(t *testing.T) {
		s := &scripted{}
		s.set(sglangPage(false, sglangServer{running: 2}))
		r := startScriptRun(t, serveScripted(t, s))
		s.waitServed(t, 2)
		r.endStep(1)
		s.set(sglangPage(false, firstBatch("")))
		r.endStep(2)
		steps := r.finish()
		want := map[string]float64{"sglang/prompt_tokens": 4000, "sglang/generation_tokens": 800, "sglang/cached_tokens": 1200,
			"sglang/num_requests": 4, "sglang/realtime_tokens/decode": 800}
		maps.Copy(want, latencies)
		checkKeys(t, steps[2], want)
	})
	t.Run("router", func(t *testing.T) {
		const a, b = "http://10.0.0.1:30000", "http://10.0.0.2:30000"
		s := &scripted{}
		s.set(sglangPage(true, sglangServer{addr: a, running: 2}, sglangServer{addr: b, running: 2}))
		r := startScriptRun(t, serveScripted(t, s))
		s.waitServed(t, 2)
		r.endStep(1)
		s.set(sglangPage(true, firstBatch(a), firstBatch(b)))
		r.endStep(2)
		steps := r.finish()
		want := map[string]float64{"sglang/prompt_tokens": 8000, "sglang/generation_tokens": 1600, "sglang/cached_tokens": 2400,
			"sglang/num_requests": 8, "sglang/realtime_tokens/decode": 1600}
		maps.Copy(want, latencies)
		checkKeys(t, steps[2], want)
	})
}

// TestRunLateDPEngine: the rule holds for vLLM pages too. A data-parallel engine that a
// server's page shows first in the run's second step counts whole, with or without _created
// (engine 2's is from before the run: its series were not on the page, which is evidence
// enough); an engine its pages showed from the start is a baseline at first, as always.
func TestRunLateDPEngine(t *testing.T) {
	s := &scripted{}
	s.set(mpPage(mpEngine{engine: "0", prompt: 7000, gen: 900}))
	r := startScriptRun(t, serveScripted(t, s))
	s.waitServed(t, 2)
	r.endStep(1)
	s.set(mpPage(mpEngine{engine: "0", prompt: 7100, gen: 950}, mpEngine{engine: "1", prompt: 3000, gen: 500}) +
		"vllm:generation_tokens_total{engine=\"2\",model_name=\"m\"} 40\nvllm:generation_tokens_created{engine=\"2\",model_name=\"m\"} 1e9\n")
	r.endStep(2)
	steps := r.finish()
	checkKeys(t, steps[1], map[string]float64{"vllm/prompt_tokens": 0, "vllm/generation_tokens": 0})
	checkKeys(t, steps[2], map[string]float64{"vllm/prompt_tokens": 100 + 3000, "vllm/generation_tokens": 50 + 500 + 40})
}

// TestRunServerUpDuringRun: a configured target whose port refused every connection since the
// run started (a vLLM server with --api-server-count > 1, whose pages have no _created, still
// starting) started its server after the run's start: its first page's counts were all made
// during the run, and count whole. A target that answered from the start is a baseline at first,
// and so is one added through the API (a trainer that resumes registers engines that have run
// for hours): its first page's counts are a baseline, with the note that says so.
func TestRunServerUpDuringRun(t *testing.T) {
	early := &scripted{}
	early.set(mpPage(mpEngine{engine: "0", prompt: 90000, hits: 10000, gen: 20000, preempt: 40}))
	later := newLaterServer(t)
	added := newLaterServer(t)
	r := startScriptRun(t, serveScripted(t, early), later.url)
	resp, err := http.Post(r.api+"/v1/targets", "application/json", strings.NewReader(`{"targets": ["`+added.url+`"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	early.waitServed(t, 3)
	r.endStep(1)
	page := mpPage(mpEngine{engine: "0", prompt: 5000, queries: 6000, hits: 2700, gen: 680, preempt: 6})
	s, sa := &scripted{}, &scripted{}
	s.set(page)
	sa.set(page)
	later.up(t, s)
	added.up(t, sa)
	s.waitServed(t, 1)
	sa.waitServed(t, 1)
	r.endStep(2)
	var live struct {
		Targets []struct {
			URL  string `json:"url"`
			Note string `json:"note"`
		} `json:"targets"`
	}
	testkit.WaitFor(t, 10*time.Second, "the targets' state", func() bool {
		resp, err := http.Get(r.api + "/v1/live")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		live.Targets = nil
		return json.NewDecoder(resp.Body).Decode(&live) == nil && len(live.Targets) == 3
	})
	notes := map[string]string{}
	for _, tg := range live.Targets {
		notes[tg.URL] = tg.Note
	}
	if notes[later.url] != "" || notes[added.url] == "" {
		t.Errorf("notes %q, want one for the target added through the API only", notes)
	}
	steps := r.finish()
	checkKeys(t, steps[1], map[string]float64{"vllm/prompt_tokens": 0})
	checkKeys(t, steps[2], map[string]float64{"vllm/prompt_tokens": 5000, "vllm/prefix_cache_hits": 2700, "vllm/generation_tokens": 680,
		"vllm/num_preemptions": 6})
	for _, w := range steps[2].PerWorker {
		if w.Target == added.url && w.Metrics["vllm/prompt_tokens"] != 0 {
			t.Errorf("the target added through the API counted its first page: %v", w.Metrics)
		}
	}
}
