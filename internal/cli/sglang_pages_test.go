package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// pageServer answers its n-th request (from 1) with page(n), on loopback.
type pageServer struct {
	mu   sync.Mutex
	n    int
	page func(n int) string
	srv  *httptest.Server
}

func servePages(t *testing.T, page func(n int) string) *pageServer {
	t.Helper()
	s := &pageServer{page: page}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.n++
		n := s.n
		s.mu.Unlock()
		fmt.Fprint(w, s.page(n))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *pageServer) url() string { return s.srv.URL + "/metrics" }

func (s *pageServer) served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// runPages runs "vllmstat run --per-worker" against servers, ending a step each time every
// server has answered at least the next of pages requests, and returns the steps and the run's
// stderr. Replaying the run's recording gives its steps.jsonl byte for byte.
func runPages(t *testing.T, servers []*pageServer, pages ...int) ([]step.Record, string) {
	t.Helper()
	out := t.TempDir()
	rec := filepath.Join(out, "run.jsonl.gz")
	args := []string{"--per-worker", "--record", rec}
	for _, s := range servers {
		args = append(args, "--target", s.url())
	}
	l := startLive(t, out, args...)
	for i, n := range pages {
		testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("%d pages of each server", n), func() bool {
			for _, s := range servers {
				if s.served() < n {
					return false
				}
			}
			return true
		})
		l.endStep(i + 1)
	}
	if code := l.stop(); code != 0 {
		t.Fatalf("run exited %d\n%s", code, l.stderr.String())
	}
	recs, live := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(recs) != len(pages) {
		t.Fatalf("%d steps, want %d\n%s", len(recs), len(pages), l.stderr.String())
	}
	var replay, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &replay, &errb); code != 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	if !bytes.Equal(replay.Bytes(), live) {
		t.Errorf("replay differs from the live steps.jsonl\nreplay:\n%s\nlive:\n%s", replay.String(), live)
	}
	return recs, l.stderr.String()
}

// workerOf returns the per-worker record of target url whose labels are labels.
func workerOf(t *testing.T, r step.Record, url string, labels map[string]string) step.WorkerRecord {
	t.Helper()
	for _, w := range r.PerWorker {
		if w.Target == url && fmt.Sprint(w.Labels) == fmt.Sprint(labels) {
			return w
		}
	}
	t.Fatalf("step %d: no worker of %s with labels %v: %+v", r.Step, url, labels, r.PerWorker)
	return step.WorkerRecord{}
}

// sum adds key over the steps' records, of the fleet or of one worker.
func sum(recs []step.Record, key string, of func(step.Record) map[string]float64) float64 {
	var s float64
	for _, r := range recs {
		s += of(r)[key]
	}
	return s
}

// rise is a counter's growth by page: nothing for 4 pages, then one a page for 10 pages.
func rise(n int) int { return min(max(n-4, 0), 10) }

// TestRunSGLangPriorities runs "vllmstat run" against two SGLang servers with priority
// scheduling, whose running and queue gauges come per priority: one with the total under
// priority="" too, one without it. Each counts its 7 running and 4 waiting requests once.
func TestRunSGLangPriorities(t *testing.T) {
	gauges := func(total bool) func(int) string {
		return func(int) string {
			var b strings.Builder
			for _, g := range []struct {
				name  string
				parts [3]int // total, priority 0, priority 1
			}{{"num_running_reqs", [3]int{7, 3, 4}}, {"num_queue_reqs", [3]int{4, 1, 3}}} {
				for i, p := range []string{"", "0", "1"} {
					if i > 0 || total {
						fmt.Fprintf(&b, "sglang:%s{model_name=\"m\",pp_rank=\"0\",priority=%q,tp_rank=\"0\"} %d\n", g.name, p, g.parts[i])
					}
				}
			}
			return b.String()
		}
	}
	withTotal, partsOnly := servePages(t, gauges(true)), servePages(t, gauges(false))
	recs, _ := runPages(t, []*pageServer{withTotal, partsOnly}, 5)
	for _, s := range []*pageServer{withTotal, partsOnly} {
		m := workerOf(t, recs[0], s.url(), nil).Metrics
		for key, want := range map[string]float64{"sglang/num_requests_running/max": 7, "sglang/num_requests_running/mean": 7,
			"sglang/num_requests_waiting/max": 4, "sglang/num_requests_waiting/mean": 4} {
			if m[key] != want {
				t.Errorf("%s: %s = %v, want %v", s.url(), key, m[key], want)
			}
		}
	}
}

