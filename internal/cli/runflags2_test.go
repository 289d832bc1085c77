package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunTargetsFileAndSinks: --targets-file takes the URLs vllmstat sim prints (indented, with
// comments and blank lines) and host:port, and --sinks adds tracker sinks as demo's does; the
// run scrapes the file's targets and writes the sink's file.
func TestRunTargetsFileAndSinks(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 51)
	b := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 52)
	dir := t.TempDir()
	file := filepath.Join(dir, "targets.txt")
	hostPort := strings.TrimSuffix(strings.TrimPrefix(b.url(), "http://"), "/metrics")
	content := "# the fleet\nSimulated vLLM fleet lines are not targets: comment them out\n"
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	code := runWith(context.Background(), "run", []string{"--targets-file", file, "--listen", "", "--out", filepath.Join(dir, "bad")}, &bytes.Buffer{}, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "targets.txt:2:") {
		t.Fatalf("a file with a bad line: exit %d, stderr %s", code, errb.String())
	}
	content = "# the fleet\n  " + a.url() + "\n\n" + hostPort + "   # the second server\n"
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	l := startLive(t, out, "--targets-file", file, "--sinks", "csv", "--per-worker")
	t.Cleanup(func() { t.Log(l.stderr.String()) })
	l.endStep(1)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	steps, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(steps) != 1 || steps[0].Scrapes.Failed != 0 {
		t.Fatalf("steps %+v: want one step without failed scrapes", steps)
	}
	scraped := map[string]bool{}
	for _, w := range steps[0].PerWorker {
		scraped[w.Target] = true
	}
	if !scraped[a.url()] || !scraped[b.url()] || len(scraped) != 2 {
		t.Fatalf("workers of %v: want both targets of the file scraped", scraped)
	}
	if _, err := os.Stat(filepath.Join(out, "steps.csv")); err != nil {
		t.Fatalf("--sinks csv wrote no steps.csv: %v", err)
	}
}
