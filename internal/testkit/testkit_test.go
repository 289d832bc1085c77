package testkit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps what the test would print; Fatalf ends the goroutine as
// the testing package's does.
type recorder struct {
	testing.TB
	errs  []string
	fatal bool
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.fatal = true
	runtime.Goexit()
}

// run calls f with a recorder on its own goroutine, so that a Fatalf ends only f.
func run(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestPoll(t *testing.T) {
	n := 0
	if !Poll(time.Minute, func() bool { n++; return n == 4 }) || n != 4 {
		t.Errorf("Poll returned before the fourth look (%d looks) or said no", n)
	}
	n = 0
	start := time.Now()
	if Poll(30*time.Millisecond, func() bool { n++; return false }) {
		t.Error("Poll says a condition that never holds held")
	}
	if d := time.Since(start); d < 30*time.Millisecond || n < 3 {
		t.Errorf("Poll gave up after %v and %d looks, want the whole timeout", d, n)
	}
}

func TestWaitFor(t *testing.T) {
	r := run(t, func(tb testing.TB) { WaitFor(tb, time.Minute, "a thing", func() bool { return true }) })
	if r.fatal || len(r.errs) > 0 {
		t.Errorf("a condition that holds failed the test: %q", r.errs)
	}
	r = run(t, func(tb testing.TB) {
		WaitFor(tb, 10*time.Millisecond, "the port to come back", func() bool { return false })
	})
	if !r.fatal || len(r.errs) != 1 || !strings.Contains(r.errs[0], "timed out after 10ms waiting for the port to come back") {
		t.Errorf("fatal %v, errors %q; want one saying what it waited for", r.fatal, r.errs)
	}
}

func TestFullDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := &FullDisk{File: f}
	write := func(s string) (int, error) { return d.Write([]byte(s)) }
	d.FailWrite(2)
	for i, tt := range []struct {
		write string
		n     int
		fails bool
	}{
		{"aaaa", 4, false},
		{"bbbb", 2, true}, // the second write from FailWrite on
		{"cccc", 4, false},
	} {
		n, err := write(tt.write)
		if n != tt.n || (err != nil) != tt.fails || err != nil && !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("write %d: %d, %v; want %d, failing %v with ENOSPC", i, n, err, tt.n, tt.fails)
		}
	}
	d.Full = true
	for range 2 {
		if n, err := write("dddddd"); n != 3 || !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("full: %d, %v; want 3 bytes and ENOSPC", n, err)
		}
	}
	d.Full = false
	if _, err := write("e"); err != nil {
		t.Error(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "aaaabbccccdddddde" {
		t.Errorf("file holds %q", b)
	}
}

func TestFixtures(t *testing.T) {
	page := ReadFixture(t, "prometheus-client-render-vllm-0.20.prom")
	if !strings.Contains(string(page), "# TYPE vllm:") {
		t.Errorf("the vLLM 0.20 page has no vLLM family: %.200q", page)
	}
	paths := Fixtures(t, "*.prom")
	if len(paths) == 0 || filepath.Base(paths[0]) > filepath.Base(paths[len(paths)-1]) {
		t.Errorf("fixtures %q, want them in order", paths)
	}
	if r := run(t, func(tb testing.TB) { Fixture(tb, "no-such-fixture") }); !r.fatal {
		t.Error("Fixture of a missing file did not fail")
	}
	if r := run(t, func(tb testing.TB) { Fixtures(tb, "*.nothing") }); !r.fatal {
		t.Error("Fixtures of no file did not fail")
	}
}

func TestGolden(t *testing.T) {
	want := ReadFixture(t, "vllm-0.10.0-glm45-issue-excerpt-a.prom")
	if r := run(t, func(tb testing.TB) { Golden(tb, "vllm-0.10.0-glm45-issue-excerpt-a.prom", want) }); len(r.errs) > 0 {
		t.Errorf("the same bytes differ: %q", r.errs)
	}
	if Update() {
		return
	}
	got := []byte(strings.Replace(string(want), "\n", "\nextra\n", 3))
	r := run(t, func(tb testing.TB) { Golden(tb, "vllm-0.10.0-glm45-issue-excerpt-a.prom", got) })
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "differs from the golden file") || !strings.Contains(r.errs[0], "got:\n"+string(got)) {
		t.Errorf("a short file that differs: %q, want it shown whole", r.errs)
	}
	r = run(t, func(tb testing.TB) { Golden(tb, "no-such-golden", got) })
	if !r.fatal || !strings.Contains(r.errs[0], "go test -update") {
		t.Errorf("a missing golden file: %q, want a hint to create it", r.errs)
	}
}

func TestFirstDiff(t *testing.T) {
	for _, tt := range []struct {
		got, want string
		line      int
		g, w      string
	}{
		{"a\nb\nc\n", "a\nB\nc\n", 2, "b", "B"},
		{"a\nb\n", "a\nb\nc\n", 3, "", "c"},
		{"a\nb", "a\nb\n", 3, "<end of file>", ""},
	} {
		line, g, w := firstDiff([]byte(tt.got), []byte(tt.want))
		if line != tt.line || g != tt.g || w != tt.w {
			t.Errorf("firstDiff(%q, %q) = %d, %q, %q; want %d, %q, %q", tt.got, tt.want, line, g, w, tt.line, tt.g, tt.w)
		}
	}
}
