package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func scrapeLine(i int, target, body string) string {
	return fmt.Sprintf(`{"kind":"scrape","ts":"2026-01-01T00:%02d:%02d.000000000Z","target":%q,"body":%q}`+"\n", i/60, i%60, target, body)
}

// TestReplayOutOfOrder swaps two scrape lines: replay stops with the line number instead of
// computing wrong increases.
func TestReplayOutOfOrder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.jsonl")
	body := func(n int) string { return fmt.Sprintf("vllm:generation_tokens_total{engine=\"0\"} %d\n", n) }
	os.WriteFile(p, []byte(scrapeLine(1, "http://a/metrics", body(10))+scrapeLine(3, "http://a/metrics", body(200))+
		scrapeLine(2, "http://a/metrics", body(100))+`{"kind":"step","ts":"2026-01-01T00:00:04.000000000Z","step":1}`+"\n"), 0o644)
	var out, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", p}, &out, &errb); code != exitUsage {
		t.Fatalf("exit %d, want %d\n%s", code, exitUsage, errb.String())
	}
	if !strings.Contains(errb.String(), "line 3: ts 2026-01-01T00:00:02.000000000Z is earlier than ts 2026-01-01T00:00:03.000000000Z of line 2") {
		t.Errorf("stderr: %s", errb.String())
	}
	if out.Len() > 0 {
		t.Errorf("replay printed steps: %s", out.String())
	}
}

// TestReplayWarningsLimited replays a file of many unknown-kind lines: a few warnings and one
// count, not one warning per line.
func TestReplayWarningsLimited(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.jsonl")
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, `{"kind":"k%d","ts":"2026-01-01T00:00:00Z"}`+"\n", i)
	}
	b.WriteString(`{"kind":"step","ts":"2026-01-01T00:00:01.000000000Z","step":1}` + "\n")
	os.WriteFile(p, []byte(b.String()), 0o644)
	var out, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", p}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	if n := strings.Count(errb.String(), "\n"); n > maxWarnings+2 {
		t.Errorf("%d lines of warnings, want at most %d", n, maxWarnings+2)
	}
	if !strings.Contains(errb.String(), "count=4990") {
		t.Errorf("no count of the warnings not shown:\n%s", errb.String())
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("replay printed %q, want step 1", out.String())
	}
}
