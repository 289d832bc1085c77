package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

func readSteps(t *testing.T, path string) ([]step.Record, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []step.Record
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r step.Record
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("steps.jsonl line %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out, b
}

// TestRunEndToEnd runs "vllmstat run" in-process against real HTTP servers on loopback, one of
// them a DP=2 0.20 server that restarts and once answers garbage, one a 0.10 server exporting
// old and new names, and one dead port. It checks steps.jsonl against the servers' own truth,
// then replays the recording and compares byte for byte.
func TestRunEndToEnd(t *testing.T) {
	t.Parallel()
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 1)
	a.restarts[9] = true
	a.garbage[5] = true
	b := newFakeServer(t, "prometheus-client-render-vllm-0.10.prom", 2)
	dead := deadAddr(t)

	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.jsonl.gz")
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan int)
	go func() {
		done <- runWith(ctx, "run", []string{
			"--target", a.url(), "--target", b.url(), "--target", dead,
			"--interval", "0.05", "--scrape-timeout", "5s", "--step-every", "300ms", "--listen", "127.0.0.1:0", "--out", dir, "--record", rec, "--per-worker",
		}, &bytes.Buffer{}, &stderr)
	}()
	testkit.WaitFor(t, time.Minute, "server a to be scraped more than 20 times", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.n > 20 })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d\n%s", code, stderr.String())
	}
	steps, raw := readSteps(t, filepath.Join(dir, "steps.jsonl"))
	if len(steps) < 2 {
		t.Fatalf("%d steps, want at least 2\n%s", len(steps), stderr.String())
	}
	sum := map[string]float64{}
	failed := 0
	for i, s := range steps {
		if s.Step != int64(i+1) {
			t.Errorf("step %d numbered %d", i+1, s.Step)
		}
		for k, v := range s.Metrics {
			sum[k] += v
		}
		failed += s.Scrapes.Failed
		if s.Workers > 4 {
			t.Errorf("step %d: %d workers, at most 4 exist", s.Step, s.Workers)
		}
	}
	seen := answersRecorded(t, rec)
	truth := a.truth(seen[a.url()][0], seen[a.url()][1])
	for k, v := range b.truth(seen[b.url()][0], seen[b.url()][1]) {
		truth[k] += v
	}
	for _, fam := range []string{"prefix_cache_queries", "prefix_cache_hits", "num_preemptions", "prompt_tokens", "generation_tokens", "request_success/stop", "request_success/abort"} {
		if got := sum["vllm/"+fam]; got != truth[fam] {
			t.Errorf("sum of step totals of %s = %v, the servers counted %v", fam, got, truth[fam])
		}
	}
	if failed == 0 {
		t.Error("no failed scrapes counted, but one target is dead and one answered garbage")
	}
	for _, want := range []string{"target down", "page is not Prometheus text", "step 1 |"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if n := strings.Count(stderr.String(), `msg="target down" target=http://`+dead+"/metrics"); n != 1 {
		t.Errorf("dead target reported down %d times, want once", n)
	}

	var out, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &out, &errb); code != 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	if !bytes.Equal(out.Bytes(), raw) {
		t.Fatalf("replay differs from steps.jsonl\nreplay:\n%s\nrun:\n%s", out.String(), raw)
	}
}

