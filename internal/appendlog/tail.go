package appendlog

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// CutPartialLine cuts off what follows f's last newline: the part of a line that a run killed in
// the middle of a write left behind, so that the next line written starts a line of its own. It
// returns the number of bytes cut. For files of whole lines each written in one write (CSV rows);
// steps.jsonl, whose last line may be whole but for its newline, reads its LastLine to decide.
func CutPartialLine(f *os.File, path string) (int, error) {
	tail, err := LastLine(f)
	if err != nil {
		return 0, fmt.Errorf("read the end of %q: %w", path, err)
	}
	if len(tail) == 0 {
		return 0, nil
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("read the end of %q: %w", path, err)
	}
	if err := f.Truncate(size - int64(len(tail))); err != nil {
		return 0, fmt.Errorf("cut the partial last line off %q: %w", path, err)
	}
	return len(tail), nil
}

// LastLine returns the bytes after f's last newline: empty when f is empty or ends with one.
// It reads f from its end, whatever f's offset.
func LastLine(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	end := st.Size()
	var tail []byte
	for end > 0 {
		n := min(end, 64<<10)
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, end-n); err != nil {
			return nil, err
		}
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			return append(buf[i+1:], tail...), nil
		}
		tail = append(buf, tail...)
		end -= n
	}
	return tail, nil
}
