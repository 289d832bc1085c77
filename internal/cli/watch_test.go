package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// watchSession runs watch in-process on a fake clock for rounds rounds (the one at start and
// one per tick), then stops it as Ctrl-C does, and returns what it printed.
func watchSession(t *testing.T, args []string, rounds int) (stdout, stderr string) {
	t.Helper()
	return watchSessionRows(t, args, rounds, 1)
}

// watchSessionRows is watchSession of a watch that prints perRound rows a round.
func watchSessionRows(t *testing.T, args []string, rounds, perRound int) (stdout, stderr string) {
	t.Helper()
	fc := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	done := make(chan int)
	go func() { done <- watchWith(ctx, args, out, errb, fc) }()
	for i := 1; i <= rounds; i++ {
		if i > 1 {
			fc.Advance(500 * time.Millisecond)
		}
		// Each round prints a row; only then does the next tick start a round of its own.
		if !testkit.Poll(10*time.Second, func() bool { return len(watchRows(out.String())) == i*perRound }) {
			t.Fatalf("round %d did not print its row:\n%s\n%s", i, out.String(), errb.String())
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	return out.String(), errb.String()
}

// watchRows returns the rows of watch's output on a pipe: the lines between the header and the
// session summary.
func watchRows(text string) []string {
	lines := strings.Split(text, "\n")
	var rows []string
	for _, l := range lines[1:] {
		if l == "" {
			break
		}
		rows = append(rows, l)
	}
	return rows
}

func TestWatchOnPipe(t *testing.T) {
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 1)
	dead := deadAddr(t)
	text, errs := watchSession(t, []string{"--interval", "0.5", a.url(), dead}, 5)
	if strings.Contains(text, "\x1b") {
		t.Fatal("escape sequences on a pipe")
	}
	header := strings.Split(text, "\n")[0]
	if strings.Join(strings.Fields(header), " ") != "time workers down run wait kv_mean kv_max hit% preempt gen_tok/s prompt_tok/s" {
		t.Fatalf("header %q", header)
	}
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for i, l := range watchRows(text) {
		if len(l) != len(header) {
			t.Errorf("row %q is not aligned with the header (%d vs %d)", l, len(l), len(header))
		}
		f := strings.Fields(l)
		if want := start.Add(time.Duration(i) * 500 * time.Millisecond).Local().Format("15:04:05"); f[0] != want {
			t.Errorf("row %d at %s, want the clock's %s", i, f[0], want)
		}
		if f[1] != "2/2" || f[2] != "1" {
			t.Errorf("row %q: want workers 2/2 and one target down", l)
		}
	}
	// The session is one step record's keys, over the four intervals between the five rounds.
	for _, want := range []string{"\nsession: 2.0s, 2 workers, 5 scrapes ok, 5 failed (refused 5)\n", "\n  vllm/generation_tokens  "} {
		if !strings.Contains(text, want) {
			t.Errorf("session summary lacks %q:\n%s", want, text)
		}
	}
	// The dead target's reason, once, on stderr.
	if n := strings.Count(errs, "msg=\"target down\""); n != 1 || !strings.Contains(errs, "target=http://"+dead+"/metrics reason=refused") {
		t.Errorf("stderr %q: want one target down line for %s with reason=refused", errs, dead)
	}
}

// TestWatchLogsDownReasons checks that a target's failures are logged with their reason when
// it goes down, not again while it stays down, and that its return is logged too.
func TestWatchLogsDownReasons(t *testing.T) {
	flaky := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 2)
	flaky.garbage[1], flaky.garbage[2] = true, true // an HTML error page for the first two scrapes
	dead := deadAddr(t)
	text, errs := watchSession(t, []string{"--interval", "0.5", flaky.url(), dead}, 4)
	deadURL := "http://" + dead + "/metrics"
	line := regexp.MustCompile(`msg="([^"]+)" target=(\S+)(?: reason=(\S+))?`)
	var events []string
	for _, m := range line.FindAllStringSubmatch(errs, -1) {
		who := map[string]string{flaky.url(): "flaky", deadURL: "dead"}[m[2]]
		events = append(events, strings.TrimSpace(m[1]+" "+who+" "+m[3]))
	}
	want := []string{"target down flaky parse", "target down dead refused", "target up flaky"}
	if strings.Join(events, "; ") != strings.Join(want, "; ") {
		t.Errorf("stderr events %q, want %q\n%s", events, want, errs)
	}
	if !strings.Contains(text, "failed (parse 2, refused 4)") {
		t.Errorf("session summary does not count the failures by reason:\n%s", text)
	}
}

