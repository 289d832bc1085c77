package sink

import (
	"fmt"
	"io"
	"os"
)

// CutPartialLine cuts off what follows f's last newline: the part of a line that a run killed in
// the middle of a write left behind, so that the next line written starts a line of its own. It
// returns the number of bytes cut. For files of whole lines each written in one write (CSV rows);
// steps.jsonl, whose last line may be whole but for its newline, has its own repair.
func CutPartialLine(f *os.File, path string) (int, error) {
	tail, err := lastLine(f)
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
