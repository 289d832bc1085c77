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

// TestRunConfigProblemsAtOnce: a config file with a typo at the top and problems in its sinks
// (an entry without a type, a typo of a sink type, a typo of a csv setting) gets every problem
// in one answer, each sink's at its place in the list, from run and from demo alike, and
// nothing is created.
func TestRunConfigProblemsAtOnce(t *testing.T) {
	file := filepath.Join("..", "config", "testdata", "sinks.bad.yaml")
	out := filepath.Join(t.TempDir(), "out")
	for _, args := range [][]string{
		{"run", "--config", file, "--listen", "", "--out", out},
		{"demo", "--config", file, "--out", out},
	} {
		code, _, errs := runCLI(args...)
		if code != exitUsage {
			t.Fatalf("%s: exit %d, want %d\n%s", args[0], code, exitUsage, errs)
		}
		for _, want := range []string{
			"vllmstat " + args[0] + ": invalid configuration:\n",
			"\n  " + file + ": scrape_timout (line 4): unknown key",
			"\n  " + file + ": sinks[0] (line 6): a sink with settings needs a type key",
			"\n  sinks[1] (line 7): unknown sink type \"tensorbaord\"; known: csv, jsonl, otlp, remote_write, tensorboard, wandb; did you mean tensorboard?",
			"\n  sinks[2].kyes (line 8): unknown setting of a csv sink: the settings are type, keys, include, exclude, path; did you mean keys?",
		} {
			if !strings.Contains(errs, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", args[0], want, errs)
			}
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused run created %s", out)
	}
}

// TestRunWarnsUnknownCSVKeys: a csv sink's key that no step record has is warned of at start,
// once, with the nearest key one has; keys vllmstat makes are not.
func TestRunWarnsUnknownCSVKeys(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "vllmstat.yaml")
	yaml := "sinks: [{type: csv, keys: [vllm/prefix_cache_hit_rat, prefix_cache_hit_rate, vllm/no_such_key, sglang/num_preemptions, vllm/rollout/kv_cache_usage_perc/mean]}]\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLive(t, filepath.Join(dir, "out"), "--config", cfg)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	logs := l.stderr.String()
	for _, want := range []string{
		`key=vllm/prefix_cache_hit_rat did_you_mean=vllm/prefix_cache_hit_rate`,
		`key=prefix_cache_hit_rate did_you_mean=vllm/prefix_cache_hit_rate`,
		"key=vllm/no_such_key\n",
	} {
		if strings.Count(logs, want) != 1 {
			t.Errorf("stderr has %q %d times, want once:\n%s", want, strings.Count(logs, want), logs)
		}
	}
	for _, known := range []string{"sglang/num_preemptions", "vllm/rollout/kv_cache_usage_perc/mean"} {
		if strings.Contains(logs, "key="+known) {
			t.Errorf("a warning of %s, a key vllmstat makes:\n%s", known, logs)
		}
	}
}