func TestRunBadConfigExits2(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("targets: [ftp://x/metrics]\nstep_evry: 1s\nvllm_cfg:\n  vllm_metrics_logger_interval: 0\n"), 0o644)
	var stderr bytes.Buffer
	code := runWith(context.Background(), "run", []string{"--config", cfg, "--scrape-timeout", "soon"}, &bytes.Buffer{}, &stderr)
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, want := range []string{"step_evry (line 2): unknown key", `vllm_cfg.vllm_metrics_logger_interval (line 4): "0" is not allowed`, `--scrape-timeout: "soon" is not allowed`, `targets[0]: "ftp://x/metrics"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestRunDisabled(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("policy:\n  generation:\n    vllm_cfg:\n      enable_vllm_metrics_logger: false\n"), 0o644)
	var stderr bytes.Buffer
	code := runWith(context.Background(), "run", []string{"--config", cfg, "--out", filepath.Join(dir, "out")}, &bytes.Buffer{}, &stderr)
	if code != 0 || strings.Count(stderr.String(), "scraping nothing") != 1 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Fatal("a disabled run wrote its output directory")
	}
}

func TestReplayBadInput(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.jsonl")
	os.WriteFile(p, []byte(`{"kind":"scrape","ts":"2026-01-01T00:00:00.000000000Z","target":"http://a/metrics","body":"<html>"}`+"\n"+
		`{"kind":"bogus","ts":"2026-01-01T00:00:01.000000000Z"}`+"\n"+
		`{"kind":"step","ts":"2026-01-01T00:00:02.000000000Z","step":1}`+"\n"+
		"not json\n"), 0o644)
	var out, errb bytes.Buffer
	code := RunContext(context.Background(), []string{"replay", p}, &out, &errb)
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, want := range []string{"line 4", "unknown kind", "page is not Prometheus text", "target=http://a/metrics"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	var r step.Record
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Scrapes.Failed != 1 {
		t.Errorf("step before the bad line: %q (%v)", out.String(), err)
	}
}

// answersRecorded returns, per target, the numbers of the first and last valid pages a
// recording holds.
func answersRecorded(t *testing.T, path string) map[string][2]int {
	t.Helper()
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := map[string][2]int{}
	for {
		e, err := r.Next()
		if err != nil {
			return out
		}
		var n int
		if e.Kind != record.KindScrape || e.Body == nil {
			continue
		}
		if _, err := fmt.Sscanf(*e.Body, "# answer %d", &n); err != nil {
			continue // the garbage page
		}
		fl, ok := out[e.Target]
		if !ok {
			fl[0] = n
		}
		fl[1] = n
		out[e.Target] = fl
	}
}

// TestFailingSinkDoesNotStopRun points the tensorboard sink at a path that cannot be a
// directory: the run goes on, steps.jsonl is complete, and the failure is reported.
func TestFailingSinkDoesNotStopRun(t *testing.T) {
	t.Parallel()
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 3)
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	os.WriteFile(blocker, []byte("x"), 0o644)
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("sinks:\n  - jsonl\n  - {type: tensorboard, dir: "+blocker+"/tb}\n"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan int)
	go func() {
		done <- runWith(ctx, "run", []string{"--config", cfg, "--target", a.url(), "--interval", "0.05", "--step-every", "200ms",
			"--listen", "", "--out", filepath.Join(dir, "out")}, &bytes.Buffer{}, &stderr)
	}()
	if !testkit.Poll(10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "out", "steps.jsonl"))
		return bytes.Count(b, []byte("\n")) >= 3
	}) {
		t.Fatalf("steps not written\n%s", stderr.String())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	for _, want := range []string{"sink cannot start", "sink=tensorboard"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// TestRunServesSelfMetrics checks that the API listener of a real run serves vllmstat's own
// /metrics, with the targets' health and the last closed step.
func TestRunServesSelfMetrics(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 4)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncbuf.Buffer{}
	done := make(chan int)
	go func() {
		done <- runWith(ctx, "run", []string{"--target", a.url(), "--interval", "0.05", "--scrape-timeout", "5s", "--step-every", "0",
			"--listen", "127.0.0.1:0", "--out", dir}, &bytes.Buffer{}, stderr)
	}()
	base := apiURL(t, stderr)
	// end the step once the target has answered twice: then it has an increase to report
	testkit.WaitFor(t, 10*time.Second, "the target to be scraped twice", func() bool {
		resp, err := http.Get(base + "/v1/live")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var live struct {
			Step step.Record `json:"step"`
		}
		json.NewDecoder(resp.Body).Decode(&live)
		return live.Step.Scrapes.OK >= 2
	})
	resp, err := http.Post(base+"/v1/steps/end", "application/json", strings.NewReader(`{"step": 7}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("end step: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"vllmstat_step_number 7",
		`vllmstat_target_up{target="` + a.url() + `"} 1`,
		"vllmstat_steps_closed_total 1",
		"vllmstat_step_vllm_generation_tokens ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d", code)
	}
}
