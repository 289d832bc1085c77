package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWatchOnPipe(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 1)
	dead := deadAddr(t)
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	done := make(chan int)
	go func() { done <- watchWith(ctx, []string{"--interval", "0.5", a.url(), dead}, &out, &errb, ticks) }()
	for i := 0; i < 4; i++ {
		ticks <- time.Now()
	}
	time.Sleep(300 * time.Millisecond) // let the last round print
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	text := out.String()
	if strings.Contains(text, "\x1b") {
		t.Fatal("escape sequences on a pipe")
	}
	lines := strings.Split(text, "\n")
	header := lines[0]
	if strings.Join(strings.Fields(header), " ") != "time workers down run wait kv_mean kv_max hit% preempt gen_tok/s prompt_tok/s" {
		t.Fatalf("header %q", header)
	}
	rows := 0
	for _, l := range lines[1:] {
		if l == "" {
			break
		}
		rows++
		if len(l) != len(header) {
			t.Errorf("row %q is not aligned with the header (%d vs %d)", l, len(l), len(header))
		}
		f := strings.Fields(l)
		if f[1] != "2/2" || f[2] != "1" {
			t.Errorf("row %q: want workers 2/2 and one target down", l)
		}
	}
	if rows < 4 || rows > 5 {
		t.Errorf("%d rows, want 4 or 5 (first round plus four ticks)\n%s", rows, text)
	}
	if !strings.Contains(text, "session:") || !strings.Contains(text, "vllm/generation_tokens ") {
		t.Errorf("no session summary:\n%s", text)
	}
}

// TestWatchOnTerminal runs the binary under a pseudo-terminal (util-linux script) and checks
// that per-worker rows are redrawn in place.
func TestWatchOnTerminal(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("script (util-linux) is needed for the terminal test")
		}
		t.Skip("SKIPPING: script (util-linux) not found; the terminal test needs a pseudo-terminal")
	}
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 2)
	bin := filepath.Join(t.TempDir(), "vllmstat")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/vllmstat").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, scriptBin, "-qfec", bin+" watch --per-worker --interval 0.2 "+a.url(), "/dev/null")
	var out bytes.Buffer
	cmd.Stdout = &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	stdin.Write([]byte{3}) // Ctrl-C on the terminal: SIGINT to the foreground process
	cmd.Wait()
	text := out.String()
	if !strings.Contains(text, "\x1b[4A") { // header + 2 engines + "all" row, redrawn
		t.Fatalf("no in-place redraw on a terminal:\n%q", text)
	}
	if !strings.Contains(text, "session:") {
		t.Fatalf("no session summary after Ctrl-C:\n%q", text)
	}
}
