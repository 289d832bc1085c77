package record

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

func newFullDisk(t *testing.T, name string, opt WriterOptions) (*Writer, *testkit.FullDisk, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	d := &testkit.FullDisk{File: f}
	w, err := NewWriter(d, path, opt)
	if err != nil {
		t.Fatal(err)
	}
	return w, d, path
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// writeSteps records steps from..to of a fake run: three scrapes of a 2 KB page, then the step
// end (which flushes, as the collector does). Event i has ts t0+i ms.
func writeSteps(t *testing.T, w *Writer, from, to int) {
	t.Helper()
	body := []byte(strings.Repeat("vllm:generation_tokens_total{engine=\"0\"} 12345\n", 40))
	for s := from; s <= to; s++ {
		base := (s - 1) * 4
		for k := range 3 {
			must(t, w.Scrape(t0.Add(time.Duration(base+k)*time.Millisecond), fmt.Sprintf("http://h%d:8000/metrics", k), body, nil))
		}
		must(t, w.StepEnd(t0.Add(time.Duration(base+3)*time.Millisecond), int64(s)))
		must(t, w.Flush())
	}
}

// readAll reads every event of a recording file, failing the test on any error or warning.
func readAll(t *testing.T, path string) []*Event {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Warn = func(line int, msg string) { t.Errorf("warning at line %d: %s", line, msg) }
	var out []*Event
	for {
		e, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
}

// checkRun checks that events are the steps from..to written by writeSteps, in order.
func checkRun(t *testing.T, events []*Event, from, to int) {
	t.Helper()
	want := (to - from + 1) * 4
	if len(events) != want {
		t.Fatalf("%d events, want %d", len(events), want)
	}
	for i, e := range events {
		n := (from-1)*4 + i
		if !e.TS.Equal(t0.Add(time.Duration(n) * time.Millisecond)) {
			t.Fatalf("event %d at %s, want event %d", i, e.TS, n)
		}
		if n%4 == 3 && (e.Kind != KindStep || e.Step != int64(n/4+1)) {
			t.Fatalf("event %d: %+v, want the end of step %d", i, e, n/4+1)
		}
	}
}

func TestWriterFullDiskRecovers(t *testing.T) {
	for _, name := range []string{"rec.jsonl", "rec.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			w, d, path := newFullDisk(t, name, WriterOptions{ChunkBytes: 4 << 10, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			writeSteps(t, w, 1, 2)
			d.Full = true
			writeSteps(t, w, 3, 6)
			if q := w.Stats().Queued.Load(); q != 16 {
				t.Errorf("%d events waiting, want 16", q)
			}
			checkRun(t, readAll(t, path), 1, 2) // whole events only, while the disk is full
			d.Full = false
			writeSteps(t, w, 7, 8)
			if err := w.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			checkRun(t, readAll(t, path), 1, 8)
			if strings.Count(logs.String(), "recording write failed") != 1 || strings.Count(logs.String(), "recording recovered") != 1 {
				t.Errorf("want one failure and one recovery logged:\n%s", logs.String())
			}
			if st := w.Stats(); st.Written.Load() != 32 || st.Dropped.Load() != 0 || st.Queued.Load() != 0 || st.Errors.Load() == 0 {
				t.Errorf("stats written %d dropped %d queued %d errors %d", st.Written.Load(), st.Dropped.Load(), st.Queued.Load(), st.Errors.Load())
			}
		})
	}
}

func TestWriterFullAtClose(t *testing.T) {
	w, d, path := newFullDisk(t, "rec.jsonl.gz", WriterOptions{})
	writeSteps(t, w, 1, 1)
	d.Full = true
	writeSteps(t, w, 2, 3)
	err := w.Close()
	if err == nil || !strings.Contains(err.Error(), "8 events from") || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("close: %v, want the 8 events not written and the disk's error", err)
	}
	checkRun(t, readAll(t, path), 1, 1)
}

