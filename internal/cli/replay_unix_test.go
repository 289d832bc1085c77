//go:build unix

package cli

import (
	"bytes"
	"context"
	"fmt"
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
	// A pipe holds 64 KiB: once 5,000 lines went in, replay is reading them.
	testkit.WaitFor(t, 10*time.Second, "replay to read the pipe", func() bool { return written.Load() > 5000 })
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
