package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/outdir"
	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// liveRun is "vllmstat run" running in this process, ending steps over its API.
type liveRun struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan int
	stderr *syncbuf.Buffer
	api    string
}

// startLive starts "vllmstat run" with args, an API on a free port and no step timer, and
// waits for its API address in the out_dir's lock file.
func startLive(t *testing.T, out string, args ...string) *liveRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &liveRun{t: t, cancel: cancel, done: make(chan int, 1), stderr: &syncbuf.Buffer{}}
	args = append([]string{"--interval", "0.1", "--scrape-timeout", "5s", "--step-every", "0", "--listen", "127.0.0.1:0", "--out", out}, args...)
	go func() { l.done <- runWith(ctx, "run", args, &bytes.Buffer{}, l.stderr) }()
	if !testkit.Poll(10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(out, outdir.LockName))
		var o outdir.Owner
		if json.Unmarshal(b, &o) == nil && o.API != "" && o.PID == os.Getpid() {
			l.api = "http://" + o.API
		}
		return l.api != ""
	}) {
		cancel()
		t.Fatalf("run did not start\n%s", l.stderr.String())
	}
	return l
}

// endStep ends step n over the API.
func (l *liveRun) endStep(n int) {
	l.t.Helper()
	if code, body := l.tryEndStep(n); code != 200 {
		l.t.Fatalf("end step %d: %d %s", n, code, body)
	}
}

// endStepsAtBatches starts fleet, which waits for its driver (sim.Config.WaitForDriver), once
// the run has made its first scrapes, ends a step at the end of each of its next n batches (the
// step numbered as the batch), where the fleet waits for it however late it comes, and returns
// the fleet's totals at each, as its pages show them then.
func (l *liveRun) endStepsAtBatches(fleet *sim.Fleet, n int) []map[string]float64 {
	l.t.Helper()
	l.scrapedBeforeWork(fleet)
	fleet.Resume()
	var atBatch []map[string]float64
	for range n {
		select {
		case b := <-fleet.Batches():
			atBatch = append(atBatch, fleet.Totals())
			l.endStep(b)
			fleet.Resume()
		case <-time.After(2 * time.Minute): // only a hang gets here
			l.stop()
			l.t.Fatalf("no batch finished\n%s", l.stderr.String())
		}
	}
	return atBatch
}

// scrapedBeforeWork waits for the run's first scrapes of every target and fails the test when
// the fleet's first batch had begun by then. Counts a page shows at a target's first scrape are
// its baseline, in no step: the first batch must wait for them (a fleet that waits for its
// driver until it is resumed, or the workload's StartDelay).
func (l *liveRun) scrapedBeforeWork(fleet *sim.Fleet) {
	l.t.Helper()
	if !testkit.Poll(time.Minute, func() bool { return l.liveScrapes() >= len(fleet.URLs()) }) {
		l.stop()
		l.t.Fatalf("the run made no scrapes\n%s", l.stderr.String())
	}
	// vLLM counts a request's prompt tokens at its prefill; SGLang's tokenizer counts them when
	// it finishes, its schedulers' realtime_tokens at every batch.
	totals := fleet.Totals()
	for _, k := range []string{"prompt_tokens", "realtime_tokens/prefill_compute", "realtime_tokens/prefill_cache", "realtime_tokens/decode"} {
		if tokens := totals[k]; tokens != 0 {
			l.stop()
			l.t.Fatalf("the first batch started (%v %s) before the run's first scrapes, which take its counts as their baseline: raise the workload's StartDelay", tokens, k)
		}
	}
}

