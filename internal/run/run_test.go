package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/outdir"
	"github.com/vllmstat/vllmstat/internal/step"
)

// testConfig is a run's configuration into out with the given targets, no API and no plots.
func testConfig(t *testing.T, out string, targets ...string) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.OutDir = out
	cfg.Listen = ""
	cfg.Targets = config.TargetsOf(targets)
	cfg.Interval = 0.05
	cfg.StepEvery = 0
	if len(targets) == 0 {
		cfg.Listen = "127.0.0.1:0" // a run with no targets needs the API to get some
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// stepsPath is out's steps.jsonl.
func stepsPath(out string) string { return filepath.Join(out, "steps.jsonl") }

// TestStartRefusedLetsGo: a run whose API address is taken is refused before it creates any
// file, and lets the out_dir go; one whose recording cannot be created closes what it opened
// and lets the out_dir go too, so that the next run there starts.
func TestStartRefusedLetsGo(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	out := t.TempDir()

	cfg := testConfig(t, out)
	cfg.Listen = taken.Addr().String()
	err = New(cfg, Options{}).Start(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "listen for the API on "+cfg.Listen) {
		t.Fatalf("Start with the API's address taken: %v", err)
	}
	if _, err := os.Stat(stepsPath(out)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a run refused at its API's address created steps.jsonl (%v)", err)
	}

	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = testConfig(t, out)
	cfg.Record = filepath.Join(notDir, "rec.jsonl")
	if err := New(cfg, Options{}).Start(context.Background()); err == nil {
		t.Fatal("Start with a recording under a file succeeded")
	}

	p := New(testConfig(t, out), Options{})
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("the out_dir is still held after refused runs: %v", err)
	}
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestStop: while a run runs, its API answers and its out_dir is held; stopping it writes the
// step open at exit apart (steps end only on request), with every scrape taken, then stops the
// API and lets the out_dir go.
func TestStop(t *testing.T) {
	var answers atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := answers.Add(1)
		fmt.Fprintf(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} %d\n", 10*n)
	}))
	defer srv.Close()
	out := t.TempDir()
	cfg := testConfig(t, out, srv.URL+"/metrics")
	cfg.Listen = "127.0.0.1:0"
	var steps atomic.Int64
	p := New(cfg, Options{OnStep: func(*step.Record) { steps.Add(1) }})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := outdir.Acquire(out, outdir.Self(time.Now())); err == nil {
		t.Fatal("the out_dir is not held while the run runs")
	}
	api := "http://" + p.Addr() + "/v1/targets"
	resp, err := http.Get(api)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, openStepFile))
	var open step.Record
	if err == nil {
		err = json.Unmarshal(b, &open)
	}
	if err != nil || open.Scrapes.OK != int(answers.Load()) || steps.Load() != 0 {
		t.Errorf("open-step.json (%v) has %d scrapes (%d failed) of %d answers, %d steps; want all of them and no step: %s", err, open.Scrapes.OK, open.Scrapes.Failed, answers.Load(), steps.Load(), b)
	}
	if resp, err := http.Get(api); err == nil {
		resp.Body.Close()
		t.Error("the API still answers after Stop")
	}
	lock, err := outdir.Acquire(out, outdir.Self(time.Now()))
	if err != nil {
		t.Fatalf("the out_dir is held after Stop: %v", err)
	}
	lock.Release()
}