// TestWriterMemoryBound fills the memory bound while the disk is full: the events beyond it
// are dropped, and a gap event in their place says how many and when.
func TestWriterMemoryBound(t *testing.T) {
	var logs bytes.Buffer
	w, d, path := newFullDisk(t, "rec.jsonl", WriterOptions{MaxPending: 3 * 2100, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	writeSteps(t, w, 1, 1)
	d.Full = true
	writeSteps(t, w, 2, 6) // a step's chunk is 6.2 KB: only step 2's fits
	d.Full = false
	writeSteps(t, w, 7, 7)
	err := w.Close()
	if err == nil || !strings.Contains(err.Error(), "lost 16 events in 1 gaps") {
		t.Fatalf("close: %v, want the 16 lost events", err)
	}
	events := readAll(t, path)
	checkRun(t, events[:8], 1, 2)
	g := events[8]
	if g.Kind != KindGap || g.Events != 16 || !g.Since.Equal(t0.Add(8*time.Millisecond)) || !g.TS.Equal(t0.Add(23*time.Millisecond)) {
		t.Fatalf("event 9: %+v, want a gap of 16 events from step 3's first to step 6's last", g)
	}
	checkRun(t, events[9:], 7, 7)
	if n := strings.Count(logs.String(), "exceed the memory bound"); n != 1 {
		t.Errorf("memory bound logged %d times", n)
	}
	if w.Stats().Dropped.Load() != 16 {
		t.Errorf("dropped %d", w.Stats().Dropped.Load())
	}
}

// TestGzipMembersReadByOtherTools checks that a recording of several gzip members is one gzip
// stream to gzip(1) and Python as well.
func TestGzipMembersReadByOtherTools(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.jsonl.gz")
	w, err := Create(path, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeSteps(t, w, 1, 5)
	must(t, w.Close())
	raw, _ := os.ReadFile(path)
	if n := bytes.Count(raw, []byte{0x1f, 0x8b, 8}); n < 5 {
		t.Fatalf("%d gzip members, want one per step", n)
	}
	zr, _ := gzip.NewReader(bytes.NewReader(raw))
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range [][]string{{"gzip", "-dc", path}, {"python3", "-c", "import gzip,sys; sys.stdout.buffer.write(gzip.open(sys.argv[1]).read())", path}} {
		if _, err := exec.LookPath(tool[0]); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not found: %v", tool[0], err)
			}
			t.Logf("SKIPPING the %s check: %v", tool[0], err)
			continue
		}
		out, err := exec.Command(tool[0], tool[1:]...).Output()
		if err != nil || !bytes.Equal(out, plain) {
			t.Errorf("%s read %d bytes (%v), Go read %d", tool[0], len(out), err, len(plain))
		}
	}
}

func TestSegments(t *testing.T) {
	for _, tt := range []struct{ path, want string }{
		{"run.jsonl.gz", "run.3.jsonl.gz"},
		{"d/run.jsonl", "d/run.3.jsonl"},
		{"run.gz", "run.3.gz"},
		{"run.rec", "run.rec.3"},
		{"run", "run.3"},
		{"d/.gz", "d/.gz.3"},
	} {
		if got := SegmentPath(tt.path, 3); got != tt.want {
			t.Errorf("SegmentPath(%q, 3) = %q, want %q", tt.path, got, tt.want)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl.gz")
	for i := 1; i <= 3; i++ {
		w, err := Create(path, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := SegmentPath(path, i); w.Path() != want {
			t.Fatalf("run %d writes %q, want %q", i, w.Path(), want)
		}
		writeSteps(t, w, i, i)
		must(t, w.Close())
	}
	segs, err := Segments(path)
	if err != nil || len(segs) != 3 {
		t.Fatalf("segments %v (%v), want 3", segs, err)
	}
	for i, p := range segs {
		checkRun(t, readAll(t, p), i+1, i+1) // no run truncated another's
	}
	if _, err := Segments(filepath.Join(dir, "none.jsonl")); err == nil {
		t.Error("Segments of a missing file: no error")
	}
}

// TestReadCutShort reads recordings cut by a kill in the middle of a write: the events before
// the cut are read, the end is a warning.
func TestReadCutShort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rec.jsonl.gz")
	w, err := Create(path, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeSteps(t, w, 1, 2)
	size, _ := os.Stat(path)
	writeSteps(t, w, 3, 3)
	must(t, w.Close())
	raw, _ := os.ReadFile(path)
	for _, tt := range []struct {
		name  string
		cut   int
		steps int
	}{
		{"in the third member", int(size.Size()) + (len(raw)-int(size.Size()))/2, 2},
		{"in its trailer", len(raw) - 3, 3},
		{"in the first header", 5, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "cut.jsonl.gz")
			os.WriteFile(p, raw[:tt.cut], 0o644)
			r, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var warned []string
			r.Warn = func(_ int, msg string) { warned = append(warned, msg) }
			var events []*Event
			for {
				e, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				events = append(events, e)
			}
			if len(warned) != 1 || !strings.Contains(warned[0], "was its run killed?") {
				t.Errorf("warnings %q, want one about the cut", warned)
			}
			if len(events) < tt.steps*4 || len(events) >= (tt.steps+1)*4 && tt.steps < 3 {
				t.Errorf("%d events, want the %d whole steps before the cut (and maybe part of the next)", len(events), tt.steps)
			}
		})
	}
}

func TestReadLimits(t *testing.T) {
	long := `{"kind":"scrape","ts":"2026-01-01T00:00:00Z","target":"t","body":"` + strings.Repeat("x", 2000) + `"}` + "\n"
	r := NewReaderContext(context.Background(), strings.NewReader(`{"kind":"step","ts":"2026-01-01T00:00:00Z","step":1}`+"\n"+long), 1000)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err == nil || err.Error() != "line 2: line longer than the limit of 1000 bytes" {
		t.Fatalf("err %v, want line 2 over the limit", err)
	}

	// An endless input stops as soon as the context ends.
	ctx, cancel := context.WithCancel(context.Background())
	r = NewReaderContext(ctx, endless{}, 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := r.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
}

// endless is an input of blank lines with a step event in front.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	n := copy(p, `{"kind":"step","ts":"2026-01-01T00:00:00Z","step":1}`+"\n")
	for i := n; i < len(p); i++ {
		p[i] = '\n'
	}
	return len(p), nil
}
