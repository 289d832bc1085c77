package scrape

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/target"
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
// connection before each request: the scrape fails with a reason that says so, and the next one
// goes on a new connection. net/http closes a connection that speaks while idle (its read
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
			if c.late {
				opt.Timeout, opt.FirstTimeout = 100*time.Millisecond, 100*time.Millisecond
			}
			if fast {
				opt.fast = newFastClient(opt.MaxBody)
			}
			s := newScraper(context.Background(), target.Target{URL: srv.url()}, &opt)
			defer s.close()
			if r := s.scrape(); r.Err() != nil || counterOf(&r) != 100 {
				t.Fatalf("first scrape: %v, counter %v", r.Err(), counterOf(&r))
			}
			if c.late {
				time.Sleep(3 * opt.Timeout) // the first scrape's deadline is past
			}
			close(srv.send)
			<-srv.unasked
			if fast {
				// Wait until the unasked answer has reached the connection (a loopback write
				// lands at once, but not by contract).
				deadline := time.Now().Add(5 * time.Second)
				for !peerSpoke(t, s.tr.(*fastTransport)) {
					if time.Now().After(deadline) {
						t.Fatal("the unasked answer never reached the connection")
					}
					time.Sleep(time.Millisecond)
				}
				r := s.scrape()
				if r.Err() == nil || !strings.Contains(r.Err().Error(), "out of turn") || r.Reason() != "protocol" {
					t.Fatalf("scrape after an unasked answer: err %v (reason %q), counter %v; want a failure out of turn", r.Err(), r.Reason(), counterOf(&r))
				}
			} else {
				<-srv.closed // net/http dropped the connection that spoke out of turn
			}
			for i := range 2 {
				r := s.scrape()
				if r.Err() != nil || counterOf(&r) != 100+float64(i) {
					t.Fatalf("scrape %d on a new connection: %v, counter %v", i, r.Err(), counterOf(&r))
				}
			}
		})
	}
}

// peerSpoke reports whether a connection of f's address has bytes to read, without reading
// them.
func peerSpoke(t *testing.T, f *fastTransport) bool {
	t.Helper()
	f.client.mu.Lock()
	defer f.client.mu.Unlock()
	for c := range f.client.hosts[f.addr].conns {
		if n, err := newPeeker(c.Conn).peek(); n > 0 && err == nil {
			return true
		}
	}
	return false
}
