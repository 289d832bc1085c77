package scrape

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/target"
)

const python = "/usr/bin/python3"

// needPromClient skips the test, loudly, without Python or its prometheus_client, except in CI,
// where it fails.
func needPromClient(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import prometheus_client").CombinedOutput(); err != nil {
		msg := "SKIPPED: needs " + python + " with prometheus_client (Debian: python3-prometheus-client): " + strings.TrimSpace(string(out)) + " " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// pythonServer starts testdata/promclient_server.py: vLLM families served by prometheus_client's
// own WSGI app, from a MultiProcessCollector registry when multiproc. It returns the server's
// base URL. Without Python or prometheus_client the test is skipped, loudly, except in CI.
func pythonServer(t *testing.T, multiproc bool) string {
	t.Helper()
	needPromClient(t)
	cmd := exec.Command(python, "testdata/promclient_server.py")
	cmd.Env = os.Environ()
	if multiproc {
		cmd.Env = append(cmd.Env, "PROMETHEUS_MULTIPROC_DIR="+t.TempDir())
	}
	cmd.Stderr = os.Stderr
	_, stdout := startPiped(t, cmd)
	port, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("python server: %v", err)
	}
	return "http://127.0.0.1:" + strings.TrimSpace(port)
}

// startPiped starts cmd with pipes to its standard input and from its standard output; at the
// test's end it closes the input, which ends the child (each serves until then), and waits.
func startPiped(tb testing.TB, cmd *exec.Cmd) (stdin io.WriteCloser, stdout io.Reader) {
	tb.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err = cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stdin.Close(); cmd.Wait() })
	return stdin, stdout
}

// sampleNamesOf returns the distinct sample names of a page.
func sampleNamesOf(page []byte) []string {
	var names []string
	for _, l := range strings.Split(string(page), "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		if i := strings.IndexAny(l, "{ "); i > 0 && !slices.Contains(names, l[:i]) {
			names = append(names, l[:i])
		}
	}
	slices.Sort(names)
	return names
}

func scrapeOK(t *testing.T, s *scraper, opt *Options) Result {
	t.Helper()
	r := s.scrape()
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	return r
}

// TestRequestNamesPrometheusClient scrapes a real prometheus_client server: restricted pages
// are smaller, hold exactly the names asked that the server has, parse into the same data as
// the full page, and hold a family added after the first scrape.
func TestRequestNamesPrometheusClient(t *testing.T) {
	base := pythonServer(t, false)
	for _, comp := range []Compression{CompressionGzip, CompressionNone} {
		t.Run(string(comp), func(t *testing.T) {
			opt := (&Options{Timeout: 5 * time.Second, RequestNames: true, Compression: comp, KeepBody: true}).withDefaults()
			s := newScraper(context.Background(), target.Target{URL: base + "/metrics"}, &opt)
			full := scrapeOK(t, s, &opt)
			restricted := scrapeOK(t, s, &opt)
			if !s.names.active() || s.names.off {
				t.Fatal("not restricting after a full page with vLLM's names")
			}
			if !samePage(restricted.Page, full.Page) {
				t.Errorf("restricted page %+v, full %+v", restricted.Page, full.Page)
			}
			if restricted.BodyBytes >= full.BodyBytes {
				t.Errorf("restricted page of %d bytes, full of %d", restricted.BodyBytes, full.BodyBytes)
			}
			var want []string
			for _, n := range sampleNamesOf(full.Body) {
				if slices.Contains(vllmNames(), n) {
					want = append(want, n)
				}
			}
			if got := sampleNamesOf(restricted.Body); !slices.Equal(got, want) || len(want) < 5 {
				t.Errorf("restricted page has %v, want %v", got, want)
			}
			if comp == CompressionGzip { // once: the family stays
				resp, err := http.Get(base + "/add")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			later := scrapeOK(t, s, &opt)
			now := Fetch(context.Background(), target.Target{URL: base + "/metrics"}, opt)
			if !strings.Contains(string(later.Body), "vllm:num_preemptions_total") || !samePage(later.Page, now.Page) || later.BodyBytes >= now.BodyBytes {
				t.Errorf("restricted page after a family was added:\n%s\nwant the data of\n%s", later.Body, now.Body)
			}
		})
	}
}

// TestRequestNamesMultiProcess scrapes a prometheus_client server whose registry holds a
// MultiProcessCollector, which answers an empty page to restricted requests: the scrape gets
// the full page anyway, loses nothing, and the target is asked for full pages from then on.
func TestRequestNamesMultiProcess(t *testing.T) {
	base := pythonServer(t, true)
	logs := &syncbuf.Buffer{}
	opt := (&Options{Timeout: 5 * time.Second, RequestNames: true, Logger: slog.New(slog.NewTextHandler(logs, nil))}).withDefaults()
	s := newScraper(context.Background(), target.Target{URL: base + "/metrics"}, &opt)
	full := scrapeOK(t, s, &opt)
	if len(full.Page.Engines) != 2 {
		t.Fatalf("full page %+v: want two engines", full.Page)
	}
	for i := range 3 {
		r := scrapeOK(t, s, &opt)
		if !samePage(r.Page, full.Page) {
			t.Errorf("scrape %d: page %+v, want %+v", i+2, r.Page, full.Page)
		}
	}
	if !s.names.off {
		t.Error("still restricting a target that answers an empty page")
	}
	if n := strings.Count(logs.String(), "asking it for full pages from now on"); n != 1 {
		t.Errorf("logged %d times: %q", n, logs.String())
	}
}

// TestRequestNamesGoServer scrapes a Go client_golang server, whose promhttp filters by family
// name (a histogram's, not its samples'): restricted pages are smaller and lose nothing.
func TestRequestNamesGoServer(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:num_requests_running", Help: "Running."}, []string{"engine"})
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:generation_tokens_total", Help: "Tokens."}, []string{"engine"})
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "vllm:time_to_first_token_seconds", Help: "TTFT.", Buckets: []float64{0.1, 1}}, []string{"engine"})
	o := prometheus.NewCounter(prometheus.CounterOpts{Name: "other_total", Help: "Not vLLM's."})
	reg.MustRegister(g, c, h, o)
	g.WithLabelValues("0").Set(3)
	c.WithLabelValues("0").Add(100)
	h.WithLabelValues("0").Observe(0.5)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	opt := (&Options{Timeout: 5 * time.Second, RequestNames: true}).withDefaults()
	s := newScraper(context.Background(), target.Target{URL: srv.URL + "/metrics"}, &opt)
	full := scrapeOK(t, s, &opt)
	for range 3 {
		r := scrapeOK(t, s, &opt)
		if !samePage(r.Page, full.Page) || r.BodyBytes >= full.BodyBytes || len(r.Page.Engines[0].Hists) != 1 {
			t.Errorf("page %+v (%d bytes), want %+v (%d)", r.Page, r.BodyBytes, full.Page, full.BodyBytes)
		}
	}
	if !s.names.active() {
		t.Error("stopped asking a server that answers well")
	}
}
