package appendlog

// Backlog appends records to a Log in the order they are pushed, and never stops on a write
// error: a record the file refuses (a full disk) waits in memory, with every record pushed after
// it, and they are written in that order before any newer one, at the next Push or Flush. The
// waiting records are bounded in bytes; a record beyond the bound is refused, and its owner says
// what was lost (a gap event in a recording, the steps named at Close).
//
// M is what the owner keeps with each record to account for it: a step number, a chunk's events
// and times. The owner counts and logs through Hooks, which the Backlog calls as records are
// written or refused, so that a failing file is logged once when it starts failing and once when
// it recovers.
type Backlog[M any] struct {
	log      *Log
	maxBytes int
	hooks    Hooks[M]
	waiting  []entry[M]
	bytes    int   // of waiting
	failing  bool  // the last write failed
	err      error // of the last write that failed
}

// Hooks are the owner's calls for its counters and logs; a nil hook is not called.
type Hooks[M any] struct {
	// Wrote is called for each record the file took, once it left the backlog (Len counts
	// those still waiting). recovered says that the write before it failed.
	Wrote func(m M, recovered bool)
	// Failed is called for each write the file refused; the record keeps waiting. first says
	// that the write before it succeeded, or that it is the first write.
	Failed func(m M, err error, first bool)
}

type entry[M any] struct {
	b []byte
	m M
}

// NewBacklog appends to l, keeping up to maxBytes of records in memory while l refuses writes.
func NewBacklog[M any](l *Log, maxBytes int, h Hooks[M]) *Backlog[M] {
	return &Backlog[M]{log: l, maxBytes: maxBytes, hooks: h}
}

// Push appends rec, one or more whole records, after the records waiting, which are tried
// first as they may make room for it. When they all go, rec is tried too; when one fails, rec
// waits behind it without a try of its own, as the file has just refused a write. rec is kept
// until it is written, and the caller must not change it.
//
// Push reports whether rec was taken (written or waiting). It is refused when records are still
// waiting and rec would bring their bytes over the bound; a record alone is always taken, so
// that one larger than the bound is not lost to a file that accepts writes.
func (b *Backlog[M]) Push(rec []byte, m M) bool {
	b.Flush()
	alone := len(b.waiting) == 0
	if !alone && b.bytes+len(rec) > b.maxBytes {
		return false
	}
	b.waiting = append(b.waiting, entry[M]{rec, m})
	b.bytes += len(rec)
	if alone {
		b.Flush()
	}
	return true
}

// Flush writes the waiting records in order until the file refuses one.
func (b *Backlog[M]) Flush() {
	for len(b.waiting) > 0 {
		e := b.waiting[0]
		if err := b.log.Append(e.b); err != nil {
			first := !b.failing
			b.failing, b.err = true, err
			if b.hooks.Failed != nil {
				b.hooks.Failed(e.m, err, first)
			}
			return
		}
		b.waiting[0] = entry[M]{} // let the bytes go before the slice is reallocated
		b.waiting = b.waiting[1:]
		b.bytes -= len(e.b)
		recovered := b.failing
		b.failing = false
		if b.hooks.Wrote != nil {
			b.hooks.Wrote(e.m, recovered)
		}
	}
}

// Len is the number of records waiting.
func (b *Backlog[M]) Len() int { return len(b.waiting) }

// Bytes is the size of the records waiting.
func (b *Backlog[M]) Bytes() int { return b.bytes }

// Err is the error of the last write the file refused, nil when it refused none; it stays after
// the file recovers, to explain records given up earlier.
func (b *Backlog[M]) Err() error { return b.err }

// Close closes the file without another try: the owner flushes first when it wants one. The
// records still waiting are given up; Close returns what the owner kept with them, in order, to
// report them, and the error of closing the file.
func (b *Backlog[M]) Close() (left []M, err error) {
	for _, e := range b.waiting {
		left = append(left, e.m)
	}
	b.waiting, b.bytes = nil, 0
	return left, b.log.Close()
}
