package scrape

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/target"
)

// fetcher scrapes a target once, as Fetch does.
type fetcher func(ctx context.Context, tg target.Target, opt Options) Result

// viaBoth runs f with each way a scrape goes out: net/http's client, and the fast transport a
// pool gives plain-HTTP targets, so that both behave the same on every case f checks.
func viaBoth(t *testing.T, f func(t *testing.T, fetch fetcher)) {
	for _, fast := range []bool{false, true} {
		name := "net-http"
		if fast {
			name = "fast"
		}
		t.Run(name, func(t *testing.T) {
			f(t, func(ctx context.Context, tg target.Target, opt Options) Result {
				t.Helper()
				opt = opt.withDefaults()
				opt.FirstTimeout = opt.Timeout // as Fetch
				if fast {
					opt.fast = newFastClient(opt.MaxBody)
				}
				s := newScraper(ctx, tg, &opt)
				t.Cleanup(s.close)
				if _, ok := s.tr.(*fastTransport); fast && !ok && s.buildErr == nil {
					t.Fatalf("%s is not scraped by the fast transport", tg.URL)
				}
				return s.scrape()
			})
		})
	}
}

// TestFastEligible checks which targets the fast client scrapes: plain HTTP only.
func TestFastEligible(t *testing.T) {
	if p, _ := http.ProxyFromEnvironment(httptest.NewRequest("GET", "http://10.1.2.3:8000/metrics", nil)); p != nil {
		t.Skip("a proxy is set in the environment: every target goes through net/http")
	}
	for u, want := range map[string]bool{
		"http://10.1.2.3:8000/metrics":  true,
		"http://[::1]:8000/metrics?a=b": true,
		"https://10.1.2.3:8000/metrics": false,
	} {
		req, err := newRequest(u, &target.Auth{}, CompressionNone, newRestriction())
		if err != nil {
			t.Fatal(err)
		}
		if got := fastEligible(req); got != want {
			t.Errorf("%s: fast %v, want %v", u, got, want)
		}
	}
}

// TestPoolCloseAbortsScrape checks that closing a pool ends a scrape in flight at once, not
// when its timeout runs out: the server sees the connection close while it still holds the
// request.
func TestPoolCloseAbortsScrape(t *testing.T) {
	entered := make(chan struct{})
	var once sync.Once
	var aborted atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(entered) })
		select {
		case <-r.Context().Done():
			aborted.Store(true)
		case <-time.After(30 * time.Second):
			w.Write([]byte(runningPage))
		}
	}))
	defer srv.Close()
	out := make(chan Result, 1)
	p := NewPool(Options{Timeout: time.Minute}, out)
	p.Set([]target.Target{{URL: srv.URL + "/metrics"}})
	p.Tick()
	<-entered
	p.Close()
	srv.Close() // waits for the handler
	if !aborted.Load() {
		t.Fatal("the scrape in flight ran on after Close")
	}
}

// TestFastErrorsNameTarget checks that a failed restricted scrape names the target as
// configured, not the kilobytes of query it was sent with.
func TestFastErrorsNameTarget(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj, _ := w.(http.Hijacker)
		c, _, _ := hj.Hijack()
		c.Close() // no answer at all
	}))
	defer srv.Close()
	u := srv.URL + "/metrics"
	viaBoth(t, func(t *testing.T, fetch fetcher) {
		r := fetch(context.Background(), target.Target{URL: u + "?x=1"}, Options{Timeout: 5 * time.Second})
		if r.FetchErr == nil || !strings.Contains(r.FetchErr.Error(), `"`+u+`?x=1"`) {
			t.Fatalf("err %v, want it to name %s", r.FetchErr, u+"?x=1")
		}
	})
}

// rawServer answers each connection with answer(i, request) for its i-th request, i from 0,
// then keeps the connection open or closes it as answer says. It counts connections.
type rawServer struct {
	l     net.Listener
	conns atomic.Int64
	done  chan struct{} // a value per connection closed by the server
}