// TestRunRatioOverOne runs "vllmstat run" against an SGLang server that counts more cached
// tokens than prompt tokens (250 to 100 a page) and a vLLM server that counts more prefix-cache
// hits than queries, over two steps: neither step has a hit rate, of the fleet or of either
// worker, the counters themselves are kept, and each target is named once in a warning with
// both counters.
func TestRunRatioOverOne(t *testing.T) {
	sglang := servePages(t, func(n int) string {
		return fmt.Sprintf("sglang:prompt_tokens_total{model_name=\"m\"} %d\nsglang:cached_tokens_total{cache_source=\"device\",model_name=\"m\"} %d\n", 100*n, 250*n)
	})
	vllm := servePages(t, func(n int) string {
		return fmt.Sprintf("vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} %d\nvllm:prefix_cache_hits_total{engine=\"0\",model_name=\"m\"} %d\n", 100*n, 300*n)
	})
	recs, logs := runPages(t, []*pageServer{sglang, vllm}, 5, 10)
	for _, r := range recs {
		for _, key := range []string{"sglang/prefix_cache_hit_rate", "vllm/prefix_cache_hit_rate"} {
			if v, ok := r.Metrics[key]; ok {
				t.Errorf("step %d: %s = %v", r.Step, key, v)
			}
			for _, w := range r.PerWorker {
				if v, ok := w.Metrics[key]; ok {
					t.Errorf("step %d: %s of %s = %v", r.Step, key, w.Target, v)
				}
			}
		}
		if r.Metrics["sglang/cached_tokens"] != 2.5*r.Metrics["sglang/prompt_tokens"] || r.Metrics["sglang/prompt_tokens"] == 0 ||
			r.Metrics["vllm/prefix_cache_hits"] != 3*r.Metrics["vllm/prefix_cache_queries"] || r.Metrics["vllm/prefix_cache_queries"] == 0 {
			t.Errorf("step %d: counters %v", r.Step, r.Metrics)
		}
	}
	for _, w := range []struct{ url, num, den string }{
		{sglang.url(), "sglang/cached_tokens", "sglang/prompt_tokens"},
		{vllm.url(), "vllm/prefix_cache_hits", "vllm/prefix_cache_queries"},
	} {
		var warned []string
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "target="+w.url) {
				warned = append(warned, l)
			}
		}
		if len(warned) != 1 || !strings.Contains(warned[0], w.num) || !strings.Contains(warned[0], w.den) {
			t.Errorf("%s: warnings %q, want one naming %s and %s\n%s", w.url, warned, w.num, w.den, logs)
		}
	}
}

