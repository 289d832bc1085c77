package scrape

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/target"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// counterAnswer is a whole answer whose page holds a generation counter of v.
func counterAnswer(v float64) string {
	body := fmt.Sprintf("vllm:generation_tokens_total{engine=\"0\"} %v\n", v)
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// outOfTurnServer answers every request on a connection with a counter of 100 plus the
// connection's request count, and after the first answer of each connection sends, unasked, a
// second whole answer whose counter is 1e12, on its first connection only. It reports each unasked answer written, and each
// connection the client closed.
type outOfTurnServer struct {
	l       net.Listener
	send    chan struct{} // closed by the test once the first answer was read: send the unasked one
	unasked chan struct{}
	closed  chan struct{}
}

func newOutOfTurnServer(t *testing.T) *outOfTurnServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &outOfTurnServer{l: l, send: make(chan struct{}), unasked: make(chan struct{}, 16), closed: make(chan struct{}, 16)}
	t.Cleanup(func() { l.Close() })
	go func() {
		for n := 0; ; n++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			first := n == 0
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						s.closed <- struct{}{}
						return
					}
					io.Copy(io.Discard, req.Body)
					c.Write([]byte(counterAnswer(100 + float64(i))))
					if i == 0 && first {
						<-s.send
						c.Write([]byte(counterAnswer(1e12)))
						s.unasked <- struct{}{}
					}
				}
			}()
		}
	}()
	return s
}

func (s *outOfTurnServer) url() string { return "http://" + s.l.Addr().String() + "/metrics" }

func counterOf(r *Result) float64 {
	if r.Page == nil || len(r.Page.Engines) != 1 || len(r.Page.Engines[0].Counters) != 1 {
		return -1
	}
	return r.Page.Engines[0].Counters[0].Value
}

// TestAnswerOutOfTurn: a server that sends an answer nobody asked for on a kept-alive
// connection must never have it read as the next scrape's answer. The fast client checks the
// connection before each request: the scrape fails with a reason that says so, and every later
// one goes on a new connection of its own. net/http closes a connection that speaks while idle (its read
// loop): the next scrape goes on a new connection. Either way no scrape sees 1e12.
//
// "fast-late" asks after the previous scrape's deadline has passed, as a scrape every interval
// does: the check must not depend on the connection's read deadline, which the last answer left
// set and which has expired by then.
func TestAnswerOutOfTurn(t *testing.T) {
	for _, c := range []struct {
		name       string
		fast, late bool
	}{{"net-http", false, false}, {"fast", true, false}, {"fast-late", true, true}} {
		fast := c.fast
		t.Run(c.name, func(t *testing.T) {
			srv := newOutOfTurnServer(t)
			opt := Options{Timeout: 5 * time.Second, Client: NewClient()}.withDefaults()
			if fast {
				opt.fast = newFastClient(opt.MaxBody)
			}
			s := newScraper(context.Background(), target.Target{URL: srv.url()}, &opt)
			defer s.close()
			if r := s.scrape(); r.Err() != nil || counterOf(&r) != 100 {
				t.Fatalf("first scrape: %v, counter %v", r.Err(), counterOf(&r))
			}
			if c.late {
				// The first scrape's read deadline is left on the connection, and has passed
				// by the next scrape, a whole interval later.
				expire(opt.fast, s.tr.(*fastTransport).addr)
			}
			close(srv.send)
			<-srv.unasked
			if fast {
				// A loopback write lands at once, but not by contract: wait until the unasked
				// answer is there to be read.
				testkit.WaitFor(t, 5*time.Second, "the unasked answer to reach the connection", func() bool {
					return spoke(opt.fast, s.tr.(*fastTransport).addr, false)
				})
				r := s.scrape()
				if r.Err() == nil || !strings.Contains(r.Err().Error(), "out of turn") || r.Reason() != "protocol" || !r.NewConnections {
					t.Fatalf("scrape after an unasked answer: err %v (reason %q), counter %v, new connections %v; want a failure out of turn, and new connections from then on", r.Err(), r.Reason(), counterOf(&r), r.NewConnections)
				}
			} else {
				<-srv.closed // net/http dropped the connection that spoke out of turn
			}
			for i := range 2 {
				// A target caught out of turn is scraped on a new connection each time: its
				// answer is the first of the connection's.
				want := 100 + float64(i)
				if fast {
					want = 100
				}
				r := s.scrape()
				if r.Err() != nil || counterOf(&r) != want {
					t.Fatalf("scrape %d on a new connection: %v, counter %v, want %v", i, r.Err(), counterOf(&r), want)
				}
			}
		})
	}
}

