package scrape

import (
	"bufio"
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
// memory. Here each target's goroutine owns one keep-alive connection and writes its request
// and reads the answer itself, with fasthttp's request writer and answer reader and buffers
// taken from pools only while a scrape is in flight.
//
// What net/http does that this client does not is left to net/http: a target that answers
// with a redirect, or sits behind a proxy, or speaks TLS, is scraped with the pool's
// net/http client (see scraper.get).
type fastClient struct {
	maxBody int
	ctx     context.Context // cancelled by close: no new connections
	cancel  context.CancelFunc

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open connections, to abort scrapes in flight on close
	closed bool
}

// The buffers a scrape reads its answer and writes its request through, pooled: a burst of a
// hundred scrapes holds a hundred of each. The answer's status line and headers must fit in
// fastReadBuffer (vLLM's are a few hundred bytes; a target whose do not is scraped with
// net/http). The whole request should fit in fastWriteBuffer, so that it goes out in one write:
// a request for named samples carries about 3 KB of query.
const (
	fastReadBuffer  = 4 << 10
	fastWriteBuffer = 8 << 10
)

var (
	fastReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, fastReadBuffer) }}
	fastWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, fastWriteBuffer) }}
)

func newFastClient(maxBody int64) *fastClient {
	f := &fastClient{maxBody: int(min(maxBody, int64(^uint(0)>>1))), conns: map[net.Conn]struct{}{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

// dial opens a connection to addr and keeps it in the set close aborts.
func (f *fastClient) dial(addr string, deadline time.Time) (net.Conn, error) {
	d := net.Dialer{Deadline: deadline}
	c, err := d.DialContext(f.ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	f.conns[c] = struct{}{}
	return c, nil
}

// drop closes c and forgets it.
func (f *fastClient) drop(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
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
		c.Close()
	}
}

// roundTrip sends req on the target's connection, made if there is none, and reads the answer
// into resp before deadline.
func (s *scraper) roundTrip(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	for {
		reused := s.conn != nil
		if reused {
			// Bytes on an idle kept connection came before this request was sent: an answer out
			// of turn, which would be read as this request's answer. A peer that closed it is
			// only a connection to make anew.
			switch n, err := peek(s.conn); {
			case n > 0:
				s.closeConn()
				return errOutOfTurn
			case err != nil:
				s.closeConn()
				reused = false
			}
		}
		if !reused {
			c, err := s.fast.dial(s.addr, deadline)
			if err != nil {
				return err
			}
			s.conn = c
		}
		err := s.exchange(req, resp, deadline)
		if err == nil {
			return nil
		}
		s.closeConn()
		// A connection kept from the last scrape may have been closed by the server since
		// (a keep-alive timeout): the request goes once more, on a new one, as with net/http.
		var ne net.Error
		if !reused || errors.Is(err, fasthttp.ErrBodyTooLarge) || errors.As(err, &ne) && ne.Timeout() {
			return err
		}
	}
}

// exchange writes req and reads the answer on the target's connection.
func (s *scraper) exchange(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	c := s.conn
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	bw := fastWriters.Get().(*bufio.Writer)
	bw.Reset(c)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	fastWriters.Put(bw)
	if err != nil {
		return err
	}
	br := fastReaders.Get().(*bufio.Reader)
	br.Reset(c)
	err = resp.ReadLimitBody(br, s.fast.maxBody)
	// Bytes after the answer, or an answer that ends with the connection, leave nothing to
	// send the next request on.
	spent := br.Buffered() > 0 || resp.ConnectionClose() || resp.Header.ContentLength() == -2
	br.Reset(nil)
	fastReaders.Put(br)
	if err == nil && spent {
		s.closeConn()
	}
	return err
}

// closeConn closes the target's connection, if any.
func (s *scraper) closeConn() {
	if s.conn != nil {
		s.fast.drop(s.conn)
		s.conn = nil
	}
}

// errOutOfTurn fails a scrape whose kept connection had bytes to read before its request was
// sent: the server answered something nobody asked (a second answer to the last request, or a
// hostile one), and reading it as this scrape's answer could make up any number.
var errOutOfTurn = errors.New("the target sent bytes out of turn on a kept-alive connection, before it was asked (an answer nobody requested); the connection is dropped and this scrape counted as failed")

// errPeerClosed is peek's report of a connection the peer closed.
var errPeerClosed = errors.New("connection closed by the peer")

// errUseNetHTTP is a fast scrape's answer that net/http reads instead: a redirect, which
// net/http follows by its rules (credentials stay on the target's host), or headers larger
// than fastReadBuffer.
var errUseNetHTTP = errors.New("redirect")

// fastEligible reports that the scrapes of req can go through the fast client: plain HTTP, and
// no proxy from the environment.
func fastEligible(req *http.Request) bool {
	if req.URL.Scheme != "http" || req.URL.User != nil {
		return false
	}
	p, err := http.ProxyFromEnvironment(req)
	return err == nil && p == nil
}

// fastGet fetches the page, restricted or full, before deadline. It returns the page: the
// answer's own bytes, held in s.resp until the scrape is done (see releaseResp), or, when
// compressed, inflated into buf. Its request is made anew from pooled parts: a request kept
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
	if s.auth.fromFile() { // read on every scrape, so that a rotated credential is picked up
		h := http.Request{Header: http.Header{}}
		if err := s.auth.apply(&h); err != nil {
			return nil, err
		}
		auth = h.Header.Get("Authorization")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	s.releaseResp()
	resp := fasthttp.AcquireResponse()
	s.resp = resp
	if err := s.roundTrip(req, resp, deadline); err != nil {
		if _, ok := errors.AsType[*fasthttp.ErrSmallBuffer](err); ok {
			return nil, errUseNetHTTP
		}
		if errors.Is(err, fasthttp.ErrBodyTooLarge) {
			return nil, fmt.Errorf("%w of %d bytes", ErrBodyTooLarge, opt.MaxBody)
		}
		return nil, &url.Error{Op: "Get", URL: s.url, Err: err}
	}
	switch code := resp.StatusCode(); {
	case code >= 300 && code < 400 && len(resp.Header.Peek("Location")) > 0:
		return nil, errUseNetHTTP
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

// releaseResp gives the last fast answer back to its pool: its page has been read.
func (s *scraper) releaseResp() {
	if s.resp != nil {
		fasthttp.ReleaseResponse(s.resp)
		s.resp = nil
	}
}

// close closes the target's connection: its goroutine is done.
func (s *scraper) close() {
	if s.fast != nil {
		s.releaseResp()
		s.closeConn()
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
