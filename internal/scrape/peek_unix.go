//go:build unix

package scrape

import (
	"errors"
	"net"
	"syscall"
)

// peeker looks at a connection's bytes to read without reading them. It is made once per
// connection and reused, since every scrape on a kept connection peeks once: a raw connection
// and a closure made per peek were four allocations of every scrape.
type peeker struct {
	rc  syscall.RawConn // nil: the connection cannot tell (not a socket)
	try func(fd uintptr)
	b   [1]byte
	n   int
	err error
}

func newPeeker(c net.Conn) *peeker {
	p := &peeker{}
	if sc, ok := c.(syscall.Conn); ok {
		p.rc, _ = sc.SyscallConn()
	}
	p.try = p.recv
	return p
}

// recv peeks at the socket, never waiting for bytes: only what is there now counts.
func (p *peeker) recv(fd uintptr) {
	p.n, _, p.err = syscall.Recvfrom(int(fd), p.b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
}

// peek reports how many bytes the connection has to read right now, without reading them or
// waiting: 0 with a nil error when there are none, 0 with errPeerClosed when the peer closed
// it. A connection that cannot tell reports 0.
func (p *peeker) peek() (int, error) {
	if p.rc == nil {
		return 0, nil
	}
	p.n, p.err = 0, nil
	// Control, not Read: Read goes through the poller, which refuses a connection whose read
	// deadline has passed, and the last answer's deadline has passed by the next scrape. The
	// check then never ran (and each refusal allocated an error).
	err := p.rc.Control(p.try)
	switch {
	case err != nil:
		return 0, err
	case errors.Is(p.err, syscall.EAGAIN) || errors.Is(p.err, syscall.EWOULDBLOCK):
		return 0, nil
	case p.err != nil:
		return 0, p.err
	case p.n == 0:
		return 0, errPeerClosed
	}
	return p.n, nil
}
