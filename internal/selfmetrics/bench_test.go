package selfmetrics

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/promtest"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/step"
)

// fleetMetrics returns Metrics as a run of targets targets of two workers each has them: every
// target scraped, every worker's last interval kept, and the last step closed.
func fleetMetrics(tb testing.TB, targets int) *Metrics {
	tb.Helper()
	run, err := promtest.SimulateRun(promtest.RunOptions{Servers: 1, DP: 2, Steps: 2, Scrapes: 5, Interval: time.Second,
		End: time.Now(), Prefix: "vllm", Seed: 3})
	if err != nil {
		tb.Fatal(err)
	}
	m := New(Options{})
	urls := make([]string, targets)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://10.0.%d.%d:8000/metrics", i/250, i%250)
	}
	m.TargetsChanged(urls, nil)
	last := map[string]step.Interval{}
	for _, iv := range run.Intervals {
		last[iv.Engine] = iv
	}
	for _, u := range urls {
		m.Scraped(&scrape.Result{Target: u, Duration: 12 * time.Millisecond, BodyBytes: 26373})
		for _, iv := range last {
			iv.Target = u
			m.Interval(iv)
		}
	}
	m.StepClosed(&run.Records[len(run.Records)-1])
	return m
}

// BenchmarkHandler is one GET /metrics of a 1,000-target run (2,000 workers' last intervals),
// as a Prometheus scraping vllmstat asks for it.
func BenchmarkHandler(b *testing.B) {
	m := fleetMetrics(b, 1000)
	h := m.Handler()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
	var n int
	b.ReportAllocs()
	for b.Loop() {
		rec := &countingWriter{h: http.Header{}}
		h.ServeHTTP(rec, req)
		n = rec.n
	}
	b.ReportMetric(float64(n), "page_bytes")
}

// countingWriter is a ResponseWriter that counts the body and keeps none of it.
type countingWriter struct {
	h http.Header
	n int
}

func (w *countingWriter) Header() http.Header { return w.h }
func (w *countingWriter) WriteHeader(int)     {}
func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}

var _ io.Writer = (*countingWriter)(nil)