// TestWatchOnTerminal runs the binary under a pseudo-terminal (util-linux script) and checks
// that per-worker rows are redrawn in place.
func TestWatchOnTerminal(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("script (util-linux) is needed for the terminal test")
		}
		t.Skip("SKIPPING: script (util-linux) not found; the terminal test needs a pseudo-terminal")
	}
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The test binary is vllmstat (TestMain): a go build here would compile every package once
	// more, in a configuration no other test uses.
	cmd := exec.CommandContext(ctx, scriptBin, "-qfec", os.Args[0]+" watch --per-worker --interval 0.2 "+a.url(), "/dev/null")
	cmd.Env = append(os.Environ(), "VLLMSTAT_TEST_AS_CLI=1")
	out := &syncbuf.Buffer{}
	cmd.Stdout = out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Two drawings of the per-worker rows: the second one redraws the first in place.
	if !testkit.Poll(20*time.Second, func() bool { return strings.Count(out.String(), "\x1b[4A") >= 1 }) {
		t.Fatalf("no in-place redraw on a terminal:\n%q", out.String())
	}
	stdin.Write([]byte{3}) // Ctrl-C on the terminal: SIGINT to the foreground process
	cmd.Wait()
	text := out.String()
	if !strings.Contains(text, "\x1b[4A") { // header + 2 engines + "all" row, redrawn
		t.Fatalf("no in-place redraw on a terminal:\n%q", text)
	}
	if !strings.Contains(text, "session:") {
		t.Fatalf("no session summary after Ctrl-C:\n%q", text)
	}
}

// TestSessionPhases: a session record with phases lists the whole session's keys first, then
// each phase, the rollout first with its summary figures, and its keys as trackers log them.
func TestSessionPhases(t *testing.T) {
	rec := &step.Record{DurationS: 30, Workers: 2, Metrics: map[string]float64{
		"vllm/generation_tokens_per_s": 400, "vllm/prefix_cache_hit_rate": 0.5,
	}, Phases: map[string]*step.Phase{
		"rollout": {DurationS: 4.2, Intervals: 1, Metrics: map[string]float64{
			"vllm/generation_tokens_per_s": 2345, "vllm/prefix_cache_hit_rate": 0.81, "vllm/kv_cache_usage_perc/mean": 0.61,
		}},
		"eval": {DurationS: 3, Intervals: 2, Metrics: map[string]float64{"vllm/generation_tokens_per_s": 1500}},
	}}
	rec.Scrapes.OK = 60
	var b bytes.Buffer
	printSession(&b, rec, "vllm", "")
	want := `
session: 30.0s, 2 workers, 60 scrapes ok, 0 failed
  vllm/generation_tokens_per_s           400
  vllm/prefix_cache_hit_rate             0.5
  rollout 4.2s gen 2345 tok/s hit 81.0% kv 0.61/- (open once)
  vllm/rollout/generation_tokens_per_s   2345
  vllm/rollout/kv_cache_usage_perc/mean  0.61
  vllm/rollout/prefix_cache_hit_rate     0.81
  eval 3.0s (open 2 times)
  vllm/eval/generation_tokens_per_s      1500
`
	if b.String() != want {
		t.Errorf("session summary:\n%s\nwant:\n%s", b.String(), want)
	}
	// Without phases, the keys alone, as before.
	rec.Phases = nil
	b.Reset()
	printSession(&b, rec, "vllm", " (refused 1)")
	if want := "\nsession: 30.0s, 2 workers, 60 scrapes ok, 0 failed (refused 1)\n  vllm/generation_tokens_per_s  400\n  vllm/prefix_cache_hit_rate    0.5\n"; b.String() != want {
		t.Errorf("session summary without phases:\n%q\nwant:\n%q", b.String(), want)
	}
}

// TestWatchSGLangPerWorker: watch --per-worker against an SGLang server with data parallelism
// (a captured page whose tokenizer counts 1000 prompt tokens and 600 cached ones per answer):
// the tokenizer's row, which has the server's counts and no engine gauge, shows no running or
// waiting requests it does not have, and the hit rate is SGLang's, cached over prompt tokens.
func TestWatchSGLangPerWorker(t *testing.T) {
	body := mustRead(t, filepath.Join("..", "page", "testdata", "prometheus-client-render-sglang-tp2-pp2-dp2.prom"))
	prompt := regexp.MustCompile(`(?m)^(sglang:prompt_tokens_total\{[^}]*\}) \S+$`)
	cached := regexp.MustCompile(`(?m)^(sglang:cached_tokens_total\{cache_source="device"[^}]*\}) \S+$`)
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		page := prompt.ReplaceAll(body, []byte(fmt.Sprintf("${1} %d", 100000+1000*n)))
		page = cached.ReplaceAll(page, []byte(fmt.Sprintf("${1} %d", 50000+600*n)))
		mu.Unlock()
		w.Write(page)
	}))
	defer srv.Close()
	text, _ := watchSessionRows(t, []string{"--per-worker", "--interval", "0.5", srv.URL + "/metrics"}, 3, 4)
	rows := watchRows(text)
	if len(rows) != 12 {
		t.Fatalf("%d rows, want a tokenizer, 2 DP ranks and all, in 3 rounds:\n%s", len(rows), text)
	}
	for _, l := range rows[4:] { // the rounds after the first have counts
		f := strings.Fields(l)
		who, run, wait, hit := f[1], f[3], f[4], f[7]
		switch who {
		case "0": // the tokenizer, first by its labels
			if run != "-" || wait != "-" || hit != "60.0" {
				t.Errorf("tokenizer row %q: want run -, wait -, hit 60.0", l)
			}
		case "all":
			if run == "-" || hit != "60.0" {
				t.Errorf("all row %q: want the DP ranks' running requests and hit 60.0", l)
			}
		default:
			if run == "-" || hit != "-" {
				t.Errorf("DP rank row %q: want its running requests, no hit rate", l)
			}
		}
	}
}
