package sink

import (
	"errors"
	"fmt"
	"io"
)

// File is what a RecordFile needs of its file. *os.File has it; tests put a failing one in its
// place.
type File interface {
	io.Writer
	io.Seeker
	Truncate(size int64) error
	Close() error
}

// RecordFile appends whole records to a file that readers follow while it grows, such as a
// TensorBoard event file or a W&B transaction log. A failed write may leave part of a record
// behind; the queue retries the step, and every reader must still accept the file, so
// RecordFile cuts the file back to its last whole record before anything else is written.
// It is not safe for concurrent use: the sink that owns it holds its own lock around it.
type RecordFile struct {
	f      File
	name   string
	size   int64 // bytes of whole records: a failed write is cut back to this
	broken bool  // a failed write may have left part of a record after size
}

// NewRecordFile appends to f from its end; name is f's path, for errors. What f holds already
// must be whole records.
func NewRecordFile(f File, name string) (*RecordFile, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("seek to the end of %q: %w", name, err)
	}
	return &RecordFile{f: f, name: name, size: size}, nil
}

// Append writes b, one or more whole records, in one write. After a failed write it cuts the
// file back to its last whole record, and tries that again before the next write if the cut
// failed too.
func (r *RecordFile) Append(b []byte) error {
	if r.broken {
		if err := r.cut(); err != nil {
			return err
		}
	}
	if _, err := r.f.Write(b); err != nil {
		r.broken = true
		err = fmt.Errorf("write %q: %w", r.name, err)
		if cerr := r.cut(); cerr != nil {
			return errors.Join(err, cerr)
		}
		return err
	}
	r.size += int64(len(b))
	return nil
}

func (r *RecordFile) cut() error {
	if err := r.f.Truncate(r.size); err != nil {
		return fmt.Errorf("cut %q back to its last whole record: %w", r.name, err)
	}
	if _, err := r.f.Seek(r.size, io.SeekStart); err != nil {
		return fmt.Errorf("cut %q back to its last whole record: %w", r.name, err)
	}
	r.broken = false
	return nil
}

// Size is the number of bytes of whole records in the file: the offset of the next record.
func (r *RecordFile) Size() int64 { return r.size }

// Close closes the file as it is; a part record that could not be cut off stays in it.
func (r *RecordFile) Close() error {
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("close %q: %w", r.name, err)
	}
	return nil
}
