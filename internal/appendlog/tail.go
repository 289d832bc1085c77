package appendlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
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
	return lineBefore(f, st.Size())
}

// LastWholeLine returns f's last line that ends with a newline, the newline included: the line
// before LastLine's bytes. It is empty when f has no newline.
func LastWholeLine(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	tail, err := lineBefore(f, st.Size())
	if err != nil {
		return nil, err
	}
	end := st.Size() - int64(len(tail)) // just after the last newline
	if end == 0 {
		return nil, nil
	}
	line, err := lineBefore(f, end-1)
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// lineBefore returns the bytes of f from just after the last newline before offset end up to
// end, reading back from end.
func lineBefore(f *os.File, end int64) ([]byte, error) {
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

// KeepAside writes b, bytes taken out of the file at path, to the first free
// <path>.corrupt-<n> (n from 1), so that a repair of the file throws nothing away, and returns
// that name.
func KeepAside(path string, b []byte) (string, error) { return keepAside(path, ".corrupt-", b) }

// keepAside writes b to the first free <path><kind><n> (n from 1) and returns that name.
func keepAside(path, kind string, b []byte) (string, error) {
	for n := 1; ; n++ {
		p := path + kind + strconv.Itoa(n)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("keep what was taken out of %q: %w", path, err)
		}
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(p)
			return "", fmt.Errorf("keep what was taken out of %q: %w", path, err)
		}
		return p, nil
	}
}
