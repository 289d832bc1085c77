package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

// scaleTargets is how many targets the large-change tests add and remove at once: 50,000, or
// 10,000 under the race detector, which makes every scrape of them (each failed, each logged)
// several times dearer.
func scaleTargets() int {
	if raceEnabled {
		return 10_000
	}
	return 50_000
}

// Bounds of the large-change tests, far above what a run needs (a change of 50,000 targets
// takes it about a second; a probe waits longest while the step end's boundary scrapes of the
// dead targets run, seconds under the race detector): a run that applies a change in time
// quadratic in its size held every call for minutes, at 50,000 targets as at 10,000 under the
// race detector.
const (
	scaleCallLimit  = 60 * time.Second // an API call that changes targets or ends a step
	scaleProbeLimit = 30 * time.Second // /healthz and the target list while a change is applied
	scaleExitLimit  = 60 * time.Second // the exit after SIGTERM, a last boundary scrape included
)

// deadURLs returns n distinct target URLs on an address that refuses connections.
func deadURLs(t *testing.T, n int) []string {
	dead := deadAddr(t)
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://%s/%d", dead, i)
	}
	return urls
}

// targetsBody is the API's {"targets": [...]} body.
func targetsBody(urls []string) string {
	b, _ := json.Marshal(map[string][]string{"targets": urls})
	return string(b)
}

// TestRunLargeTargetChangesAPI adds 50,000 targets to a "vllmstat run" process through the API
// (10,000 per request, under the API's body limit) and removes them again: each call is
// answered, and while the removals are applied the run answers /healthz and the target list
// within seconds and closes a step asked for meanwhile.
func TestRunLargeTargetChangesAPI(t *testing.T) {
	t.Parallel()
	urls := deadURLs(t, scaleTargets())
	dir := t.TempDir()
	// No tick scrapes during the test: only the step end's boundary scrapes and the exit's.
	p := startProcRun(t, "--out", dir, "--interval", "3600", "--scrape-timeout", "1s", "--step-every", "0")
	chunk := min(scaleTargets(), 10_000) // each request under the API's body limit
	for i := 0; i < len(urls); i += chunk {
		code, b, d, err := p.call("POST", "/v1/targets", targetsBody(urls[i:i+chunk]), scaleCallLimit)
		if err != nil || code != http.StatusOK {
			t.Fatalf("adding targets %d to %d: %d %.200s %v\n%s", i, i+chunk, code, b, err, p.stderr.String())
		}
		t.Logf("POST of %d targets (%d to %d): %v", chunk, i, i+chunk, d.Round(time.Millisecond))
	}
	if n, err := p.targetCount(scaleProbeLimit); err != nil || n != scaleTargets() {
		t.Fatalf("%d targets, want %d: %v", n, scaleTargets(), err)
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var fails []string
	fail := func(format string, a ...any) {
		mu.Lock()
		fails = append(fails, fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	wg.Go(func() {
		defer close(done)
		for i := 0; i < len(urls); i += chunk {
			code, b, d, err := p.call("DELETE", "/v1/targets", targetsBody(urls[i:i+chunk]), scaleCallLimit)
			if err != nil || code != http.StatusOK {
				fail("removing targets %d to %d: %d %.200s %v", i, i+chunk, code, b, err)
				return
			}
			t.Logf("DELETE of %d targets (%d to %d): %v", chunk, i, i+chunk, d.Round(time.Millisecond))
		}
	})
	wg.Go(func() {
		time.Sleep(100 * time.Millisecond) // once the removals are under way
		code, b, d, err := p.call("POST", "/v1/steps/end", `{"step": 1}`, scaleCallLimit)
		if err != nil || code != http.StatusOK {
			fail("step end: %d %.200s %v", code, b, err)
			return
		}
		t.Logf("step end during the removals: %v", d.Round(time.Millisecond))
	})
	var probes int
	var slowest time.Duration
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		case <-time.After(50 * time.Millisecond):
		}
		for _, path := range []string{"/healthz", "/v1/targets"} {
			code, _, d, err := p.call("GET", path, "", scaleProbeLimit)
			if err != nil || code != http.StatusOK {
				fail("GET %s while targets are removed: %d %v", path, code, err)
				stop = true
				break
			}
			probes++
			slowest = max(slowest, d)
		}
	}
	wg.Wait()
	if len(fails) > 0 {
		t.Fatalf("%s\n%s", strings.Join(fails, "\n"), tail(p.stderr.String(), 4000))
	}
	t.Logf("%d probes during the removals, the slowest answered in %v", probes, slowest.Round(time.Millisecond))
	if n, err := p.targetCount(scaleProbeLimit); err != nil || n != 0 {
		t.Fatalf("%d targets left, want none: %v", n, err)
	}
	if !p.terminate(scaleExitLimit) || p.code != 0 {
		t.Fatalf("exit after SIGTERM: exited %v, code %d\n%s", p.cmd.ProcessState != nil, p.code, tail(p.stderr.String(), 4000))
	}
}

// TestRunLargeFileSDRemovalExits gives a "vllmstat run" process a file_sd file of 50,000
// targets, deletes the file and sends SIGTERM while the removals are applied: the run exits
// at once, with its open step written.
func TestRunLargeFileSDRemovalExits(t *testing.T) {
	t.Parallel()
	urls := deadURLs(t, scaleTargets())
	dir := t.TempDir()
	sd := filepath.Join(dir, "sd")
	if err := os.Mkdir(sd, 0o755); err != nil {
		t.Fatal(err)
	}
	fleet := filepath.Join(sd, "fleet.json")
	b, _ := json.Marshal([]map[string][]string{{"targets": urls}})
	writeAtomic(t, fleet, string(b))
	cfg := filepath.Join(dir, "vllmstat.yaml")
	if err := os.WriteFile(cfg, []byte("file_sd: [sd/*.json]\nrefresh_interval: 200ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProcRun(t, "--config", cfg, "--out", dir, "--interval", "3600", "--scrape-timeout", "1s", "--step-every", "0")
	var n int
	if !testkit.Poll(2*scaleCallLimit, func() bool {
		n, _ = p.targetCount(scaleProbeLimit)
		return n == scaleTargets()
	}) {
		t.Fatalf("%d targets, want %d\n%s", n, scaleTargets(), tail(p.stderr.String(), 4000))
	}
	if err := os.Remove(fleet); err != nil {
		t.Fatal(err)
	}
	// The file is gone for two reads (200 ms apart) before its targets go: the removals start
	// well within a few seconds.
	testkit.Poll(5*time.Second, func() bool { return strings.Contains(p.stderr.String(), "targets removed") })
	t0 := time.Now()
	if !p.terminate(scaleExitLimit) || p.code != 0 {
		t.Fatalf("exit after SIGTERM during the removals: exited %v, code %d\n%s", p.cmd.ProcessState != nil, p.code, tail(p.stderr.String(), 4000))
	}
	t.Logf("exited %v after SIGTERM", time.Since(t0).Round(time.Millisecond))
	if _, err := os.Stat(filepath.Join(dir, "open-step.json")); err != nil {
		t.Fatalf("the open step was not written at exit: %v\n%s", err, tail(p.stderr.String(), 4000))
	}
}

// tail returns the end of a long log.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
