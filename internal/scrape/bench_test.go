package scrape

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/target"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// The benchmarks fetch a vLLM 0.20 page (38 KB, as prometheus_client renders it) from a server
// in a child process, so that the CPU time they report (cpu-ns/op: user and system time of this
// process, garbage collection included) is the scraper's alone. Compare runs with
//
//	go test ./internal/scrape -run '^$' -bench 'Get|Fetch' -benchmem -count 6 | tee new.txt
//	benchstat old.txt new.txt

// benchServeEnv holds, in the child process, the path of the page it serves.
const benchServeEnv = "VLLMSTAT_SCRAPE_BENCH_SERVE"

// benchPage is the shared fixture the benchmarks serve and scan.
const benchPage = "prometheus-client-render-vllm-0.20.prom"

func TestMain(m *testing.M) {
	if path := os.Getenv(benchServeEnv); path != "" {
		serveBench(path)
		return
	}
	os.Exit(m.Run())
}

// restrictPage keeps the lines of page that a server asked for names would render: the
// samples named and their families' HELP and TYPE lines. It is a model of prometheus_client's
// restricted answer, for the benchmarks only.
func restrictPage(page []byte, names []string) []byte {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	var out bytes.Buffer
	for _, l := range bytes.SplitAfter(page, []byte("\n")) {
		name := string(l)
		if f := strings.Fields(name); len(f) > 2 && f[0] == "#" {
			name = f[2]
			if set[name] || set[name+"_total"] || set[name+"_bucket"] {
				out.Write(l)
			}
			continue
		}
		if i := strings.IndexAny(name, "{ "); i >= 0 {
			name = name[:i]
		}
		if set[name] {
			out.Write(l)
		}
	}
	return out.Bytes()
}

func gzipped(b []byte) []byte {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(b)
	w.Close()
	return z.Bytes()
}

// serveBench is the child process: it serves the page at path, pre-gzipped when the request
// accepts gzip, restricted when it names samples, prints its address, and exits when its
// standard input closes.
func serveBench(path string) {
	full, err := os.ReadFile(path)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	restricted := restrictPage(full, page.SampleNames())
	fullZ, restrictedZ := gzipped(full), gzipped(restricted)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, zipped := full, fullZ
		if strings.Contains(r.URL.RawQuery, "name") {
			body, zipped = restricted, restrictedZ
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			body = zipped
		}
		w.Write(body)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(l.Addr().String(), len(full), len(fullZ), len(restricted), len(restrictedZ))
	go http.Serve(l, h)
	io.Copy(io.Discard, os.Stdin)
}

// benchServer starts the child process and returns the URL of its page.
func benchServer(b *testing.B) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchServeEnv+"="+testkit.Fixture(b, benchPage))
	_, stdout := startPiped(b, cmd)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) == 0 || f[0] == "error" {
		b.Fatalf("bench server: %q %v", line, err)
	}
	return "http://" + f[0] + "/metrics"
}

// cpuTime is this process's user and system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchLoop runs op b.N times and reports this process's CPU time per op.
func benchLoop(b *testing.B, op func()) {
	b.ReportAllocs()
	op() // connect
	b.ResetTimer()
	c0 := cpuTime()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
}