// tryEndStep asks the API to end step n and returns the answer's status and body.
func (l *liveRun) tryEndStep(n int) (int, string) {
	l.t.Helper()
	resp, err := http.Post(l.api+"/v1/steps/end", "application/json", strings.NewReader(fmt.Sprintf(`{"step": %d}`, n)))
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// liveScrapes is the number of scrapes in the open step.
func (l *liveRun) liveScrapes() int {
	l.t.Helper()
	resp, err := http.Get(l.api + "/v1/live")
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	var live struct {
		Step step.Record `json:"step"`
	}
	json.NewDecoder(resp.Body).Decode(&live)
	return live.Step.Scrapes.OK + live.Step.Scrapes.Failed
}

// metric returns the value of an unlabelled series of the run's /metrics.
func (l *liveRun) metric(name string) string {
	l.t.Helper()
	resp, err := http.Get(l.api + "/metrics")
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// stop stops the run as SIGINT does and returns its exit code.
func (l *liveRun) stop() int {
	l.cancel()
	return <-l.done
}

// vllmstatProcess runs vllmstat with args in a second process (this test binary standing in
// for it) and returns its exit code and stderr.
func vllmstatProcess(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "VLLMSTAT_TEST_AS_CLI=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// TestSecondRunOnOutDirRefused runs a second "vllmstat run" process on the out_dir of a run in
// progress: it is refused, names the run holding the directory, and writes nothing.
func TestSecondRunOnOutDirRefused(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 11)
	out := t.TempDir()
	l := startLive(t, out, "--target", a.url())
	l.endStep(1)
	before, _ := os.ReadFile(filepath.Join(out, "steps.jsonl"))
	rec := filepath.Join(t.TempDir(), "second.jsonl.gz")
	code, stderr := vllmstatProcess(t, "run", "--target", a.url(), "--listen", "", "--out", out, "--record", rec)
	if code != exitError {
		t.Fatalf("second run exited %d, want %d\n%s", code, exitError, stderr)
	}
	for _, want := range []string{"is in use by another vllmstat run", fmt.Sprintf("pid %d", os.Getpid()), "API " + l.api} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(rec); !os.IsNotExist(err) {
		t.Errorf("the refused run created its recording (%v)", err)
	}
	l.endStep(2)
	if code := l.stop(); code != 0 {
		t.Fatalf("first run exited %d\n%s", code, l.stderr.String())
	}
	steps, _ := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(steps) != 2 || !bytes.HasPrefix(mustRead(t, filepath.Join(out, "steps.jsonl")), before) {
		t.Fatalf("steps.jsonl has %d steps, want the first run's 1 and 2 (no step at exit: the trainer ends them)", len(steps))
	}
}

// TestRestartKeepsRecording starts a run, then one that fails to start on a busy port, then a
// successful restart, all with the same recording: nothing is truncated, the restart writes
// the recording's second segment and continues the step numbers, and replaying the recording
// gives the appended steps.jsonl byte for byte.
func TestRestartKeepsRecording(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 12)
	out := t.TempDir()
	rec := filepath.Join(t.TempDir(), "run.jsonl.gz")
	l := startLive(t, out, "--target", a.url(), "--record", rec, "--per-worker")
	l.endStep(1)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	first := mustRead(t, rec)
	steps := mustRead(t, filepath.Join(out, "steps.jsonl"))

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var stderr bytes.Buffer
	code := runWith(context.Background(), "run", []string{"--target", a.url(), "--record", rec, "--per-worker", "--listen", busy.Addr().String(), "--out", out}, &bytes.Buffer{}, &stderr)
	if code != exitError || !strings.Contains(stderr.String(), "address already in use") {
		t.Fatalf("run on a busy port: exit %d\n%s", code, stderr.String())
	}
	if !bytes.Equal(mustRead(t, rec), first) || !bytes.Equal(mustRead(t, filepath.Join(out, "steps.jsonl")), steps) {
		t.Fatal("a run that failed to start changed the recording or steps.jsonl")
	}
	if _, err := os.Stat(record.SegmentPath(rec, 2)); !os.IsNotExist(err) {
		t.Fatalf("a run that failed to start created a segment (%v)", err)
	}

	l = startLive(t, out, "--target", a.url(), "--record", rec, "--per-worker")
	l.endStep(2)
	l.endStep(3)
	if code := l.stop(); code != 0 {
		t.Fatalf("restart exited %d\n%s", code, l.stderr.String())
	}
	if !bytes.Equal(mustRead(t, rec), first) {
		t.Fatal("the restart changed the first segment")
	}
	if !strings.Contains(l.stderr.String(), "writing its next segment") {
		t.Errorf("the restart did not say it writes a new segment:\n%s", l.stderr.String())
	}
	raw := mustRead(t, filepath.Join(out, "steps.jsonl"))
	var replayed, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &replayed, &errb); code != 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	if !bytes.Equal(replayed.Bytes(), raw) || bytes.Count(raw, []byte("\n")) != 3 {
		t.Fatalf("replay of both segments differs from steps.jsonl (steps 1, 2, 3)\nreplay:\n%s\nrun:\n%s", replayed.String(), raw)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
