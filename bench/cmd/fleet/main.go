// Command fleet serves a static fleet of vLLM /metrics pages on consecutive loopback ports, for
// load runs of scrapers: every port serves the same page, a different variant of its values on
// each request, gzipped when the scraper accepts it, all rendered and compressed at start so
// that the fleet itself costs little CPU. Like prometheus_client, it renders only the samples
// named by name[] query parameters when a request has any.
//
//	fleet -n 1000 -page vllm-0.20
//
// It prints "fleet ready: base PORT count N" once every port listens, serves the number of pages
// it has served so far at /fleet/served on every port, and stops on SIGTERM or SIGINT.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/vllmstat/vllmstat/bench"
	"github.com/vllmstat/vllmstat/internal/benchpage"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 1000, "number of servers (ports)")
	port := fs.Int("port", 0, "first port; 0 picks a free range below the ephemeral ports")
	host := fs.String("host", "127.0.0.1", "address to listen on (loopback)")
	pageName := fs.String("page", "vllm-0.20", "page to serve: one of "+strings.Join(bench.PageNames(), ", "))
	file := fs.String("file", "", "serve this exposition file instead of -page")
	variants := fs.Int("variants", 64, "variants of the page's values, served in turn to each target (counters grow from one to the next and fall back after the last, as after a restart)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *n < 1 || *n > 20000 || *variants < 1 || *port < 0 || *port+*n > 65536 {
		fmt.Fprintln(stderr, "fleet: -n must be in 1..20000, -variants at least 1, and the ports within 1..65535")
		return 2
	}
	var page []byte
	var err error
	if *file != "" {
		page, err = os.ReadFile(*file)
		*pageName = *file
	} else {
		page, err = bench.Page(*pageName)
	}
	if err != nil {
		fmt.Fprintf(stderr, "fleet: %v\n", err)
		return 1
	}
	vs := make([][]byte, *variants)
	for k := range vs {
		vs[k] = benchpage.Variant(page, k)
	}
	lns, err := listen(*host, *port, *n)
	if err != nil {
		fmt.Fprintf(stderr, "fleet: %v\n", err)
		return 1
	}
	srv := newServer(newPages(vs), lns, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	errc := make(chan error, len(lns))
	for _, l := range lns {
		go func() { errc <- srv.Serve(l) }()
	}
	base := lns[0].Addr().(*net.TCPAddr).Port
	fmt.Fprintf(stdout, "fleet ready: base %d count %d page %s variants %d\n", base, *n, *pageName, *variants)
	select {
	case <-ctx.Done():
	case err := <-errc:
		fmt.Fprintf(stderr, "fleet: %v\n", err)
		return 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.ShutdownWithContext(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "fleet: shutdown: %v\n", err)
		return 1
	}
	return 0
}

// listen opens n listeners on consecutive ports from port, or, when port is 0, from the first
// base found free among a few random ones below the usual ephemeral range (32768 and up), where
// the scraper's own outgoing connections do not take them.
func listen(host string, port, n int) ([]net.Listener, error) {
	if port != 0 {
		return listenRange(host, port, n)
	}
	if n > 32768-10000 {
		return nil, fmt.Errorf("no range of %d ports between 10000 and 32768", n)
	}
	var err error
	for range 50 {
		base := 10000 + rand.IntN(32768-10000-n+1)
		var lns []net.Listener
		if lns, err = listenRange(host, base, n); err == nil {
			return lns, nil
		}
	}
	return nil, fmt.Errorf("no free range of %d ports found: %w", n, err)
}

func listenRange(host string, base, n int) ([]net.Listener, error) {
	lns := make([]net.Listener, 0, n)
	for p := base; p < base+n; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, err
		}
		lns = append(lns, l)
	}
	return lns, nil
}

// newServer returns the server of the pages on lns, over HTTP/1.1 with keep-alive. fasthttp
// rather than net/http: the fleet stands in for engines on other machines, and per request
// net/http costs about as much CPU as the scraper under test.
func newServer(p *pages, lns []net.Listener, stderr io.Writer) *fasthttp.Server {
	return &fasthttp.Server{
		Handler: newHandler(p, lns),
		// A request's header must fit the read buffer: a query naming every sample name
		// vllmstat reads is some 15 KB.
		ReadBufferSize:        32 << 10,
		ReadTimeout:           10 * time.Second,
		IdleTimeout:           2 * time.Minute,
		NoDefaultServerHeader: true,
		CloseOnShutdown:       true,
		Logger:                log.New(stderr, "fleet: ", 0),
	}
}

// newHandler serves the pages: each port goes through the variants in turn, starting at its own
// offset so that the targets' counters do not all fall back on the same scrape.
func newHandler(p *pages, lns []net.Listener) fasthttp.RequestHandler {
	// by local port (the listeners share one host); read-only once built
	next := make(map[int]*atomic.Int64, len(lns))
	for i, l := range lns {
		c := &atomic.Int64{}
		c.Store(int64(i))
		next[l.Addr().(*net.TCPAddr).Port] = c
	}
	v := int64(len(p.full))
	var served atomic.Int64
	return func(ctx *fasthttp.RequestCtx) {
		path := string(ctx.Path())
		if path != "/metrics" && path != "/fleet/served" {
			ctx.Error("404 page not found\n", fasthttp.StatusNotFound)
			return
		}
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.Error("Method Not Allowed\n", fasthttp.StatusMethodNotAllowed)
			ctx.Response.Header.Set("Allow", "GET, HEAD") // after Error, which resets the response
			return
		}
		if path == "/fleet/served" {
			// The pages served so far, on every port: a count of scrapes that does not depend
			// on what the scraper says.
			fmt.Fprintln(ctx, served.Load())
			return
		}
		var k int64
		if a, ok := ctx.LocalAddr().(*net.TCPAddr); ok {
			if c := next[a.Port]; c != nil {
				k = (c.Add(1) - 1) % v
			}
		}
		b := p.get(int(k), ctx.URI().QueryString())
		ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
		data := b.plain
		if acceptsGzip(ctx.Request.Header.Peek(fasthttp.HeaderAcceptEncoding)) {
			ctx.Response.Header.Set(fasthttp.HeaderContentEncoding, "gzip")
			data = b.gz
		}
		// Counted before the response is written (after the handler returns), so that a client
		// that has read the page reads a count that includes it.
		served.Add(1)
		// The server sets Content-Length from the body, which it does not copy.
		ctx.Response.SetBodyRaw(data)
	}
}

// acceptsGzip reports whether an Accept-Encoding header lists gzip, as prometheus_client checks
// it (without reading q values).
func acceptsGzip(header []byte) bool {
	for part := range bytes.SplitSeq(header, []byte(",")) {
		enc, _, _ := bytes.Cut(part, []byte(";"))
		if bytes.EqualFold(bytes.TrimSpace(enc), []byte("gzip")) {
			return true
		}
	}
	return false
}
