package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vllmstat/vllmstat/internal/report"
)

// mountTmpfs mounts a 1 MiB tmpfs for the test, or skips it (loudly) where this process may not
// mount: not root, or a container without the capability. The injected-writer tests of the
// sink and record packages cover the same paths everywhere.
func mountTmpfs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: mounting a small tmpfs needs root; the full-disk paths are tested with injected writers in internal/sink and internal/record")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("SKIPPING: cannot mount a tmpfs here (%v); the full-disk paths are tested with injected writers in internal/sink and internal/record", err)
		}
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// TestFullDisk runs with out_dir and the recording on a 1 MiB tmpfs that fills up while steps
// close. Freed again, every step reaches steps.jsonl whole and in order, and the recording
// replays to it byte for byte; never freed, the run exits 1 naming the steps it lost.
func TestFullDisk(t *testing.T) {
	t.Run("freed", func(t *testing.T) {
		mnt := mountTmpfs(t)
		a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 21)
		out := filepath.Join(mnt, "out")
		rec := filepath.Join(mnt, "run.jsonl.gz")
		l := startLive(t, out, "--target", a.url(), "--record", rec, "--per-worker")
		l.endStep(1)
		fill(t, filepath.Join(mnt, "filler"))
		l.endStep(2)
		l.endStep(3)
		l.endStep(4)
		if v := l.metric("vllmstat_steps_pending_write"); v == "" || v == "0" {
			t.Fatalf("vllmstat_steps_pending_write = %q while the disk is full, want steps waiting", v)
		}
		steps, _ := readSteps(t, filepath.Join(out, "steps.jsonl")) // only whole lines while full
		if len(steps) == 4 {
			t.Fatal("every step was written although the disk was full")
		}
		os.Remove(filepath.Join(mnt, "filler"))
		l.endStep(5)
		if v := l.metric("vllmstat_steps_pending_write"); v != "0" {
			t.Errorf("vllmstat_steps_pending_write = %q after space came back", v)
		}
		if code := l.stop(); code != 0 {
			t.Fatalf("exit %d\n%s", code, l.stderr.String())
		}
		steps, raw := readSteps(t, filepath.Join(out, "steps.jsonl"))
		for i, s := range steps {
			if s.Step != int64(i+1) {
				t.Fatalf("line %d is step %d: want steps 1..5 in order", i+1, s.Step)
			}
		}
		if len(steps) != 5 {
			t.Fatalf("%d steps, want the trainer's 5", len(steps))
		}
		log := l.stderr.String()
		if strings.Count(log, "steps file write failed") != 1 || strings.Count(log, "steps file recovered") != 1 {
			t.Errorf("want the failure and the recovery logged once each:\n%s", log)
		}
		if _, err := report.ReadSteps(filepath.Join(out, "steps.jsonl")); err != nil {
			t.Errorf("report cannot read steps.jsonl: %v", err)
		}
		var replayed, errb bytes.Buffer
		if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &replayed, &errb); code != 0 || errb.Len() > 0 {
			t.Fatalf("replay exited %d: %s", code, errb.String())
		}
		if !bytes.Equal(replayed.Bytes(), raw) {
			t.Fatalf("replay differs from steps.jsonl\nreplay:\n%s\nrun:\n%s", replayed.String(), raw)
		}
	})
	t.Run("never freed", func(t *testing.T) {
		mnt := mountTmpfs(t)
		a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 22)
		out := filepath.Join(mnt, "out")
		l := startLive(t, out, "--target", a.url(), "--record", filepath.Join(mnt, "run.jsonl.gz"), "--per-worker")
		l.endStep(1)
		fill(t, filepath.Join(mnt, "filler"))
		l.endStep(2)
		l.endStep(3)
		code := l.stop()
		steps, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
		if code != exitError {
			t.Fatalf("exit %d, want %d: steps were lost\n%s", code, exitError, l.stderr.String())
		}
		lost := make([]string, 0, 3-len(steps))
		for n := len(steps) + 1; n <= 3; n++ {
			lost = append(lost, string(rune('0'+n)))
		}
		want := "steps " + lost[0] + "-3"
		if len(lost) == 1 {
			want = "step 3"
		}
		for _, w := range []string{"not written to", want, "no space left on device", "recording"} {
			if !strings.Contains(l.stderr.String(), w) {
				t.Errorf("stderr lacks %q:\n%s", w, l.stderr.String())
			}
		}
	})
}