// spoke reports whether the kept connections of f to addr have bytes to read, without reading
// them: one of them when all is false, every one (true when there is none) when it is set.
func spoke(f *fastClient, addr string, all bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hosts[addr]
	if h == nil {
		return all
	}
	for c := range h.conns {
		n, err := newPeeker(c.Conn).peek()
		if has := n > 0 && err == nil; has != all {
			return has
		}
	}
	return all
}

// expire sets the read deadline of f's connections to addr in the past, as the deadline of a
// scrape long done leaves it.
func expire(f *fastClient, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.hosts[addr].conns {
		c.Conn.SetReadDeadline(time.Now().Add(-time.Second))
	}
}

// turnServer answers request i of a connection with a counter of 100+i, and speaks out of turn
// (a whole answer with a counter of 1e12) in two ways, as the test sets:
//   - with unasked set, after the first answer of a connection it waits for send, then sends
//     an answer nobody asked for and says so on unasked's channel;
//   - with racing set, it sends an answer nobody asked for right before its answer to every
//     later request of a connection: the unasked answer of a server that sends one some time
//     after its answer, when the next request came within that time. That is a race with the
//     request that no check before sending it can see, made certain.
type turnServer struct {
	l       net.Listener
	conns   atomic.Int64
	arm     atomic.Bool // unasked
	racing  atomic.Bool
	send    chan struct{}
	unasked chan struct{}
	quit    chan struct{}
}

func newTurnServer(t *testing.T) *turnServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &turnServer{l: l, send: make(chan struct{}), unasked: make(chan struct{}), quit: make(chan struct{})}
	t.Cleanup(func() {
		close(s.quit)
		l.Close()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go s.serve(c)
		}
	}()
	return s
}

func (s *turnServer) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; ; i++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		if i > 0 && s.racing.Load() {
			c.Write([]byte(counterAnswer(1e12)))
		}
		c.Write([]byte(counterAnswer(100 + float64(i))))
		if i == 0 && s.arm.Load() {
			select {
			case <-s.send:
			case <-s.quit:
				return
			}
			c.Write([]byte(counterAnswer(1e12)))
			select {
			case s.unasked <- struct{}{}:
			case <-s.quit:
				return
			}
		}
	}
}

