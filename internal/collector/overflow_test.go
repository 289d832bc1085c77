package collector

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// pageServer answers whatever page its test set last, and counts its answers.
type pageServer struct {
	n    atomic.Int64
	body atomic.Pointer[string]
	srv  *httptest.Server
}

func newPageServer(t *testing.T, body string) *pageServer {
	s := &pageServer{}
	s.set(body)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.n.Add(1)
		w.Write([]byte(*s.body.Load()))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *pageServer) set(body string) { s.body.Store(&body) }

// overflowPage is a page of two engines whose counters hold v (prompt tokens: 10 and 20, hits a
// tenth of the queries, a time-to-first-token histogram of v observations).
func overflowPage(v float64) string {
	var b strings.Builder
	for e, prompt := range []float64{10, 20} {
		l := fmt.Sprintf(`engine="%d",model_name="m"`, e)
		if v == 0 {
			prompt = 0
		}
		fmt.Fprintf(&b, "vllm:generation_tokens_total{%s} %g\n", l, v)
		fmt.Fprintf(&b, "vllm:prompt_tokens_total{%s} %g\n", l, prompt)
		fmt.Fprintf(&b, "vllm:prefix_cache_queries_total{%s} %g\n", l, v)
		fmt.Fprintf(&b, "vllm:prefix_cache_hits_total{%s} %g\n", l, v/10)
		fmt.Fprintf(&b, "vllm:num_preemptions_total{%s} %g\n", l, v)
		fmt.Fprintf(&b, "vllm:num_requests_running{%s} 1\n", l)
		for _, le := range []string{"0.1", "0.5", "+Inf"} {
			n := v
			if le == "0.1" {
				n = v / 2
			}
			fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{%s,le=%q} %g\n", l, le, n)
		}
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_sum{%s} %g\n", l, v/10)
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_count{%s} %g\n", l, v)
	}
	return b.String()
}

// TestOverflowedKeysAreAbsent scrapes two engines whose counters jump from 0 to 1e308 each, inside
// a phase: every worker's own keys are finite and stay, but the fleet's sums overflow, and every
// key computed from them is absent from the step and the phase, never 0.
func TestOverflowedKeysAreAbsent(t *testing.T) {
	s := newPageServer(t, overflowPage(0))
	c, _, stop := start(t, Options{Targets: targets(s.srv.URL), NoFinalStep: true, Tracker: step.Options{PerWorker: true, Scalars: true}})
	defer stop()
	ctx := context.Background()
	testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return s.n.Load() >= 1 })
	if _, err := c.StartPhase(ctx, "rollout"); err != nil {
		t.Fatal(err)
	}
	s.set(overflowPage(1e308))
	r, err := c.EndStep(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	overflowed := []string{
		"generation_tokens", "generation_tokens_per_s", "generation_tokens/mean", "generation_tokens_imbalance",
		"prefix_cache_queries", "prefix_cache_hit_rate", "num_preemptions",
		"time_to_first_token_seconds/p50", "time_to_first_token_seconds/p95", "time_to_first_token_seconds/p99",
		"time_to_first_token_seconds/mean",
	}
	check := func(where string, m map[string]float64, prefix string) {
		t.Helper()
		for _, k := range overflowed {
			if v, ok := m[prefix+k]; ok {
				t.Errorf("%s: %s = %v, want it absent: the fleet's sum overflowed", where, prefix+k, v)
			}
		}
		for k, v := range map[string]float64{"prompt_tokens": 30, "prefix_cache_hits": 2e307} {
			if got := m[prefix+k]; got != v {
				t.Errorf("%s: %s = %v, want %v: its sum is finite", where, prefix+k, got, v)
			}
		}
		for _, k := range []string{"generation_tokens/max", "prefix_cache_hit_rate/mean", "num_preemptions/worst_worker", "prefix_cache_hit_rate/worst_worker"} {
			if _, ok := m[prefix+k]; !ok {
				t.Errorf("%s: %s absent, want it: its inputs are finite", where, prefix+k)
			}
		}
	}
	check("step", r.Metrics, "vllm/")
	if r.Phases["rollout"] == nil {
		t.Fatalf("no rollout phase in %+v", r)
	}
	check("phase", r.Phases["rollout"].Metrics, "vllm/")
	if len(r.PerWorker) != 2 {
		t.Fatalf("%d per-worker records, want 2", len(r.PerWorker))
	}
	for _, w := range r.PerWorker {
		want := map[string]float64{"vllm/generation_tokens": 1e308, "vllm/prefix_cache_hit_rate": 0.1, "vllm/time_to_first_token_seconds/mean": 0.1}
		for k, v := range want {
			if got, ok := w.Metrics[k]; !ok || math.Abs(got-v) > 1e-12*v {
				t.Errorf("engine %s: %s = %v (present %v), want %v", w.Engine, k, got, ok, v)
			}
		}
	}
	if _, err := step.MarshalLine(&r); err != nil {
		t.Errorf("the record does not encode: %v", err)
	}
}
