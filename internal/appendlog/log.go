// Package appendlog appends whole records to files that readers follow while they grow:
// steps.jsonl, a recording, a TensorBoard event file, a W&B transaction log, a CSV file. Every
// reader must accept the file at any moment, and a run may be killed in the middle of a write,
// so the file is kept to whole records:
//
//   - A Log cuts a write that failed part way (a full disk) back to its last whole record
//     before anything else is written.
//   - A Backlog, over a Log, keeps the records the file refused in memory, up to a bound in
//     bytes, and writes them in order before any newer record; its owner decides what a record
//     given up means (a gap event, a step named at Close).
//   - CutPartialLine, LastLine and LastWholeLine find and cut off the partial last line that a
//     killed run left in a file of lines, or a last line that is no record, before a new run
//     appends to it; KeepAside keeps what such a repair takes out, in a file of its own.
//
// Nothing here is safe for concurrent use: each file has one owner, which holds its own lock
// where it needs one.
package appendlog

import (
	"errors"
	"fmt"
	"io"
)

// File is what a Log needs of its file. *os.File has it; tests put a failing one in its place.
type File interface {
	io.Writer
	io.Seeker
	Truncate(size int64) error
	Close() error
}

// Log appends whole records to a file. A failed write may leave part of a record behind; the
// owner retries the record or gives it up, and every reader must still accept the file, so Log
// cuts the file back to its last whole record before anything else is written.
type Log struct {
	f      File
	name   string
	size   int64 // bytes of whole records: a failed write is cut back to this
	broken bool  // a failed write may have left part of a record after size
}

// New appends to f from its end; name is f's path, for errors. What f holds already must be
// whole records.
func New(f File, name string) (*Log, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("seek to the end of %q: %w", name, err)
	}
	return &Log{f: f, name: name, size: size}, nil
}

// Append writes b, one or more whole records, in one write. After a failed write it cuts the
// file back to its last whole record, and tries that again before the next write if the cut
// failed too.
func (l *Log) Append(b []byte) error {
	if l.broken {
		if err := l.cut(); err != nil {
			return err
		}
	}
	if _, err := l.f.Write(b); err != nil {
		l.broken = true
		err = fmt.Errorf("write %q: %w", l.name, err)
		if cerr := l.cut(); cerr != nil {
			return errors.Join(err, cerr)
		}
		return err
	}
	l.size += int64(len(b))
	return nil
}

func (l *Log) cut() error {
	if err := l.f.Truncate(l.size); err != nil {
		return fmt.Errorf("cut %q back to its last whole record: %w", l.name, err)
	}
	if _, err := l.f.Seek(l.size, io.SeekStart); err != nil {
		return fmt.Errorf("cut %q back to its last whole record: %w", l.name, err)
	}
	l.broken = false
	return nil
}

// Size is the number of bytes of whole records in the file: the offset of the next record.
func (l *Log) Size() int64 { return l.size }

// Close closes the file as it is; a part record that could not be cut off stays in it.
func (l *Log) Close() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("close %q: %w", l.name, err)
	}
	return nil
}
