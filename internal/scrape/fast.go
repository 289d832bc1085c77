package scrape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// fastClient sends the scrapes of a pool's plain-HTTP targets that no proxy stands in front
// of: nearly every fleet. net/http runs two goroutines per connection and hands every request
// and answer between them and the caller; at a thousand targets scraped twice a second those
// hand-offs, their buffers and stacks were a third of the scraper's CPU and a fifth of its
// memory. fasthttp writes the request and reads the answer on the scraping goroutine itself,
// with buffers that are only held while a scrape is in flight.
//
// What net/http does that this client does not is left to net/http: a target that answers
// with a redirect, or sits behind a proxy, or speaks TLS, is scraped with the pool's
// net/http client (see scraper.get).
type fastClient struct {
	c      fasthttp.Client
	ctx    context.Context // cancelled by close: no new connections
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[*fastConn]struct{} // open connections, to abort scrapes in flight on close
	closed bool
}

// fastReadBuffer must hold an answer's status line and headers: vLLM's are a few hundred bytes.
const fastReadBuffer = 16 << 10

// fastWriteBuffer holds a whole request, so that it goes out in one write: a request for named
// samples carries about 3 KB of query.
const fastWriteBuffer = 16 << 10

func newFastClient(maxBody int64) *fastClient {
	f := &fastClient{conns: map[*fastConn]struct{}{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.c = fasthttp.Client{
		NoDefaultUserAgentHeader: true, // the request carries vllmstat's
		DialTimeout:              f.dial,
		// Sent as built: the path is the target's, not to be cleaned up.
		DisablePathNormalizing: true,
		ReadBufferSize:         fastReadBuffer,
		WriteBufferSize:        fastWriteBuffer,
		MaxResponseBodySize:    int(min(maxBody, int64(^uint(0)>>1))),
		// A connection a server closed while idle fails the first attempt; one more, on a new
		// connection, is what net/http does too.
		MaxIdemponentCallAttempts: 2,
		// A target's scrapes never overlap; its connection stays open between them, as with
		// net/http's client (see NewClient).
		MaxIdleConnDuration: 5 * time.Minute,
	}
	return f
}

// dial opens a connection to addr and keeps it in the set close aborts.
func (f *fastClient) dial(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(f.ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	fc := &fastConn{Conn: c, f: f}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	f.conns[fc] = struct{}{}
	return fc, nil
}

// close aborts the scrapes in flight and closes every connection: the pool is closing, and its
// targets' goroutines must not wait out their timeouts.
func (f *fastClient) close() {
	f.cancel()
	f.mu.Lock()
	f.closed = true
	conns := f.conns
	f.conns = nil
	f.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// fastConn is a connection that leaves the client's set when closed.
type fastConn struct {
	net.Conn
	f    *fastClient
	once sync.Once
}

func (c *fastConn) Close() error {
	c.once.Do(func() {
		c.f.mu.Lock()
		delete(c.f.conns, c)
		c.f.mu.Unlock()
	})
	return c.Conn.Close()
}

// errRedirect is a fast scrape's answer that is a redirect: net/http follows it, by its rules
// (credentials stay on the target's host).
var errRedirect = errors.New("redirect")

// fastEligible reports that the scrapes of req can go through the fast client: plain HTTP, and
// no proxy from the environment.
func fastEligible(req *http.Request) bool {
	if req.URL.Scheme != "http" || req.URL.User != nil {
		return false
	}
	p, err := http.ProxyFromEnvironment(req)
	return err == nil && p == nil
}

// fastGet fetches the page, restricted or full, into buf before deadline. Its request is
// made anew from pooled parts: a request kept per target would hold a copy of its kilobytes of
// query, and setting one up costs less than a microsecond.
func (s *scraper) fastGet(opt *Options, restrict bool, buf *bytes.Buffer, deadline time.Time) error {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetHost(s.full.URL.Host)
	req.SetRequestURI(s.requestURI(restrict))
	req.Header.Set("Accept", acceptPage)
	req.Header.Set("Accept-Encoding", opt.Compression.acceptEncoding())
	req.Header.SetUserAgent(userAgent)
	auth := s.full.Header.Get("Authorization")
	if s.auth.fromFile() { // read on every scrape, so that a rotated credential is picked up
		h := http.Request{Header: http.Header{}}
		if err := s.auth.apply(&h); err != nil {
			return err
		}
		auth = h.Header.Get("Authorization")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if err := s.fast.c.DoDeadline(req, resp, deadline); err != nil {
		if errors.Is(err, fasthttp.ErrBodyTooLarge) {
			return fmt.Errorf("%w of %d bytes", ErrBodyTooLarge, opt.MaxBody)
		}
		return &url.Error{Op: "Get", URL: s.url, Err: err}
	}
	switch code := resp.StatusCode(); {
	case code >= 300 && code < 400 && len(resp.Header.Peek("Location")) > 0:
		return errRedirect
	case code != http.StatusOK:
		return &StatusError{Code: code}
	}
	gz, err := pageEncoding(string(resp.Header.ContentEncoding()))
	if err != nil {
		return err
	}
	if gz {
		return inflate(bytes.NewReader(resp.Body()), opt.MaxBody, buf)
	}
	// Copied: trading buffers with fasthttp's pool instead upsets the sizes that pool keeps,
	// and costs more in allocations than the copy.
	buf.Write(resp.Body())
	return nil
}

// pageEncoding reads a Content-Encoding: gzip or none; anything else is an error.
func pageEncoding(enc string) (gzip bool, err error) {
	enc = strings.TrimSpace(enc)
	switch {
	case enc == "" || strings.EqualFold(enc, "identity"):
		return false, nil
	case strings.EqualFold(enc, "gzip") || strings.EqualFold(enc, "x-gzip"):
		return true, nil
	}
	return false, fmt.Errorf("unsupported Content-Encoding %q: vllmstat reads gzip or identity", enc)
}
