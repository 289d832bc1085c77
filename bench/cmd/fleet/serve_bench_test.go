package main

import (
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/vllmstat/vllmstat/bench"
	"github.com/vllmstat/vllmstat/internal/benchpage"
	"github.com/vllmstat/vllmstat/internal/page"
)

// BenchmarkServe measures what the fleet costs per restricted page it serves: 8 clients keep
// one connection each to one port on loopback and ask, gzipped, for the samples vllmstat asks a
// vLLM target for. cpu-ns/op is the process's CPU time per page, the clients' included (they
// stay the same from one version of the server to the next); allocs count both sides too.
//
//	go test -run '^$' -bench Serve -count 6 ./cmd/fleet/ > new.txt && benchstat old.txt new.txt
func BenchmarkServe(b *testing.B) {
	p, err := bench.Page("vllm-0.20")
	if err != nil {
		b.Fatal(err)
	}
	vs := make([][]byte, 4)
	for k := range vs {
		vs[k] = benchpage.Variant(p, k)
	}
	addr := strings.TrimPrefix(serve(b, vs, 1)[0], "http://")
	uri := "http://" + addr + "/metrics?" + nameQuery(true)
	const clients = 8
	c := &fasthttp.HostClient{Addr: addr, MaxConns: clients}
	fetch := func(req *fasthttp.Request, resp *fasthttp.Response) {
		if err := c.Do(req, resp); err != nil {
			b.Error(err)
		} else if resp.StatusCode() != 200 || len(resp.Body()) == 0 {
			b.Errorf("status %d, %d bytes", resp.StatusCode(), len(resp.Body()))
		}
	}
	newRequest := func() *fasthttp.Request {
		req := &fasthttp.Request{}
		req.SetRequestURI(uri)
		req.Header.Set("Accept-Encoding", "gzip")
		return req
	}
	// the first request renders the restricted set
	fetch(newRequest(), &fasthttp.Response{})
	b.ReportAllocs()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for range clients {
		wg.Go(func() {
			req, resp := newRequest(), &fasthttp.Response{}
			for left.Add(-1) >= 0 {
				fetch(req, resp)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// nameQuery returns a name[] query for the sample names vllmstat reads: when vllmOnly is set,
// the query it sends a vLLM target (the names in vLLM's own namespace, and the family name of
// each histogram); otherwise every name in every spelling.
func nameQuery(vllmOnly bool) string {
	var q []string
	for _, n := range page.SampleNames() {
		if !vllmOnly {
			q = append(q, url.QueryEscape("name[]")+"="+url.QueryEscape(n))
			continue
		}
		if !strings.HasPrefix(n, "vllm:") {
			continue
		}
		q = append(q, url.QueryEscape("name[]")+"="+url.QueryEscape(n))
		if base, ok := strings.CutSuffix(n, "_bucket"); ok {
			q = append(q, url.QueryEscape("name[]")+"="+url.QueryEscape(base))
		}
	}
	return strings.Join(q, "&")
}

// cpuTime returns the CPU time the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
