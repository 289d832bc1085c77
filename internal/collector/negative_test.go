package collector

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestNegativeBucketWarnedOnce: a target whose TTFT histogram has a bucket le="-1" is named
// with the family in one warning, however many steps refuse it, and the records have no
// quantile of it.
func TestNegativeBucketWarnedOnce(t *testing.T) {
	pg := func(n int) string {
		var b strings.Builder
		for i, le := range []string{"-1", "0.1", "+Inf"} {
			fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=%q,model_name=\"m\"} %d\n", le, n*i)
		}
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"m\"} %d\n", 2*n)
		fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"m\"} %d\n", n)
		return b.String()
	}
	s := newPageServer(t, pg(0))
	obs := &recObserver{}
	var logBuf syncbuf.Buffer
	c, fc, stop := start(t, Options{Targets: targets(s.srv.URL), NoFinalStep: true, Observer: obs,
		Options: scrape.Options{Logger: slog.New(slog.NewTextHandler(&logBuf, nil))}})
	defer stop()
	ctx := context.Background()
	n := 0
	scrapeOnce := func() {
		t.Helper()
		n++
		if n > 1 {
			fc.Advance(time.Second)
		}
		testkit.WaitFor(t, 5*time.Second, fmt.Sprintf("scrape %d", n), func() bool { obs.mu.Lock(); defer obs.mu.Unlock(); return obs.scraped == n })
	}
	scrapeOnce()
	for k := range 3 {
		s.set(pg(4 * (k + 1)))
		scrapeOnce()
		r, err := c.EndStep(ctx, int64(k+1))
		if err != nil {
			t.Fatal(err)
		}
		obs.mu.Lock()
		n = obs.scraped // the step end scraped too
		obs.mu.Unlock()
		if v, ok := r.Metrics["vllm/time_to_first_token_seconds/p50"]; ok {
			t.Errorf("step %d: p50 %v from a refused histogram", k+1, v)
		}
	}
	logs := logBuf.String()
	if got := strings.Count(logs, "bucket below 0"); got != 1 || !strings.Contains(logs, "histogram=vllm/time_to_first_token_seconds") {
		t.Errorf("warned %d times, want once naming the histogram\n%s", got, logs)
	}
}
