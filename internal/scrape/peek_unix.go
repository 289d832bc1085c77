//go:build unix

package scrape

import (
	"errors"
	"net"
	"syscall"
)

// peek reports how many bytes c has to read right now, without reading them or waiting: 0 with
// a nil error when there are none, 0 with io.EOF when the peer closed it. A connection that
// cannot tell (not a socket) reports 0.
func peek(c net.Conn) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var b [1]byte
	var n int
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		n, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // never wait for bytes: only what is there now counts
	})
	switch {
	case err != nil:
		return 0, err
	case errors.Is(perr, syscall.EAGAIN) || errors.Is(perr, syscall.EWOULDBLOCK):
		return 0, nil
	case perr != nil:
		return 0, perr
	case n == 0:
		return 0, errPeerClosed
	}
	return n, nil
}
