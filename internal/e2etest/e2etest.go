// Package e2etest runs vllmstat end to end, in-process, for the tests of the packages whose
// output other programs read (the tracker sinks): the demo, or "vllmstat run" against a
// simulated fleet, and the step records it wrote. Only tests import it.
package e2etest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/cli"
	"github.com/vllmstat/vllmstat/internal/report"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
)

// Demo runs a small, fast "vllmstat demo" (2 steps, 1 server of 2 engines) writing to out, with
// extra flags, and fails the test if it does not exit 0.
func Demo(t testing.TB, out string, extra ...string) {
	t.Helper()
	args := append([]string{"demo", "--steps", "2", "--servers", "1", "--dp", "2", "--speed", "6", "--interval", "0.2", "--out", out}, extra...)
	var stdout, stderr bytes.Buffer
	if code := cli.Run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("demo exited %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
}

// Run starts a simulated fleet (1 server of 2 engines) and "vllmstat run" on it with the YAML
// config yaml, closing a step every second, until steps.jsonl has minSteps lines; then stops it
// as SIGINT would and fails the test if it does not exit 0.
func Run(t testing.TB, out, yaml string, minSteps int) {
	t.Helper()
	sc := sim.DefaultConfig()
	sc.Servers, sc.DP, sc.Port, sc.Speed = 1, 2, 0, 4
	fleet, err := sim.Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	cfg := filepath.Join(out, "vllmstat.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var stderr bytes.Buffer
	go func() {
		done <- cli.RunContext(ctx, []string{"run", "--config", cfg, "--target", fleet.URLs()[0], "--interval", "0.2",
			"--scrape-timeout", "2s", "--step-every", "1s", "--listen", "", "--out", out}, &bytes.Buffer{}, &stderr)
	}()
	steps := filepath.Join(out, "steps.jsonl")
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if b, _ := os.ReadFile(steps); bytes.Count(b, []byte("\n")) >= minSteps {
			break
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d\n%s", code, stderr.String())
	}
}

// Steps returns the records of out/steps.jsonl.
func Steps(t testing.TB, out string) []*step.Record {
	t.Helper()
	rs, err := report.ReadSteps(filepath.Join(out, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