func newRawServer(t *testing.T, answer func(i int) (resp string, closeAfter bool)) *rawServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rs := &rawServer{l: l, done: make(chan struct{}, 16)}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			rs.conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					resp, closeAfter := answer(i)
					c.Write([]byte(resp))
					if closeAfter {
						c.Close()
						rs.done <- struct{}{}
						return
					}
				}
			}()
		}
	}()
	return rs
}

func (rs *rawServer) url() string { return "http://" + rs.l.Addr().String() + "/metrics" }

var okAnswer = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(runningPage), runningPage)

// TestFastConnections checks the fast client's connection handling: one connection kept across
// scrapes; a connection the server closed while idle replaced within the scrape; an answer
// that ends with its connection (no length, or Connection: close) read whole and the next
// scrape on a new connection; and the connection closed when the target goes.
func TestFastConnections(t *testing.T) {
	scrapes := func(t *testing.T, rs *rawServer, n int, between func()) {
		t.Helper()
		opt := Options{Timeout: 5 * time.Second}.withDefaults()
		opt.fast = newFastClient(opt.MaxBody)
		s := newScraper(context.Background(), target.Target{URL: rs.url()}, &opt)
		defer s.close()
		for i := range n {
			if i > 0 && between != nil {
				between()
			}
			r := s.scrape()
			if r.Err() != nil || r.Page == nil || len(r.Page.Engines) != 1 || r.Page.Engines[0].Gauges[0] != 3 {
				t.Fatalf("scrape %d: err %v page %+v", i, r.Err(), r.Page)
			}
		}
	}
	t.Run("kept", func(t *testing.T) {
		rs := newRawServer(t, func(int) (string, bool) { return okAnswer, false })
		scrapes(t, rs, 5, nil)
		if n := rs.conns.Load(); n != 1 {
			t.Fatalf("%d connections for 5 scrapes, want 1", n)
		}
	})
	t.Run("closed while idle", func(t *testing.T) {
		rs := newRawServer(t, func(int) (string, bool) { return okAnswer, true })
		scrapes(t, rs, 3, func() { <-rs.done }) // the server has closed it before the next scrape
		if n := rs.conns.Load(); n != 3 {
			t.Fatalf("%d connections for 3 scrapes, want 3", n)
		}
	})
	t.Run("until close", func(t *testing.T) {
		rs := newRawServer(t, func(int) (string, bool) { return "HTTP/1.1 200 OK\r\n\r\n" + runningPage, true })
		scrapes(t, rs, 3, nil)
		if n := rs.conns.Load(); n != 3 {
			t.Fatalf("%d connections for 3 scrapes, want 3", n)
		}
	})
	t.Run("chunked", func(t *testing.T) {
		chunked := fmt.Sprintf("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(runningPage), runningPage)
		rs := newRawServer(t, func(int) (string, bool) { return chunked, false })
		scrapes(t, rs, 5, nil)
		if n := rs.conns.Load(); n != 1 {
			t.Fatalf("%d connections for 5 chunked answers, want 1", n)
		}
	})
	t.Run("bytes after the answer", func(t *testing.T) {
		// The start of another answer right behind this one, in the same write: it is read
		// with the answer and thrown away with the read buffer, never taken for the start of
		// the next answer (every scrape reads the right page). Bytes that come later, after the
		// answer was read, are an answer out of turn: see TestAnswerOutOfTurn.
		rs := newRawServer(t, func(int) (string, bool) { return okAnswer + "HTTP/1.1 200 OK\r\n", false })
		scrapes(t, rs, 3, nil)
	})
	t.Run("connection close", func(t *testing.T) {
		rs := newRawServer(t, func(int) (string, bool) {
			return fmt.Sprintf("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(runningPage), runningPage), false
		})
		scrapes(t, rs, 3, nil)
		if n := rs.conns.Load(); n != 3 {
			t.Fatalf("%d connections for 3 scrapes, want 3", n)
		}
	})
}

// TestPoolClosesRemovedTargetConnection checks that a target removed from the pool closes its
// connection: a fleet that changes must not leave connections to old engines open.
func TestPoolClosesRemovedTargetConnection(t *testing.T) {
	closed := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(runningPage)) }))
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	out := make(chan Result, 1)
	p := NewPool(Options{Timeout: 5 * time.Second}, out)
	defer p.Close()
	p.Set([]target.Target{{URL: srv.URL + "/metrics"}})
	p.Tick()
	if r := <-out; r.Err() != nil {
		t.Fatal(r.Err())
	}
	p.Set(nil)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the removed target's connection is still open")
	}
}