// TestOutOfTurnNewConnections: a target caught answering out of turn on a kept connection is
// not trusted with one again: every later scrape of it, boundary scrapes included, goes on a
// new connection, closed after its answer, and says so (Result.NewConnections). A boundary
// scrape after the target sent another answer nobody asked for on its last connection reads
// its own answer, on a new connection; and an answer out of turn that races a request (sent
// after the check, before the request's answer) is never read as its answer, since no request
// goes on a connection that has answered before.
func TestOutOfTurnNewConnections(t *testing.T) {
	srv := newTurnServer(t)
	out := make(chan Result)
	p := NewPool(Options{Clock: clock.NewFake(time.Unix(1e9, 0)), Timeout: 5 * time.Second}, out)
	defer p.Close()
	u := "http://" + srv.l.Addr().String() + "/metrics"
	p.Add([]target.Target{{URL: u}})
	<-p.Started()
	addr := srv.l.Addr().String()
	scrape := func(what string, boundary uint64) Result {
		t.Helper()
		if boundary > 0 {
			p.Boundary(boundary)
		} else if len(p.Tick()) > 0 {
			t.Fatalf("%s: the tick was skipped", what)
		}
		r := <-out
		if r.Boundary != boundary {
			t.Fatalf("%s: result of boundary %d, want %d", what, r.Boundary, boundary)
		}
		return r
	}
	// unasked has the server send an answer nobody asked for on its last connection, and waits
	// until it is there to be read on every connection the client keeps (there is none once
	// the client closes its connections after each answer).
	unasked := func() {
		t.Helper()
		srv.send <- struct{}{}
		<-srv.unasked
		testkit.WaitFor(t, 5*time.Second, "the unasked answer to reach the kept connection", func() bool { return spoke(p.opt.fast, addr, true) })
	}

	srv.arm.Store(true)
	if r := scrape("first scrape", 0); r.Err() != nil || counterOf(&r) != 100 || r.NewConnections {
		t.Fatalf("first scrape: err %v, counter %v, new connections %v", r.Err(), counterOf(&r), r.NewConnections)
	}
	unasked()
	if r := scrape("scrape after an unasked answer", 0); r.Reason() != "protocol" || !r.NewConnections {
		t.Fatalf("scrape after an unasked answer: err %v (reason %q), new connections %v; want a failure out of turn, and new connections from then on", r.Err(), r.Reason(), r.NewConnections)
	}
	if r := scrape("tick after the catch", 0); r.Err() != nil || counterOf(&r) != 100 || !r.NewConnections {
		t.Fatalf("tick after the catch: err %v, counter %v, new connections %v", r.Err(), counterOf(&r), r.NewConnections)
	}
	unasked()
	srv.arm.Store(false)
	if r := scrape("boundary scrape after an unasked answer", 1); r.Err() != nil || counterOf(&r) != 100 || !r.NewConnections {
		t.Fatalf("boundary scrape after an unasked answer: err %v (reason %q), counter %v; want its own answer, on a new connection", r.Err(), r.Reason(), counterOf(&r))
	}
	srv.racing.Store(true)
	conns := srv.conns.Load()
	for i, b := range []uint64{2, 0, 3, 0, 4} {
		r := scrape(fmt.Sprintf("racing scrape %d", i), b)
		if r.Err() != nil || counterOf(&r) != 100 || !r.NewConnections {
			t.Fatalf("racing scrape %d (boundary %d): err %v, counter %v; want the answer of a new connection", i, b, r.Err(), counterOf(&r))
		}
	}
	if n := srv.conns.Load() - conns; n != 5 {
		t.Fatalf("%d connections for 5 scrapes, want one each", n)
	}
}

// TestStdNewConnections: net/http drops a connection that speaks out of turn by itself, but a
// target caught by the fast transport and then redirected goes to net/http, on new
// connections too: each of its requests gets one of its own, not an idle one.
func TestStdNewConnections(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(runningPage)) }))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	opt := Options{Timeout: 5 * time.Second, Client: NewClient()}.withDefaults()
	s := newScraper(context.Background(), target.Target{URL: srv.URL + "/metrics"}, &opt)
	defer s.close()
	scrapes := func(fresh bool) int64 {
		t.Helper()
		before := conns.Load()
		for i := range 3 {
			if r := s.scrape(); r.Err() != nil || r.NewConnections != fresh {
				t.Fatalf("scrape %d: err %v, new connections %v", i, r.Err(), r.NewConnections)
			}
		}
		return conns.Load() - before
	}
	if n := scrapes(false); n != 1 {
		t.Fatalf("%d connections for 3 scrapes on a kept one", n)
	}
	s.fresh = true // as after an answer out of turn
	s.tr.newConnections()
	if n := scrapes(true); n != 3 {
		t.Fatalf("%d connections for 3 scrapes of a target that answered out of turn, want one each", n)
	}
}
