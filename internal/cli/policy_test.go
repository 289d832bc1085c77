package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/outdir"
	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// policyEngine is a vLLM server on loopback whose page the test sets: its generation tokens,
// and whether it sleeps; with a version (not "") it answers /weight_info, else 404.
type policyEngine struct {
	mu      sync.Mutex
	gen     int
	asleep  bool
	version string
	srv     *httptest.Server
}

func newPolicyEngine(t *testing.T, version string) *policyEngine {
	e := &policyEngine{version: version}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		switch r.URL.Path {
		case "/weight_info":
			if e.version == "" {
				http.NotFound(w, r)
				return
			}
			fmt.Fprintf(w, `{"weight_version": %q}`, e.version)
		case "/metrics":
			awake, off := 1, 0
			if e.asleep {
				awake, off = 0, 1
			}
			fmt.Fprintf(w, `vllm:num_requests_running{engine="0",model_name="m"} 1
vllm:generation_tokens_total{engine="0",model_name="m"} %d
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} %d
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="weights_offloaded"} %d
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="discard_all"} 0
`, e.gen, awake, off)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *policyEngine) set(gen int, asleep bool, version string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gen, e.asleep, e.version = gen, asleep, version
}

// TestPolicyStaleTokensEndToEnd runs "vllmstat run" through RunContext against two engines on
// loopback: one that reports its weight version, one that reports none and sleeps while its
// weights are synced. Every scrape is a boundary scrape (a step end, a phase edge or a publish;
// the interval is an hour), so the test knows each interval's tokens: the stale tokens are
// exact, the trainer's repeated version is 409, and the recording, with its policy and
// engine_version events, replays to steps.jsonl byte for byte.
func TestPolicyStaleTokensEndToEnd(t *testing.T) {
	a := newPolicyEngine(t, "0")
	b := newPolicyEngine(t, "")
	out := t.TempDir()
	rec := filepath.Join(t.TempDir(), "run.jsonl.gz")
	l := startRunContext(t, out, "--interval", "3600", "--target", a.srv.URL+"/metrics", "--target", b.srv.URL+"/metrics",
		"--record", rec, "--per-worker")
	post := func(path, body string, want int) {
		t.Helper()
		resp, err := http.Post(l.api+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != want {
			msg, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s %s: %d %s, want %d", path, body, resp.StatusCode, msg, want)
		}
	}
	// The scrape at start saw 0 and 0.
	a.set(100, false, "0")
	b.set(100, false, "")
	l.endStep(1)                              // no publish: no policy keys
	post("/v1/policy", `{"version": 1}`, 200) // its boundary scrape reads a's 0, b's none
	a.set(150, false, "0")                    // +50 and +30 stale: a holds 0, b one older than 1
	b.set(130, false, "")
	post("/v1/phases/start", `{"phase": "rollout"}`, 200)
	a.set(230, false, "1") // +80 stale: a held 0; it now reports 1
	b.set(170, true, "")   // +40 stale; b sleeps, after the publish
	post("/v1/phases/end", `{"phase": "rollout"}`, 200)
	a.set(260, false, "1") // +30 fresh
	b.set(170, false, "")  // b wakes: version 1 from here
	l.endStep(2)
	post("/v1/policy", `{"version": 1}`, 409)
	a.set(300, false, "1")
	b.set(200, false, "")
	l.endStep(3)
	if code := l.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}

	steps, raw := readSteps(t, filepath.Join(out, "steps.jsonl"))
	if len(steps) != 3 {
		t.Fatalf("%d steps, want 3\n%s", len(steps), raw)
	}
	for k := range steps[0].Metrics {
		if strings.HasPrefix(k, "vllm/policy/") {
			t.Errorf("step 1, before any publish, has %s", k)
		}
	}
	exact := func(n int, key string, want float64) {
		t.Helper()
		if got, ok := steps[n-1].Metrics[key]; !ok || got != want {
			t.Errorf("step %d %s = %v (present %v), want %v", n, key, got, ok, want)
		}
	}
	exact(2, "vllm/generation_tokens", 50+80+30+30+40)
	exact(2, "vllm/policy/stale_generation_tokens", 50+30+80+40)
	exact(2, "vllm/policy/stale_token_fraction", 200.0/230)
	exact(2, "vllm/policy/version", 1)
	exact(2, "vllm/policy/engine_version_min", 1)
	exact(2, "vllm/policy/engine_version_max", 1)
	exact(2, "vllm/policy/engines_behind", 0)
	exact(3, "vllm/policy/stale_generation_tokens", 0)
	exact(3, "vllm/policy/engines_behind", 0)
	if lag := steps[1].Metrics["vllm/policy/publish_lag_s/max"]; !(lag > 0) || math.IsInf(lag, 0) {
		t.Errorf("step 2: publish lag %v, want the time version 1 took to land", lag)
	}
	for _, w := range steps[1].PerWorker {
		if w.Metrics["vllm/policy/version"] != 1 || w.Metrics["vllm/policy/lag"] != 0 {
			t.Errorf("step 2 worker %s: %v", w.Target, w.Metrics)
		}
	}

	var replayed, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &replayed, &errb); code != 0 || errb.Len() > 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	if !bytes.Equal(replayed.Bytes(), raw) {
		t.Fatalf("replay differs from steps.jsonl\nreplay:\n%s\nrun:\n%s", replayed.String(), raw)
	}
	events := recordingKinds(t, rec)
	if events["policy"] != 1 || events["engine_version"] != 2 {
		t.Errorf("recording has %d policy and %d engine_version events, want 1 and 2 (a's 0 and 1)", events["policy"], events["engine_version"])
	}
}

// startRunContext starts "vllmstat run" through RunContext with args, an API on a free port and
// no step timer, and waits for its API address in the out_dir's lock file.
func startRunContext(t *testing.T, out string, args ...string) *liveRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &liveRun{t: t, cancel: cancel, done: make(chan int, 1), stderr: &syncbuf.Buffer{}}
	args = append([]string{"run", "--scrape-timeout", "5s", "--step-every", "0", "--listen", "127.0.0.1:0", "--out", out}, args...)
	go func() { l.done <- RunContext(ctx, args, &bytes.Buffer{}, l.stderr) }()
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

// recordingKinds counts a recording's events by kind.
func recordingKinds(t *testing.T, path string) map[string]int {
	t.Helper()
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := map[string]int{}
	for {
		e, err := r.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		n[e.Kind]++
	}
}
