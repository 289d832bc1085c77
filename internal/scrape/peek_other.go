//go:build !unix

package scrape

import "net"

// peeker cannot look at a socket's bytes without reading them here: it reports none, and a kept
// connection is checked only by the answer it gives.
type peeker struct{}

func newPeeker(net.Conn) *peeker { return &peeker{} }

func (*peeker) peek() (int, error) { return 0, nil }
