package scrape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// fastTransport sends one plain-HTTP target's scrapes with fasthttp's HostClient, one per
// target. net/http runs two goroutines per connection and hands every request and answer
// between them and the caller; at a thousand targets scraped twice a second those hand-offs,
// their buffers and stacks were a third of the scraper's CPU and a fifth of its memory.
// HostClient writes the request and reads the answer on the caller's goroutine, with pooled
// buffers. It frames the answers, keeps the connection alive and retries a request whose kept
// connection the server closed. vllmstat adds two things only:
//   - a kept connection with bytes to read before a request is sent had an answer out of turn,
//     which would be read as the request's answer: turnConn fails the request instead (see
//     errOutOfTurn), and HostClient drops the connection;
//   - abort (the target removed, the pool closed) fails a scrape in flight at once rather than
//     when its timeout runs out.
//
// A redirect is errRedirect: HostClient only talks to its own host, and the scraper gives the
// target to net/http, which follows redirects by its rules.
type fastTransport struct {
	hc   fasthttp.HostClient
	stop func() bool        // stops aborting when the target's context ends
	resp *fasthttp.Response // the answer of the scrape in progress, whose bytes are its page

	mu     sync.Mutex
	conns  map[*turnConn]struct{} // open connections, closed by abort
	closed bool
}

// The answer's status line and headers must fit in fastReadBuffer (vLLM's are a few hundred
// bytes; larger ones fail the scrape with a clear error). Each target's HostClient keeps its own
// pool of both buffers between scrapes: at 1,000 targets, 8 KiB for the answer's cost 12 MiB
// of live heap where 4 KiB (fasthttp's default) costs 6. The whole request should fit in
// fastWriteBuffer, so that it goes out in one write: a request for named samples carries about
// 3 KB of query. HostClient takes both buffers from pools while a scrape is in flight only.
const (
	fastReadBuffer  = 4 << 10
	fastWriteBuffer = 4 << 10
)

// fastIdle is how long a kept connection may sit idle before it is closed. HostClient closes
// idle connections from a goroutine of its own, which sleeps this long between rounds and ends
// only once its client has no connection left: so a removed target's goroutine lingers up to
// fastIdle. A fleet scraped every few seconds keeps its connections; one scraped less often than
// this connects anew for each scrape.
const fastIdle = 15 * time.Second

func newFastTransport(ctx context.Context, addr string, maxBody int64) *fastTransport {
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
	// Only once the client is set up: a context already done aborts at once, on another
	// goroutine.
	f.stop = context.AfterFunc(ctx, f.abort)
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

// close closes the transport: the target's goroutine is done.
func (f *fastTransport) close() {
	f.stop()
	f.release()
	f.abort()
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

// errRedirect is an answer the fast transport does not follow: a redirect.
var errRedirect = errors.New("redirect")

// get returns the page: the answer's own bytes, held until release, or, when compressed,
// inflated into buf. Its request is made anew from pooled parts: a request kept per target would
// hold a copy of its kilobytes of query, and setting one up costs less than a microsecond.
func (f *fastTransport) get(r *request, restrict bool, buf *bytes.Buffer, deadline time.Time) ([]byte, error) {
	f.release()
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetHost(r.parsed.Host)
	req.SetRequestURI(r.requestURI(restrict))
	if err := r.setHeaders(req.Header.Set); err != nil {
		return nil, err
	}
	f.resp = fasthttp.AcquireResponse()
	if err := f.hc.DoDeadline(req, f.resp, deadline); err != nil {
		return nil, r.fetchError(fastError(err, f.hc.MaxResponseBodySize))
	}
	switch code := f.resp.StatusCode(); {
	case code >= 300 && code < 400 && len(f.resp.Header.Peek("Location")) > 0:
		return nil, errRedirect
	case code != http.StatusOK:
		return nil, &StatusError{Code: code}
	}
	return decodePage(string(f.resp.Header.ContentEncoding()), f.resp.Body(), int64(f.hc.MaxResponseBodySize), buf)
}

// fastError says what a HostClient's failure means, in the scraper's terms.
func fastError(err error, maxBody int) error {
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return fmt.Errorf("%w of %d bytes", ErrBodyTooLarge, maxBody)
	case isSmallBuffer(err):
		return fmt.Errorf("answer's status line and headers are larger than %d bytes: %w", fastReadBuffer, err)
	}
	return err
}

func isSmallBuffer(err error) bool {
	_, ok := errors.AsType[*fasthttp.ErrSmallBuffer](err)
	return ok
}

// release gives the last answer back to its pool: its page has been read.
func (f *fastTransport) release() {
	if f.resp != nil {
		fasthttp.ReleaseResponse(f.resp)
		f.resp = nil
	}
}
