package testkit

import (
	"os"
	"syscall"
)

// FullDisk is a real file whose writes fail as on a full disk: the first half of the bytes
// reach the file (a short write), then the write returns syscall.ENOSPC. Writes fail while Full
// is set, and the one that FailWrite picks fails once. Like the file it wraps, it is for one
// writer at a time.
type FullDisk struct {
	*os.File
	// Full fails every write while it is set.
	Full   bool
	failIn int // writes until the one that fails, counting it; 0 for none
}

// FailWrite makes the nth write from now on fail (1: the next one), and only that one.
func (d *FullDisk) FailWrite(n int) { d.failIn = n }

func (d *FullDisk) Write(p []byte) (int, error) {
	fail := d.Full
	if d.failIn > 0 {
		d.failIn--
		fail = fail || d.failIn == 0
	}
	if !fail {
		return d.File.Write(p)
	}
	n, _ := d.File.Write(p[:len(p)/2])
	return n, syscall.ENOSPC
}