// legacyGet is how a page was fetched before: a new request per scrape and net/http's
// transparent gzip. It stays here as the baseline the benchmarks compare against.
func legacyGet(ctx context.Context, client *http.Client, url string, maxBody int64, buf *bytes.Buffer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.9,*/*;q=0.1")
	req.Header.Set("User-Agent", "vllmstat")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Code: resp.StatusCode}
	}
	if resp.ContentLength > 0 && resp.ContentLength <= maxBody {
		buf.Grow(int(resp.ContentLength) + 1)
	}
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, maxBody+1)); err != nil {
		return err
	}
	if int64(buf.Len()) > maxBody {
		return ErrBodyTooLarge
	}
	return nil
}

func legacyClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = 4
	tr.IdleConnTimeout = 5 * time.Minute
	return &http.Client{Transport: tr}
}

// BenchmarkGet measures fetching the page without parsing it: the legacy way (net/http's
// gzip), and the scraper's with each compression, full and restricted to the sample names
// vllmstat reads.
func BenchmarkGet(b *testing.B) {
	u := benchServer(b)
	b.Run("legacy-gzip", func(b *testing.B) {
		client := legacyClient()
		var buf bytes.Buffer
		benchLoop(b, func() {
			buf.Reset()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := legacyGet(ctx, client, u, DefaultMaxBody, &buf); err != nil {
				b.Fatal(err)
			}
		})
	})
	for _, fast := range []bool{false, true} {
		for _, c := range []Compression{CompressionGzip, CompressionNone} {
			for _, restrict := range []bool{false, true} {
				name := string(c) + "-full"
				if restrict {
					name = string(c) + "-restricted"
				}
				if fast {
					name = "fast-" + name
				}
				b.Run(name, func(b *testing.B) {
					opt := Options{Client: NewClient(), Timeout: 5 * time.Second, Compression: c}
					opt = opt.withDefaults()
					if fast {
						opt.fast = newFastClient(opt.MaxBody)
					}
					s := newScraper(context.Background(), target.Target{URL: u}, &opt)
					defer s.close()
					if restrict {
						s.names.restrict(page.SampleNames()[:1]) // the namespace of vllm: names
					}
					var buf bytes.Buffer
					benchLoop(b, func() {
						buf.Reset()
						if _, err := s.get(restrict, &buf, time.Now().Add(opt.Timeout)); err != nil {
							b.Fatal(err)
						}
					})
				})
			}
		}
	}
}

// BenchmarkFetch measures whole scrapes, parse included, as a target's goroutine makes them.
func BenchmarkFetch(b *testing.B) {
	u := benchServer(b)
	b.Run("legacy-gzip", func(b *testing.B) {
		client := legacyClient()
		benchLoop(b, func() {
			buf := bufs.Get().(*bytes.Buffer)
			defer bufs.Put(buf)
			buf.Reset()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := legacyGet(ctx, client, u, DefaultMaxBody, buf); err != nil {
				b.Fatal(err)
			}
			if _, err := page.ParsePageOptions(buf.Bytes(), page.Options{}); err != nil {
				b.Fatal(err)
			}
		})
	})
	for _, c := range []Compression{CompressionGzip, CompressionNone} {
		for _, names := range []bool{false, true} {
			name := string(c)
			if names {
				name += "-request-names"
			}
			b.Run(name, func(b *testing.B) {
				opt := Options{Client: NewClient(), Timeout: 5 * time.Second, Compression: c, RequestNames: names}
				opt = opt.withDefaults()
				s := newScraper(context.Background(), target.Target{URL: u}, &opt)
				benchLoop(b, func() {
					r := s.scrape()
					if r.Err() != nil {
						b.Fatal(r.Err())
					}
				})
			})
		}
	}
}

// BenchmarkScanNames measures the check of a restricted page (the sample names it has), which
// every restricted scrape pays.
func BenchmarkScanNames(b *testing.B) {
	full := testkit.ReadFixture(b, benchPage)
	sn := readNames()
	for name, page := range map[string][]byte{"full": full, "restricted": restrictPage(full, page.SampleNames())} {
		b.Run(name, func(b *testing.B) {
			set := newNameSet(len(sn.names))
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				scanNames(page, sn, set)
			}
		})
	}
}

// BenchmarkPool measures a pool's scrapes as a step end makes them: every target at once, each
// page restricted to the sample names and parsed by the target's parser; cpu-ns/scrape is this
// process's CPU time per scrape, heap-B/target the heap the pool holds once its rounds are done
// and a collection has run (its targets' state and parsers, and the requests, answers and
// buffers its clients keep pooled, which outlive one collection).
func BenchmarkPool(b *testing.B) {
	const targets = 64
	h0 := testkit.HeapAfterGC().HeapAlloc
	base := strings.TrimSuffix(benchServer(b), "/metrics")
	var ts []target.Target
	for i := range targets {
		ts = append(ts, target.Target{URL: fmt.Sprintf("%s/metrics/%d", base, i)})
	}
	out := make(chan Result, targets)
	p := NewPool(Options{Timeout: 5 * time.Second, RequestNames: true, Compression: CompressionNone}, out)
	defer p.Close()
	p.Add(ts)
	<-p.Started()
	var id uint64
	round := func() {
		id++
		p.Boundary(id)
		for range targets {
			r := <-out
			if r.Err() != nil {
				b.Fatal(r.Err())
			}
			r.Page.Release()
		}
	}
	for range 3 { // the full pages, then restricted ones learnt
		round()
	}
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	for b.Loop() {
		round()
	}
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N*targets), "cpu-ns/scrape")
	b.StopTimer()
	b.ReportMetric(float64(testkit.HeapAfterGC().HeapAlloc-h0)/targets, "heap-B/target")
}
