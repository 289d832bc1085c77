package scrape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// fastClient is a pool's client of plain-HTTP targets: fasthttp's Client, which makes one
// HostClient per target's address. net/http runs two goroutines per connection and hands every
// request and answer between them and the caller; at a thousand targets scraped twice a second
// those hand-offs, their buffers and stacks were a third of the scraper's CPU and a fifth of its
// memory. fasthttp writes the request and reads the answer on the caller's goroutine. It frames
// the answers, keeps the connections alive and retries a request whose kept connection the
// server closed; and the HostClients of one Client share its pools of read and write buffers
// (a HostClient made on its own keeps pools of its own: at 5,000 targets, 66 MiB of buffers
// kept between scrapes). vllmstat adds two things only:
//   - a kept connection with bytes to read before a request is sent had an answer out of turn,
//     which would be read as the request's answer: turnConn fails the request instead (see
//     errOutOfTurn), and fasthttp drops the connection. The target is not trusted with a kept
//     connection again: its later requests go through fresh, each on a new connection closed
//     after its answer (see fastTransport.newConnections);
//   - the last target at an address ending (removed, or the pool closed) closes the address's
//     connections, which fails a scrape in flight at once rather than when its timeout runs
//     out.
type fastClient struct {
	c fasthttp.Client
	// fresh sends the requests of targets that answered out of turn, each asking for its
	// connection to close after the answer: it never has an idle connection to give, not even
	// one that another target at the same address left (c's are shared by an address's
	// targets).
	fresh fasthttp.Client

	mu    sync.Mutex
	hosts map[string]*fastHost // by address (host:port)
}

// fastHost is one address's targets and connections.
type fastHost struct {
	targets int
	conns   map[*turnConn]struct{}
}

// The answer's status line and headers must fit in fastReadBuffer (vLLM's are a few hundred
// bytes; larger ones fail the scrape with a clear error). The whole request should fit in
// fastWriteBuffer: a request for named samples carries 2.5 to 8.5 KB of query, by namespace
// spelling (TestRestrictedRequestFitsWriteBuffer). fasthttp writes a request that fits straight
// into the writer, in one write; a larger one goes through a copy that its header keeps, so
// every request in fasthttp's pool would hold one more copy of the query (at 5,000 targets, a
// thousand requests or more after a step end). Both buffers are taken from the client's pools
// while a scrape reads or writes only.
const (
	fastReadBuffer  = 4 << 10
	fastWriteBuffer = 16 << 10
)

// fastIdle is how long a kept connection may sit idle before it is closed. Each address's
// HostClient closes idle connections from a goroutine of its own, which sleeps this long between
// rounds and ends only once it has no connection left: so a removed target's goroutine lingers up
// to fastIdle. A fleet scraped every few seconds keeps its connections; one scraped less often
// than this connects anew for each scrape.
const fastIdle = 15 * time.Second

func newFastClient(maxBody int64) *fastClient {
	f := &fastClient{hosts: map[string]*fastHost{}}
	f.c = f.client(maxBody)
	f.fresh = f.client(maxBody)
	return f
}

// client returns the settings of f's fasthttp clients.
func (f *fastClient) client(maxBody int64) fasthttp.Client {
	return fasthttp.Client{
		DialTimeout: f.dial,
		// A target's scrapes never overlap, and an address is nearly always one target's; a
		// second connection only while a scrape is aborted.
		MaxConnsPerHost:     1024,
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
		DisablePathNormalizing:        true, // the request URI goes as built
		NoDefaultUserAgentHeader:      true,
	}
}

// join counts a target at addr.
func (f *fastClient) join(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hosts[addr]
	if h == nil {
		h = &fastHost{conns: map[*turnConn]struct{}{}}
		f.hosts[addr] = h
	}
	h.targets++
}

// leave uncounts a target at addr. The last one closes the address's connections, failing a
// scrape in flight at once. It may run on any goroutine.
func (f *fastClient) leave(addr string) {
	f.mu.Lock()
	h := f.hosts[addr]
	h.targets--
	if h.targets > 0 {
		f.mu.Unlock()
		return
	}
	delete(f.hosts, addr)
	f.mu.Unlock()
	for c := range h.conns {
		c.Conn.Close()
	}
}

