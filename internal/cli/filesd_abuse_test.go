package cli

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestRunFileSDSkipsFIFO gives a "vllmstat run" process a file_sd glob that matches a FIFO
// nobody writes to, before a good file: the good file's target is scraped, the FIFO is logged
// once, by path, as not a regular file, and SIGTERM ends the run at once.
func TestRunFileSDSkipsFIFO(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveTokens(t, l)
	dir := t.TempDir()
	sd := filepath.Join(dir, "sd")
	if err := os.Mkdir(sd, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(sd, "a.json") // read before b.json: files are read in name order
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("SKIPPED: cannot make a FIFO here: %v", err)
	}
	writeAtomic(t, filepath.Join(sd, "b.json"), fmt.Sprintf(`[{"targets": [%q]}]`, srv.url))
	cfg := filepath.Join(dir, "vllmstat.yaml")
	if err := os.WriteFile(cfg, []byte("file_sd: [sd/*.json]\nrefresh_interval: 100ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProcRun(t, "--config", cfg, "--out", dir, "--interval", "0.1", "--step-every", "0")
	var n int
	if !testkit.Poll(20*time.Second, func() bool {
		n, _ = p.targetCount(5 * time.Second)
		return n == 1
	}) {
		t.Fatalf("%d targets, want b.json's one\n%s", n, p.stderr.String())
	}
	// Two refreshes later (each seen by a target it adds), the FIFO is still said once.
	for i, name := range []string{"c.json", "d.json"} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		writeAtomic(t, filepath.Join(sd, name), fmt.Sprintf(`[{"targets": [%q]}]`, serveTokens(t, l).url))
		if !testkit.Poll(20*time.Second, func() bool {
			n, _ = p.targetCount(5 * time.Second)
			return n == 2+i
		}) {
			t.Fatalf("%d targets after writing %s, want %d\n%s", n, name, 2+i, p.stderr.String())
		}
	}
	log := p.stderr.String()
	if c := strings.Count(log, "not a regular file"); c != 1 || !strings.Contains(log, "path="+fifo) {
		t.Errorf("the FIFO is logged %d times, want once with its path\n%s", c, log)
	}
	if !p.terminate(20*time.Second) || p.code != 0 {
		t.Fatalf("exit after SIGTERM: exited %v, code %d\n%s", p.cmd.ProcessState != nil, p.code, p.stderr.String())
	}
}

// TestRunFileSDRewrittenInPlace rewrites a file_sd YAML file in place, as an editor or a
// templating tool without a rename does: truncated, half written (a valid list of fewer
// targets) for longer than a refresh, then completed. The targets missing from the half file
// keep their workers, and every target's tokens served meanwhile are counted in the step.
func TestRunFileSDRewrittenInPlace(t *testing.T) {
	t.Parallel()
	var ss []*tokenServer
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, serveTokens(t, l))
	}
	a, b, c := ss[0], ss[1], ss[2]
	hp := func(s *tokenServer) string {
		return strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/metrics")
	}
	dir := t.TempDir()
	sd := filepath.Join(dir, "sd")
	if err := os.Mkdir(sd, 0o755); err != nil {
		t.Fatal(err)
	}
	fleet := filepath.Join(sd, "fleet.yaml")
	half := fmt.Sprintf("- labels: {team: x}\n  targets:\n    - %s\n", hp(a))
	rest := fmt.Sprintf("    - %s\n    - %s\n", hp(b), hp(c))
	writeAtomic(t, fleet, half+rest)
	cfg := filepath.Join(dir, "vllmstat.yaml")
	// Files are read every 500 ms; the half file stays 750 ms, so one or two reads see it.
	const refresh = 500 * time.Millisecond
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("file_sd: [sd/*.yaml]\nrefresh_interval: %v\n", refresh)), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "rec.jsonl")
	r := startDiscRun(t, "--config", cfg, "--out", dir, "--record", rec, "--interval", "1")
	r.waitTargets(sorted(a.url, b.url, c.url)...)
	for _, s := range ss {
		s.tokens.Add(10)
	}
	checkStep(t, r.endStep(1), 30, map[string]float64{a.url: 10, b.url: 10, c.url: 10})

	// Tokens are served all along the rewrite, by every engine.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				for _, s := range ss {
					s.tokens.Add(1)
				}
			}
		}
	})
	f, err := os.OpenFile(fleet, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(half); err != nil {
		t.Fatal(err)
	}
	time.Sleep(refresh * 3 / 2) // the file stays half written longer than a refresh: the time is the case under test
	if _, err := f.WriteString(rest); err != nil {
		t.Fatal(err)
	}
	f.Close()
	time.Sleep(2 * refresh) // two refreshes read the whole file while tokens are served: no event marks a refresh
	close(stop)
	wg.Wait()
	r.waitTargets(sorted(a.url, b.url, c.url)...)
	want := map[string]float64{}
	total := 0.0
	for _, s := range ss {
		want[s.url] = float64(s.tokens.Load() - 1010)
		total += want[s.url]
	}
	checkStep(t, r.endStep(2), total, want)
	r.stop()
	replayEquals(t, rec, filepath.Join(dir, "steps.jsonl"))
}
