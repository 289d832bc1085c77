package scrape

import (
	"bytes"
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

// fastTransport sends one plain-HTTP target's scrapes, when no proxy stands in front of it:
// nearly every fleet. net/http runs two goroutines per connection and hands every request and
// answer between them and the caller; at a thousand targets scraped twice a second those
// hand-offs, their buffers and stacks were a third of the scraper's CPU and a fifth of its
// memory. fasthttp's HostClient, one per target, writes the request and reads the answer on the
// caller's goroutine, with pooled buffers. It frames the answers, keeps the connection alive and
// retries a request whose kept connection the server closed; vllmstat adds two things only:
//   - a kept connection with bytes to read before a request is sent had an answer out of turn,
//     which would be read as the request's answer: turnConn fails the request instead (see
//     errOutOfTurn), and HostClient drops the connection;
//   - closing the transport (the target removed, the pool closed) aborts a scrape in flight
//     rather than waiting out its timeout.
//
// What net/http does that HostClient does not is left to net/http: a target that answers with a
// redirect, or sits behind a proxy, or speaks TLS, is scraped with the pool's net/http client
// (see scraper.get).
type fastTransport struct {
	hc   fasthttp.HostClient
	resp *fasthttp.Response // the answer of the scrape in progress, whose bytes are its page

	mu     sync.Mutex
	conns  map[*turnConn]struct{} // open connections, closed by abort
	closed bool
}

// The answer's status line and headers must fit in fastReadBuffer (vLLM's are a few hundred
// bytes; larger ones fail the scrape with a clear error). The whole request should fit in
// fastWriteBuffer, so that it goes out in one write: a request for named samples carries about
// 3 KB of query. HostClient takes both buffers from pools while a scrape is in flight only.
const (
	fastReadBuffer  = 8 << 10
	fastWriteBuffer = 4 << 10
)

// fastIdle is how long a kept connection may sit idle before it is closed. HostClient closes
// idle connections from a goroutine of its own, which sleeps this long between rounds and ends
// only once its client has no connection left: so a removed target's goroutine lingers up to
// fastIdle. A fleet scraped every few seconds keeps its connections; one scraped less often than
// this connects anew for each scrape.
const fastIdle = 15 * time.Second

func newFastTransport(addr string, maxBody int64) *fastTransport {
	f := &fastTransport{conns: map[*turnConn]struct{}{}}
	f.hc = fasthttp.HostClient{
		Addr:                addr,
		DialTimeout:         f.dial,
		MaxConns:            2, // a target's scrapes never overlap; a second only while one is aborted
		MaxIdleConnDuration: fastIdle,
		ReadBufferSize:      fastReadBuffer,
		WriteBufferSize:     fastWriteBuffer,
		MaxResponseBodySize: int(min(maxBody, int64(^uint(0)>>1))),
		// A request is sent again once, on a new connection, when its kept one turns out to be
		// closed (as net/http does); never after an answer out of turn, nor after a timeout.
		RetryIfErr: func(_ *fasthttp.Request, attempts int, err error) (bool, bool) {
			return false, attempts < 2 && !errors.Is(err, errOutOfTurn) && !errors.Is(err, fasthttp.ErrTimeout)
		},
		DisableHeaderNamesNormalizing: true,
		NoDefaultUserAgentHeader:      true,
	}
	return f
}

// dial opens a connection and keeps it in the set abort closes.
func (f *fastTransport) dial(addr string, timeout time.Duration) (net.Conn, error) {
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return nil, net.ErrClosed
	}
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	tc := &turnConn{Conn: c, f: f}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	f.conns[tc] = struct{}{}
	return tc, nil
}

// abort closes every connection, failing a scrape in flight at once, and refuses new ones.
// It may run on any goroutine.
func (f *fastTransport) abort() {
	f.mu.Lock()
	f.closed = true
	conns := f.conns
	f.conns = nil
	f.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
	f.hc.CloseIdleConnections()
}

// turnConn is a connection that refuses to send a request while the answer to an earlier one
// is not the last thing the server said: see errOutOfTurn.
type turnConn struct {
	net.Conn
	f    *fastTransport
	read bool // an answer was read since the last request was written
}

func (c *turnConn) Read(b []byte) (int, error) {
	c.read = true
	return c.Conn.Read(b)
}