// TestFastLargeHeaders checks the fast transport's bound on an answer's headers: headers of
// a few kilobytes are read, and larger than fastReadBuffer fail the scrape with a clear error.
func TestFastLargeHeaders(t *testing.T) {
	for _, tt := range []struct {
		size int
		ok   bool
	}{{2 << 10, true}, {2 * fastReadBuffer, false}} {
		big := strings.Repeat("x", tt.size)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Big", big)
			w.Write([]byte(runningPage))
		}))
		opt := Options{Timeout: 5 * time.Second}.withDefaults()
		opt.fast = newFastClient(opt.MaxBody)
		s := newScraper(context.Background(), target.Target{URL: srv.URL + "/metrics"}, &opt)
		r := s.scrape()
		s.close()
		srv.Close()
		switch {
		case tt.ok && (r.Err() != nil || r.Page == nil || len(r.Page.Engines) != 1):
			t.Errorf("headers of %d bytes: err %v", tt.size, r.Err())
		case !tt.ok && (r.Err() == nil || !strings.Contains(r.Err().Error(), "headers are larger than")):
			t.Errorf("headers of %d bytes: err %v, want one that says they are too large", tt.size, r.Err())
		}
	}
}

// TestTLSTarget checks that an HTTPS target is scraped with net/http: with a client that
// trusts the server's certificate the page is read, credentials included; with the pool's own
// client (the system's roots) the scrape fails and says the certificate is not trusted.
func TestTLSTarget(t *testing.T) {
	var auth atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		w.Write([]byte(runningPage))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted handshake below fails on purpose
	srv.StartTLS()
	defer srv.Close()
	tg := target.Target{URL: srv.URL + "/metrics", Auth: target.Auth{Authorization: &target.Authorization{Credentials: target.NewSecret("tok")}}}

	opt := Options{Timeout: 5 * time.Second, Client: srv.Client()}.withDefaults()
	opt.fast = newFastClient(opt.MaxBody) // a TLS target goes to net/http even where plain HTTP would not
	s := newScraper(context.Background(), tg, &opt)
	defer s.close()
	if _, ok := s.tr.(*stdTransport); !ok {
		t.Fatalf("an HTTPS target is sent by %T", s.tr)
	}
	if r := s.scrape(); r.Err() != nil || r.Page == nil || len(r.Page.Engines) != 1 || auth.Load() != "Bearer tok" {
		t.Fatalf("trusted: err %v, Authorization %q", r.Err(), auth.Load())
	}

	r := Fetch(context.Background(), target.Target{URL: tg.URL}, Options{Timeout: 5 * time.Second, Client: NewClient()})
	if r.Err() == nil || !strings.Contains(r.Err().Error(), "certificate") || !strings.Contains(r.Err().Error(), srv.URL) {
		t.Fatalf("untrusted certificate: err %v, want one that names the target and the certificate", r.Err())
	}
}

// TestFastTransportEndedContext checks a target whose context ended before its transport was
// made (a target removed as soon as it was added): the abort runs on another goroutine while
// the scrape may already be under way, so the scrape may fail or not, but it ends without
// waiting for its timeout, and nothing races (under -race).
func TestFastTransportEndedContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(runningPage)) }))
	defer srv.Close()
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		opt := Options{Timeout: time.Minute}.withDefaults()
		opt.fast = newFastClient(opt.MaxBody)
		s := newScraper(ctx, target.Target{URL: srv.URL + "/metrics"}, &opt)
		if r := s.scrape(); r.Duration > 30*time.Second {
			t.Fatalf("scrape after the target ended: err %v after %v", r.Err(), r.Duration)
		}
		s.close()
	}
}
