package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunReport(t *testing.T) {
	dir := t.TempDir()
	line := `{"step":1,"start":"2025-06-01T12:00:00Z","end":"2025-06-01T12:00:30Z","duration_s":30,"scrapes":{"ok":60,"failed":0},"workers":2,"metrics":{"vllm/prefix_cache_hit_rate":0.5}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "steps.jsonl"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "r.html")
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"help", []string{"-h"}, exitOK, "Usage: vllmstat report RUN_DIR", ""},
		{"no run folder", nil, exitUsage, "", "give one RUN_DIR"},
		{"two run folders", []string{dir, dir}, exitUsage, "", "give one RUN_DIR"},
		{"not a run", []string{t.TempDir()}, exitUsage, "", "no steps.jsonl"},
		{"default output", []string{dir}, exitOK, filepath.Join(dir, "report.html"), ""},
		{"-o after the folder", []string{dir, "-o", out}, exitOK, out, ""},
		{"-o before the folder", []string{"-o", out, dir}, exitOK, out, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runReport(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stdout.String(), tt.stdout) || !strings.Contains(stderr.String(), tt.stderr) {
				t.Fatalf("code %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
			}
			if code == exitOK && tt.name != "help" {
				page, err := os.ReadFile(strings.TrimSpace(stdout.String()))
				if err != nil || !bytes.Contains(page, []byte("prefix_cache_hit_rate")) {
					t.Errorf("report not written: %v", err)
				}
			}
		})
	}
}
