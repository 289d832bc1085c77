package appendlog

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// KeepCut writes b, the part of the file at path that a resume from an earlier step cut out of
// it, to the first free <path>.cut-<n> (n from 1), as KeepAside does with what a repair takes
// out, and returns that name.
func KeepCut(path string, b []byte) (string, error) { return keepAside(path, ".cut-", b) }

// CutLines takes the lines of the file at path for which cut is true out of it, in their
// order, into <path>.cut-<n> (see KeepCut), and returns that name and how many lines it holds
// ("" and 0 when none is cut, and for a file that does not exist). The cut lines are kept
// before the file is replaced, and it is replaced at once (a new file renamed over it), so
// that a kill at any point loses no line. A last line without its newline is a line too.
func CutLines(path string, cut func(line []byte) bool) (side string, n int, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("read %q: %w", path, err)
	}
	var kept, gone []byte
	for rest := b; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		rest = rest[len(line):]
		if cut(bytes.TrimSuffix(line, []byte{'\n'})) {
			gone = append(gone, line...)
			n++
		} else {
			kept = append(kept, line...)
		}
	}
	if n == 0 {
		return "", 0, nil
	}
	if side, err = KeepCut(path, gone); err != nil {
		return "", 0, err
	}
	if err := ReplaceFile(path, kept); err != nil {
		return "", 0, err
	}
	return side, n, nil
}

// ReplaceFile replaces the file at path by one holding b, synced before it is renamed over the
// old one, so that a reader or a kill sees the old file or the new, never a part.
func ReplaceFile(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("replace %q: %w", path, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %q: %w", path, err)
	}
	return nil
}
