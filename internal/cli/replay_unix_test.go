//go:build unix

package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestReplayStopsOnSignal replays an endless recording from a named pipe and stops it as
// SIGINT would: replay returns, saying it was interrupted.
func TestReplayStopsOnSignal(t *testing.T) {
	p := filepath.Join(t.TempDir(), "endless.jsonl")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("SKIPPING: no named pipes here: %v", err)
	}
	var written atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			line := fmt.Sprintf(`{"kind":"scrape","ts":"2026-01-01T00:00:00.%09dZ","target":"http://a/metrics","error":"refused"}`+"\n", i%1e9)
			if _, err := f.WriteString(line); err != nil {
				return
			}
			written.Add(1)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errb syncbuf.Buffer
	go func() { done <- RunContext(ctx, []string{"replay", p}, &bytes.Buffer{}, &errb) }()
	// A pipe holds 64 KiB, about 600 of these lines: once 1,000 went in, replay is reading them.
	// The wait is long because only a hang should reach its end: under the race detector on a
	// loaded machine, replay may read a few hundred lines a second.
	testkit.WaitFor(t, 2*time.Minute, "replay to read the pipe", func() bool { return written.Load() > 1000 })
	cancel()
	select {
	case code := <-done:
		if code != exitError || !strings.Contains(errb.String(), "interrupted at") {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("replay did not stop after its context ended")
	}
}

// TestReplayReadsAPipeOnce replays a recording from a named pipe, as from a shell's process
// substitution (vllmstat replay <(zcat run.jsonl.gz)): a pipe can be read once, so replay must
// not open it a second time, and gives the steps it gives for the same recording in a file.
func TestReplayReadsAPipeOnce(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "run.jsonl")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("SKIPPING: no named pipes here: %v", err)
	}
	gz, err := os.Open(filepath.Join("testdata", "recordings", "one-run", "run.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file.jsonl")
	if err := os.WriteFile(file, rec, 0o644); err != nil {
		t.Fatal(err)
	}
	var want, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", file}, &want, &errb); code != exitOK {
		t.Fatalf("replay of the file: exit %d: %s", code, errb.String())
	}

	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		f.Write(rec) // an error here (no reader left) shows as missing steps below
		f.Close()
	}()
	// Only a hang reaches the deadline: replay waiting for a second writer that never comes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var got bytes.Buffer
	errb.Reset()
	if code := RunContext(ctx, []string{"replay", p}, &got, &errb); code != exitOK {
		t.Fatalf("replay of the pipe: exit %d: %s", code, errb.String())
	}
	if got.String() != want.String() {
		t.Fatalf("the pipe's replay gave %d bytes of steps, the file's %d", got.Len(), want.Len())
	}
}