// TestRunSGLangRankCopies runs "vllmstat run" against two SGLang servers whose TP ranks each
// export a copy of the worker's figures, the copies' counters apart by an offset (as copies
// whose processes started apart): one whose rank-0 copy is missing from every third page, one
// whose two copies tie at rank 0 (tp_rank="0" and "00") and swap places from page to page. Each
// worker counts its 10 retractions once, from one copy, whose gauge reads 7; the tokenizer's
// prompt tokens count whole across the change of copy.
func TestRunSGLangRankCopies(t *testing.T) {
	t.Parallel()
	scheduler := func(b *strings.Builder, tp string, running, retracted int) {
		fmt.Fprintf(b, "sglang:num_running_reqs{engine_type=\"unified\",model_name=\"m\",pp_rank=\"0\",tp_rank=%q} %d\n", tp, running)
		fmt.Fprintf(b, "sglang:num_retracted_requests_total{engine_type=\"unified\",model_name=\"m\",pp_rank=\"0\",tp_rank=%q} %d\n", tp, retracted)
	}
	tokenizer := func(b *strings.Builder, n int) {
		fmt.Fprintf(b, "sglang:prompt_tokens_total{engine_type=\"unified\",model_name=\"m\"} %d\n", 100*min(n, 14))
	}
	missing := servePages(t, func(n int) string {
		var b strings.Builder
		if n%3 != 0 {
			scheduler(&b, "0", 7, 1000+rise(n))
		}
		scheduler(&b, "1", 7, 500+rise(n))
		tokenizer(&b, n)
		return b.String()
	})
	tied := servePages(t, func(n int) string {
		var b strings.Builder
		first, second := func() { scheduler(&b, "0", 7, 1000+rise(n)) }, func() { scheduler(&b, "00", 7, 600+rise(n)) }
		if n%2 == 0 {
			first, second = second, first
		}
		first()
		second()
		tokenizer(&b, n)
		return b.String()
	})
	recs, logs := runPages(t, []*pageServer{missing, tied}, 20)
	for _, s := range []*pageServer{missing, tied} {
		w := func(r step.Record) map[string]float64 { return workerOf(t, r, s.url(), nil).Metrics }
		if got := sum(recs, "sglang/num_preemptions", w); got != 10 {
			t.Errorf("%s: %v retractions, the server made 10\n%s", s.url(), got, logs)
		}
		if got := sum(recs, "sglang/prompt_tokens", w); got != 1300 {
			t.Errorf("%s: %v prompt tokens, the server counted 1300 from its first page", s.url(), got)
		}
		if got := w(recs[0])["sglang/num_requests_running/max"]; got != 7 {
			t.Errorf("%s: running at most %v, every copy reads 7", s.url(), got)
		}
	}
}

// TestRunSGLangRouterOf33 runs "vllmstat run" against a router page of 33 SGLang servers, each
// a tokenizer and a scheduler of DP rank 0 (66 workers on the page, 33 of them tokenizers): the
// page is within the default limit of 64 workers, the step counts 33 engines, and every
// server's tokens and retractions.
func TestRunSGLangRouterOf33(t *testing.T) {
	t.Parallel()
	const servers = 33
	router := servePages(t, func(n int) string {
		var b strings.Builder
		for i := range servers {
			addr := fmt.Sprintf("http://10.0.%d.1:30000", i)
			fmt.Fprintf(&b, "sglang_num_running_reqs{dp_rank=\"0\",model_name=\"m\",pp_rank=\"0\",tp_rank=\"0\",worker_addr=%q} 2\n", addr)
			fmt.Fprintf(&b, "sglang_num_retracted_requests_total{dp_rank=\"0\",model_name=\"m\",pp_rank=\"0\",tp_rank=\"0\",worker_addr=%q} %d\n", addr, rise(n))
			fmt.Fprintf(&b, "sglang_prompt_tokens_total{model_name=\"m\",worker_addr=%q} %d\n", addr, 100*min(n, 14))
		}
		return b.String()
	})
	recs, logs := runPages(t, []*pageServer{router}, 20)
	r := recs[0]
	if r.Workers != servers || r.Scrapes.Failed != 0 {
		t.Fatalf("%d workers, %d failed scrapes; want %d engines\n%s", r.Workers, r.Scrapes.Failed, servers, logs)
	}
	if got := r.Metrics["sglang/num_preemptions"]; got != 10*servers {
		t.Errorf("%v retractions, the servers made %d", got, 10*servers)
	}
	if got := r.Metrics["sglang/prompt_tokens"]; got != 1300*servers {
		t.Errorf("%v prompt tokens, the servers counted %d", got, 1300*servers)
	}
}
