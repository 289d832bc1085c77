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

// TestNotPrometheusTextLoggedOnce: a target whose page is not Prometheus text is logged once
// when it starts failing so and once when it recovers, however many scrapes fail in between;
// every one of them still counts as failed.
func TestNotPrometheusTextLoggedOnce(t *testing.T) {
	const good = "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 1\n"
	s := newPageServer(t, good)
	obs := &recObserver{}
	var logBuf syncbuf.Buffer
	c, fc, stop := start(t, Options{Targets: targets(s.srv.URL), NoFinalStep: true, Observer: obs,
		Options: scrape.Options{Logger: slog.New(slog.NewTextHandler(&logBuf, nil))}})
	defer stop()
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
	s.set("<html><body>502 Bad Gateway</body></html>\n")
	for range 5 {
		scrapeOnce()
	}
	s.set(good)
	scrapeOnce()
	s.set("{not: prometheus}\n")
	scrapeOnce()
	scrapeOnce()

	logs := logBuf.String()
	if got := strings.Count(logs, "page is not Prometheus text"); got != 2 {
		t.Errorf("logged %d times that the page is not Prometheus text, want twice (two times it started failing)\n%s", got, logs)
	}
	if got := strings.Count(logs, `msg="target up"`); got != 1 {
		t.Errorf("logged %d times that the target is up, want once\n%s", got, logs)
	}
	if got := strings.Count(logs, "level=WARN"); got != 2 {
		t.Errorf("%d warnings, want 2: one each time the target went down\n%s", got, logs)
	}
	_, ts, err := c.Live(context.Background())
	if err != nil || len(ts) != 1 || ts[0].Failures != 7 || ts[0].Scrapes != 9 || ts[0].Up {
		t.Fatalf("target states %+v %v: want 7 failures in 9 scrapes, down", ts, err)
	}
}