// dial opens a connection to an address that has targets, and keeps it in their set.
func (f *fastClient) dial(addr string, timeout time.Duration) (net.Conn, error) {
	if !f.has(addr) {
		return nil, net.ErrClosed
	}
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	tc := &turnConn{Conn: c, f: f, addr: addr, peeker: newPeeker(c)}
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hosts[addr]
	if h == nil { // its last target ended while it dialled
		c.Close()
		return nil, net.ErrClosed
	}
	h.conns[tc] = struct{}{}
	return tc, nil
}

func (f *fastClient) has(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hosts[addr] != nil
}

// fastTransport sends one plain-HTTP target's scrapes through its pool's fastClient.
//
// A redirect is errRedirect: the client's HostClient only talks to the target's address, and
// the scraper gives the target to net/http, which follows redirects by its rules.
type fastTransport struct {
	client *fastClient
	addr   string
	fresh  bool               // each request on a new connection: see newConnections
	left   atomic.Bool        // the target left the client
	stop   func() bool        // stops leaving when the target's context ends
	resp   *fasthttp.Response // the answer of the scrape in progress, whose bytes are its page
}

func newFastTransport(ctx context.Context, client *fastClient, addr string) *fastTransport {
	f := &fastTransport{client: client, addr: addr}
	client.join(addr)
	// Only once joined: a context already done leaves at once, on another goroutine.
	f.stop = context.AfterFunc(ctx, f.abort)
	return f
}

// close closes the transport: the target's goroutine is done.
func (f *fastTransport) close() {
	f.stop()
	f.release()
	f.abort()
}

// abort takes the target out of its client, once. It may run on any goroutine.
func (f *fastTransport) abort() {
	if !f.left.Swap(true) {
		f.client.leave(f.addr)
	}
}

// turnConn is a connection that refuses to send a request while the answer to an earlier one
// is not the last thing the server said: see errOutOfTurn.
type turnConn struct {
	net.Conn
	*peeker
	f    *fastClient
	addr string
	read bool // an answer was read since the last request was written
}

func (c *turnConn) Read(b []byte) (int, error) {
	c.read = true
	return c.Conn.Read(b)
}

func (c *turnConn) Write(b []byte) (int, error) {
	if c.read {
		c.read = false
		if n, _ := c.peek(); n > 0 {
			return 0, errOutOfTurn
		}
	}
	return c.Conn.Write(b)
}

func (c *turnConn) Close() error {
	c.f.mu.Lock()
	if h := c.f.hosts[c.addr]; h != nil {
		delete(h.conns, c)
	}
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
	if err := r.setHeaders(&req.Header, restrict); err != nil {
		return nil, err
	}
	c := &f.client.c
	if f.fresh {
		c = &f.client.fresh
		req.SetConnectionClose()
	}
	f.resp = fasthttp.AcquireResponse()
	if err := c.DoDeadline(req, f.resp, deadline); err != nil {
		return nil, r.fetchError(fastError(err, f.client.c.MaxResponseBodySize))
	}
	switch code := f.resp.StatusCode(); {
	case code >= 300 && code < 400 && len(f.resp.Header.Peek("Location")) > 0:
		return nil, errRedirect
	case code != http.StatusOK:
		return nil, &StatusError{Code: code}
	}
	maxBody, encoding := int64(f.client.c.MaxResponseBodySize), string(f.resp.Header.ContentEncoding())
	if restrict && isValuesAnswer(string(f.resp.Header.ContentType())) {
		return r.values(f.resp.Body(), string(f.resp.Header.Peek(layoutHeader)), encoding, maxBody, buf)
	}
	return decodePage(encoding, f.resp.Body(), maxBody, buf)
}

// newConnections sends every later request on a new connection, closed after its answer.
func (f *fastTransport) newConnections() { f.fresh = true }

// fastError says what a HostClient's failure means, in the scraper's terms, and never with the
// answer's bytes, which fasthttp quotes (see quiet).
func fastError(err error, maxBody int) error {
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return fmt.Errorf("%w of %d bytes", ErrBodyTooLarge, maxBody)
	case isSmallBuffer(err):
		return fmt.Errorf("answer's status line and headers are larger than %d bytes", fastReadBuffer)
	}
	return quiet(err)
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
