package appendlog

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// memFile is a File in memory whose next write, truncate or seek can be made to fail; a
// failing write writes half of its bytes first, like a full disk.
type memFile struct {
	b                            []byte
	off                          int64
	failWrite, failCut, failSeek bool
	closed                       bool
}

func (f *memFile) Write(p []byte) (int, error) {
	var err error
	if f.failWrite {
		f.failWrite, p, err = false, p[:len(p)/2], errors.New("no space left on device")
	}
	f.b = append(f.b[:f.off], p...)
	f.off += int64(len(p))
	return len(p), err
}

func (f *memFile) Seek(off int64, whence int) (int64, error) {
	if f.failSeek {
		f.failSeek = false
		return 0, errors.New("seek failed")
	}
	if whence == io.SeekEnd {
		off += int64(len(f.b))
	}
	f.off = off
	return off, nil
}

func (f *memFile) Truncate(size int64) error {
	if f.failCut {
		f.failCut = false
		return errors.New("truncate failed")
	}
	f.b = f.b[:size]
	return nil
}

func (f *memFile) Close() error { f.closed = true; return nil }

func TestLog(t *testing.T) {
	for _, tt := range []struct {
		name string
		// fail sets up the failures of the second Append.
		fail func(*memFile)
		// errs are what the second Append's error says.
		errs []string
	}{
		{name: "no failure", fail: func(*memFile) {}},
		{name: "write fails halfway", fail: func(f *memFile) { f.failWrite = true },
			errs: []string{`write "t": no space left on device`}},
		{name: "write and cut fail, cut on the next append", fail: func(f *memFile) { f.failWrite, f.failCut = true, true },
			errs: []string{"no space left", `cut "t" back to its last whole record: truncate failed`}},
		{name: "write and seek fail", fail: func(f *memFile) { f.failWrite, f.failSeek = true, true },
			errs: []string{"no space left", `cut "t" back to its last whole record: seek failed`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &memFile{b: []byte("head|")}
			r, err := New(f, "t")
			if err != nil {
				t.Fatal(err)
			}
			if r.Size() != 5 {
				t.Fatalf("size %d, want the 5 bytes already there", r.Size())
			}
			if err := r.Append([]byte("one|")); err != nil {
				t.Fatal(err)
			}
			tt.fail(f)
			err = r.Append([]byte("two-two|"))
			for _, want := range tt.errs {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("failed append: error %v, want it to say %q", err, want)
				}
			}
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
			} else if err := r.Append([]byte("two-two|")); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if err := r.Append([]byte("three|")); err != nil {
				t.Fatal(err)
			}
			const want = "head|one|two-two|three|"
			if string(f.b) != want || r.Size() != int64(len(want)) {
				t.Errorf("file %q, size %d; want %q, %d", f.b, r.Size(), want, len(want))
			}
			if err := r.Close(); err != nil || !f.closed {
				t.Errorf("close: %v, closed %v", err, f.closed)
			}
		})
	}
}

// TestLogCutFailsTwice checks that an Append after a cut that failed again writes nothing.
func TestLogCutFailsTwice(t *testing.T) {
	f := &memFile{}
	r, err := New(f, "t")
	if err != nil {
		t.Fatal(err)
	}
	f.failWrite, f.failCut = true, true
	if err := r.Append([]byte("one|")); err == nil {
		t.Fatal("no error")
	}
	f.failCut = true
	if err := r.Append([]byte("two|")); err == nil || !strings.Contains(err.Error(), "truncate failed") {
		t.Fatalf("error %v, want the cut's", err)
	}
	if string(f.b) != "on" {
		t.Errorf("file %q, want only the part record %q", f.b, "on")
	}
	if err := r.Append([]byte("two|")); err != nil || string(f.b) != "two|" {
		t.Errorf("file %q, %v; want %q", f.b, err, "two|")
	}
}

func TestLogOnDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records")
	if err := os.WriteFile(path, []byte("head|"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(f, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Append([]byte("one|")); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, []byte("head|one|")) {
		t.Errorf("file %q", b)
	}
	if err := r.Close(); err == nil || !strings.Contains(err.Error(), "close "+strconv.Quote(path)) {
		t.Errorf("second close: %v, want it to name the file", err)
	}
}

func TestNewSeekFails(t *testing.T) {
	if _, err := New(&memFile{failSeek: true}, "t"); err == nil || !strings.Contains(err.Error(), `seek to the end of "t"`) {
		t.Errorf("error %v, want the seek's", err)
	}
}
