// Package syncbuf is a buffer that one goroutine writes (a logger, a command's stderr) while
// another reads it, as tests across the module need.
package syncbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writes and reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Count counts the occurrences of sub in what was written so far.
func (s *Buffer) Count(sub string) int { return strings.Count(s.String(), sub) }
