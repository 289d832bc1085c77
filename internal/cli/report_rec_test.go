package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportFromRecording: "vllmstat report RECORDING" replays the recording and writes the
// report of its steps beside it, instead of failing with "not a directory".
func TestReportFromRecording(t *testing.T) {
	src := filepath.Join("testdata", "recordings", "one-run")
	entries, err := os.ReadDir(src)
	if err != nil || len(entries) == 0 {
		t.Fatalf("no recordings in %s: %v", src, err)
	}
	var rec string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".jsonl.gz") || strings.HasSuffix(e.Name(), ".jsonl") {
			rec = e.Name()
			break
		}
	}
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(src, rec))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, rec)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"report", path}, &out, &errb); code != 0 {
		t.Fatalf("report of a recording exited %d: %s", code, errb.String())
	}
	want := recordingReportPath(path)
	if strings.TrimSpace(out.String()) != want || !strings.HasSuffix(want, ".report.html") {
		t.Fatalf("report written to %q, want %q", out.String(), want)
	}
	var steps bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", path}, &steps, &bytes.Buffer{}); code != 0 {
		t.Fatal("replay failed")
	}
	html, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	n := bytes.Count(steps.Bytes(), []byte("\n"))
	if n == 0 || !bytes.Contains(html, []byte(`"steps":[1`)) {
		t.Fatalf("the report of %d replayed steps holds no step", n)
	}
}

// TestProgress: the line shows bytes of the total, the share and the rate, redrawn at most every
// progressEvery, and is cleared when done; a writer that is not a terminal gets nothing.
func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	p := &progress{w: &buf, what: "replay", total: 40 << 20, now: func() time.Time { return now }, start: t0}
	now = t0.Add(time.Second)
	p.update(10 << 20)
	if got := buf.String(); got != "\r\033[Kreplay: 10.0 MiB of 40.0 MiB (25%), 10.0 MiB/s" {
		t.Fatalf("line %q", got)
	}
	now = now.Add(progressEvery / 2)
	p.update(11 << 20)
	if strings.Contains(buf.String(), "11.0 MiB") {
		t.Fatal("redrawn sooner than progressEvery")
	}
	p.done()
	if !strings.HasSuffix(buf.String(), "\r\033[K") {
		t.Fatalf("not cleared: %q", buf.String())
	}
	var file bytes.Buffer
	q := newProgress(&file, "replay", 1)
	q.update(1)
	q.done()
	if file.Len() != 0 {
		t.Fatalf("progress on a writer that is not a terminal: %q", file.String())
	}
}
