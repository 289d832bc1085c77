package appendlog

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// fullFile is a memFile whose writes fail like a full disk while full is set: half of the bytes
// reach the file, then ENOSPC. writes counts the write attempts.
type fullFile struct {
	memFile
	full   bool
	writes int
}

func (f *fullFile) Write(p []byte) (int, error) {
	f.writes++
	if f.full {
		n, _ := f.memFile.Write(p[:len(p)/2])
		return n, syscall.ENOSPC
	}
	return f.memFile.Write(p)
}

// events is what the hooks saw, one string per call.
type events []string

func (e *events) hooks() Hooks[string] {
	return Hooks[string]{
		Wrote:  func(m string, recovered bool) { *e = append(*e, fmt.Sprintf("wrote %s recovered=%v", m, recovered)) },
		Failed: func(m string, err error, first bool) { *e = append(*e, fmt.Sprintf("failed %s first=%v", m, first)) },
	}
}

func newBacklog(t *testing.T, maxBytes int) (*Backlog[string], *fullFile, *events) {
	t.Helper()
	f := &fullFile{}
	l, err := New(f, "t")
	if err != nil {
		t.Fatal(err)
	}
	var ev events
	return NewBacklog(l, maxBytes, ev.hooks()), f, &ev
}

func push(t *testing.T, b *Backlog[string], recs ...string) {
	t.Helper()
	for _, r := range recs {
		if !b.Push([]byte(r+"|"), r) {
			t.Fatalf("push %s refused", r)
		}
	}
}

// TestBacklogFullDisk: records the file refuses wait, and are written in order before newer
// ones once it takes writes again; the file never holds part of a record.
func TestBacklogFullDisk(t *testing.T) {
	b, f, ev := newBacklog(t, 1<<10)
	push(t, b, "a")
	f.full = true
	push(t, b, "b")
	if string(f.b) != "a|" {
		t.Fatalf("file %q after a refused write, want the part of b cut off", f.b)
	}
	push(t, b, "c", "d")
	if f.writes != 4 {
		t.Errorf("%d write attempts, want 4: c and d are not tried alone, but b is retried before each", f.writes)
	}
	if b.Len() != 3 || b.Bytes() != 6 {
		t.Errorf("%d records of %d bytes waiting, want 3 of 6", b.Len(), b.Bytes())
	}
	f.full = false
	push(t, b, "e")
	if string(f.b) != "a|b|c|d|e|" || b.Len() != 0 || b.Bytes() != 0 {
		t.Errorf("file %q with %d waiting, want every record in order and none waiting", f.b, b.Len())
	}
	want := events{
		"wrote a recovered=false",
		"failed b first=true", "failed b first=false", "failed b first=false",
		"wrote b recovered=true", "wrote c recovered=false", "wrote d recovered=false", "wrote e recovered=false",
	}
	if !slices.Equal(*ev, want) {
		t.Errorf("hooks saw\n%q\nwant\n%q", *ev, want)
	}
	if !errors.Is(b.Err(), syscall.ENOSPC) {
		t.Errorf("Err %v after recovery, want the last refused write's", b.Err())
	}
	left, err := b.Close()
	if len(left) != 0 || err != nil || !f.closed {
		t.Errorf("close: left %v, err %v, closed %v", left, err, f.closed)
	}
}

// TestBacklogFlush: Flush writes what waits without a new record, and stops at the first
// refused write.
func TestBacklogFlush(t *testing.T) {
	b, f, _ := newBacklog(t, 1<<10)
	b.Flush() // nothing waits: no write
	f.full = true
	push(t, b, "a", "b")
	b.Flush()
	if f.writes != 3 || b.Len() != 2 {
		t.Fatalf("%d writes, %d waiting; want a tried three times and both waiting", f.writes, b.Len())
	}
	f.full = false
	b.Flush()
	if string(f.b) != "a|b|" || b.Len() != 0 {
		t.Errorf("file %q, %d waiting", f.b, b.Len())
	}
}

// TestBacklogBound: while records wait, one that would bring them over the bound is refused and
// nothing of it is kept; a record alone is taken whatever its size.
func TestBacklogBound(t *testing.T) {
	b, f, _ := newBacklog(t, 6)
	f.full = true
	push(t, b, "aa", "bb") // 6 bytes: at the bound
	if b.Push([]byte("c|"), "c") {
		t.Fatal("push over the bound taken")
	}
	if b.Len() != 2 || b.Bytes() != 6 {
		t.Errorf("%d records of %d bytes waiting, want the 2 of 6 before", b.Len(), b.Bytes())
	}
	f.full = false
	push(t, b, "d")
	if string(f.b) != "aa|bb|d|" {
		t.Errorf("file %q, want c left out", f.b)
	}

	b, f, _ = newBacklog(t, 2)
	f.full = true
	big := strings.Repeat("x", 10)
	push(t, b, big) // alone: taken, and waits
	if b.Len() != 1 || b.Bytes() != 11 {
		t.Errorf("%d records of %d bytes waiting, want the big one", b.Len(), b.Bytes())
	}
	if b.Push([]byte("y|"), "y") {
		t.Error("push behind a waiting record over the bound taken")
	}
	f.full = false
	b.Flush()
	if string(f.b) != big+"|" {
		t.Errorf("file %q", f.b)
	}
}

// TestBacklogCloseReportsLeft: Close gives up what still waits, without another try, and
// returns it in order for its owner to report, with the file's error to explain it.
func TestBacklogCloseReportsLeft(t *testing.T) {
	b, f, _ := newBacklog(t, 1<<10)
	push(t, b, "a")
	f.full = true
	push(t, b, "b", "c")
	writes := f.writes
	left, err := b.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []string{"b", "c"}) {
		t.Errorf("left %q, want b and c in order", left)
	}
	if f.writes != writes || !f.closed {
		t.Errorf("close tried %d writes, closed %v; want none and the file closed", f.writes-writes, f.closed)
	}
	if err := b.Err(); !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), `write "t"`) {
		t.Errorf("Err %v, want the file's ENOSPC naming it", err)
	}
	if string(f.b) != "a|" || b.Len() != 0 || b.Bytes() != 0 {
		t.Errorf("file %q with %d records of %d bytes waiting after close", f.b, b.Len(), b.Bytes())
	}
}

// TestBacklogNilHooks: hooks are optional.
func TestBacklogNilHooks(t *testing.T) {
	f := &fullFile{full: true}
	l, err := New(f, "t")
	if err != nil {
		t.Fatal(err)
	}
	b := NewBacklog(l, 1<<10, Hooks[int]{})
	b.Push([]byte("a|"), 1)
	f.full = false
	b.Flush()
	if string(f.b) != "a|" {
		t.Errorf("file %q", f.b)
	}
}