func (c *turnConn) Write(b []byte) (int, error) {
	if c.read {
		c.read = false
		if n, _ := peek(c.Conn); n > 0 {
			return 0, errOutOfTurn
		}
	}
	return c.Conn.Write(b)
}

func (c *turnConn) Close() error {
	c.f.mu.Lock()
	delete(c.f.conns, c)
	c.f.mu.Unlock()
	return c.Conn.Close()
}

// errOutOfTurn fails a scrape whose kept connection had bytes to read before its request was
// sent: the server answered something nobody asked (a second answer to the last request, or a
// hostile one), and reading it as this scrape's answer could make up any number.
var errOutOfTurn = errors.New("the target sent bytes out of turn on a kept-alive connection, before it was asked (an answer nobody requested); the connection is dropped and this scrape counted as failed")

// errPeerClosed is peek's report of a connection the peer closed.
var errPeerClosed = errors.New("connection closed by the peer")

// errRedirect is a fast scrape's answer that net/http reads instead: a redirect, which net/http
// follows by its rules (credentials stay on the target's host).
var errRedirect = errors.New("redirect")

// fastEligible reports that the scrapes of req can go through a fast transport: plain HTTP, and
// no proxy from the environment.
func fastEligible(req *http.Request) bool {
	if req.URL.Scheme != "http" || req.URL.User != nil {
		return false
	}
	p, err := http.ProxyFromEnvironment(req)
	return err == nil && p == nil
}

// fastGet fetches the page, restricted or full, before deadline. It returns the page: the
// answer's own bytes, held in the transport until the scrape is done (see releaseResp), or,
// when compressed, inflated into buf. Its request is made anew from pooled parts: a request kept
// per target would hold a copy of its kilobytes of query, and setting one up costs less than a
// microsecond.
func (s *scraper) fastGet(opt *Options, restrict bool, buf *bytes.Buffer, deadline time.Time) ([]byte, error) {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetHost(s.full.URL.Host)
	req.SetRequestURI(s.requestURI(restrict))
	req.Header.Set("Accept", acceptPage)
	req.Header.Set("Accept-Encoding", opt.Compression.acceptEncoding())
	req.Header.SetUserAgent(userAgent)
	auth := s.full.Header.Get("Authorization")
	if s.auth.FromFile() { // read on every scrape, so that a rotated credential is picked up
		h := http.Request{Header: http.Header{}}
		if err := s.auth.Apply(&h); err != nil {
			return nil, err
		}
		auth = h.Header.Get("Authorization")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	s.releaseResp()
	resp := fasthttp.AcquireResponse()
	s.fast.resp = resp
	if err := s.fast.hc.DoDeadline(req, resp, deadline); err != nil {
		switch {
		case errors.Is(err, fasthttp.ErrBodyTooLarge):
			return nil, fmt.Errorf("%w of %d bytes", ErrBodyTooLarge, opt.MaxBody)
		case errors.Is(err, fasthttp.ErrTimeout):
			err = timeoutError{err}
		case isSmallBuffer(err):
			err = fmt.Errorf("answer's status line and headers are larger than %d bytes: %w", fastReadBuffer, err)
		}
		return nil, &url.Error{Op: "Get", URL: s.url, Err: err}
	}
	switch code := resp.StatusCode(); {
	case code >= 300 && code < 400 && len(resp.Header.Peek("Location")) > 0:
		return nil, errRedirect
	case code != http.StatusOK:
		return nil, &StatusError{Code: code}
	}
	gz, err := pageEncoding(string(resp.Header.ContentEncoding()))
	if err != nil {
		return nil, err
	}
	if gz {
		if err := inflate(bytes.NewReader(resp.Body()), opt.MaxBody, buf); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	return resp.Body(), nil
}

func isSmallBuffer(err error) bool {
	_, ok := errors.AsType[*fasthttp.ErrSmallBuffer](err)
	return ok
}

// timeoutError is HostClient's timeout as a net.Error that says so, for Result.Reason.
type timeoutError struct{ error }

func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (e timeoutError) Unwrap() error { return e.error }

// releaseResp gives the last fast answer back to its pool: its page has been read.
func (s *scraper) releaseResp() {
	if s.fast != nil && s.fast.resp != nil {
		fasthttp.ReleaseResponse(s.fast.resp)
		s.fast.resp = nil
	}
}

// close closes the target's connections: its goroutine is done.
func (s *scraper) close() {
	if s.fast != nil {
		s.releaseResp()
		s.fast.abort()
	}
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
