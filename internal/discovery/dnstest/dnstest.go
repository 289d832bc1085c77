// Package dnstest is a DNS server on loopback for tests, as httptest is an HTTP one: it
// answers A, AAAA and SRV questions over UDP from records the test sets, and changes, while it
// runs. Only tests import it.
package dnstest

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// SRV is one SRV record's target host and port.
type SRV struct {
	Target string
	Port   uint16
}

// Server answers from its records: a name it has records for gets them (none of the asked
// type: an empty answer), a failing name gets SERVFAIL, any other name NXDOMAIN.
type Server struct {
	// Addr is the server's host:port, for discovery's dns_server.
	Addr string

	conn    net.PacketConn
	mu      sync.Mutex
	ips     map[string][]netip.Addr
	srvs    map[string][]SRV
	fail    map[string]bool
	queries map[string]int
	done    chan struct{}
}

// New starts a server on 127.0.0.1 at a free port, closed when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("dnstest: %v", err)
	}
	s := &Server{Addr: conn.LocalAddr().String(), conn: conn, ips: map[string][]netip.Addr{},
		srvs: map[string][]SRV{}, fail: map[string]bool{}, queries: map[string]int{}, done: make(chan struct{})}
	go s.serve()
	t.Cleanup(func() { conn.Close(); <-s.done })
	return s
}

// fqdn is name in lower case with the trailing dot, as questions spell it.
func fqdn(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) + "." }

// SetIPs makes name's A and AAAA records ips (IPv4 and IPv6 addresses); none: the name exists
// without addresses. It clears a failure.
func (s *Server) SetIPs(name string, ips ...string) {
	var as []netip.Addr
	for _, ip := range ips {
		as = append(as, netip.MustParseAddr(ip))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ips[fqdn(name)] = as
	delete(s.fail, fqdn(name))
}

// SetSRV makes name's SRV records recs; it clears a failure.
func (s *Server) SetSRV(name string, recs ...SRV) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srvs[fqdn(name)] = recs
	delete(s.fail, fqdn(name))
}

// Fail makes questions about name answer SERVFAIL until its records are set again.
func (s *Server) Fail(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[fqdn(name)] = true
}

// Remove forgets name's records: it answers NXDOMAIN.
func (s *Server) Remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ips, fqdn(name))
	delete(s.srvs, fqdn(name))
	delete(s.fail, fqdn(name))
}

// Queries is how many questions about name the server has answered.
func (s *Server) Queries(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[fqdn(name)]
}

func (s *Server) serve() {
	defer close(s.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if out, ok := s.answer(buf[:n]); ok {
			s.conn.WriteTo(out, from)
		}
	}
}

// answer builds the response to one query; ok is false for a packet that is not one.
func (s *Server) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := strings.ToLower(q.Name.String())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries[name]++
	ips, hasIPs := s.ips[name]
	srvs, hasSRV := s.srvs[name]
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	switch {
	case s.fail[name]:
		rh.RCode = dnsmessage.RCodeServerFailure
	case !hasIPs && !hasSRV:
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	rrh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
	if rh.RCode == dnsmessage.RCodeSuccess {
		switch q.Type {
		case dnsmessage.TypeA:
			for _, ip := range ips {
				if ip.Is4() {
					b.AResource(rrh, dnsmessage.AResource{A: ip.As4()})
				}
			}
		case dnsmessage.TypeAAAA:
			for _, ip := range ips {
				if ip.Is6() && !ip.Is4In6() {
					b.AAAAResource(rrh, dnsmessage.AAAAResource{AAAA: ip.As16()})
				}
			}
		case dnsmessage.TypeSRV:
			for _, r := range srvs {
				b.SRVResource(rrh, dnsmessage.SRVResource{Priority: 10, Weight: 10, Port: r.Port,
					Target: dnsmessage.MustNewName(fqdn(r.Target))})
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil, false
	}
	return out, true
}
