package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/discovery/dnstest"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// tokenServer serves a generation counter that the test moves.
type tokenServer struct {
	tokens atomic.Int64
	srv    *http.Server
	url    string
}

func serveTokens(t *testing.T, l net.Listener) *tokenServer {
	s := &tokenServer{url: "http://" + l.Addr().String() + "/metrics"}
	s.tokens.Store(1000)
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} %d\n", s.tokens.Load())
	})}
	go s.srv.Serve(l)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// samePortServers starts n token servers on 127.0.0.1, 127.0.0.2, … at one port, as the
// engines behind one DNS name listen. All of 127/8 is loopback on Linux.
func samePortServers(t *testing.T, n int) (int, []*tokenServer) {
	for range 20 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := first.Addr().(*net.TCPAddr).Port
		ls := []net.Listener{first}
		for i := 2; i <= n; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:%d", i, port))
			if err != nil {
				break
			}
			ls = append(ls, l)
		}
		if len(ls) == n {
			var out []*tokenServer
			for _, l := range ls {
				out = append(out, serveTokens(t, l))
			}
			return port, out
		}
		for _, l := range ls {
			l.Close()
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("cannot listen on 127.0.0.2 and 127.0.0.3 at one port")
	}
	t.Skip("SKIPPED: this system cannot listen on 127.0.0.2 and 127.0.0.3 (only Linux has all of 127/8 on loopback)")
	return 0, nil
}

// discRun is a "vllmstat run" in-process, reached through its API.
type discRun struct {
	t      *testing.T
	base   string
	stderr *syncbuf.Buffer
	cancel context.CancelFunc
	done   chan int
	exited bool
}

func startDiscRun(t *testing.T, args ...string) *discRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &discRun{t: t, stderr: &syncbuf.Buffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() {
		r.done <- runWith(ctx, "run", append([]string{"--interval", "0.05", "--scrape-timeout", "5s", "--step-every", "0",
			"--listen", "127.0.0.1:0", "--per-worker"}, args...), &bytes.Buffer{}, r.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if !r.exited {
			<-r.done
		}
	})
	if !testkit.Poll(10*time.Second, func() bool {
		m := regexp.MustCompile(`api listening" url=(\S+)`).FindStringSubmatch(r.stderr.String())
		if m != nil {
			r.base = m[1]
		}
		return m != nil
	}) {
		t.Fatalf("no api address\n%s", r.stderr.String())
	}
	return r
}

type liveState struct {
	Step struct {
		Metrics map[string]float64 `json:"metrics"`
	} `json:"step"`
	Targets []struct {
		URL     string            `json:"url"`
		Scrapes int               `json:"scrapes"`
		Labels  map[string]string `json:"labels"`
	} `json:"targets"`
}

func (r *discRun) live() liveState {
	var l liveState
	resp, err := http.Get(r.base + "/v1/live")
	if err != nil {
		return l
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&l)
	return l
}

// waitTargets waits until the scraped targets are exactly want (URLs, sorted), each scraped at least
// once; it fails the test after a generous timeout.
func (r *discRun) waitTargets(want ...string) {
	r.t.Helper()
	var got []string
	if !testkit.Poll(20*time.Second, func() bool {
		l := r.live()
		got = got[:0]
		scraped := true
		for _, t := range l.Targets {
			got = append(got, t.URL)
			scraped = scraped && t.Scrapes > 0
		}
		slices.Sort(got)
		return scraped && strings.Join(got, " ") == strings.Join(want, " ")
	}) {
		r.t.Fatalf("targets %v, want %v scraped\n%s", got, want, r.stderr.String())
	}
}

// waitTokens waits until the open step has counted n generation tokens.
func (r *discRun) waitTokens(n float64) {
	r.t.Helper()
	if !testkit.Poll(20*time.Second, func() bool { return r.live().Step.Metrics["vllm/generation_tokens"] == n }) {
		r.t.Fatalf("the open step has %v tokens, want %v\n%s", r.live().Step.Metrics["vllm/generation_tokens"], n, r.stderr.String())
	}
}

type stepRec struct {
	Step      int64              `json:"step"`
	Workers   int                `json:"workers"`
	Metrics   map[string]float64 `json:"metrics"`
	PerWorker []struct {
		Target       string             `json:"target"`
		Metrics      map[string]float64 `json:"metrics"`
		TargetLabels map[string]string  `json:"target_labels"`
	} `json:"per_worker"`
}

func (r *discRun) endStep(n int64) stepRec {
	r.t.Helper()
	resp, err := http.Post(r.base+"/v1/steps/end", "application/json", strings.NewReader(fmt.Sprintf(`{"step": %d}`, n)))
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var rec stepRec
	if err := json.NewDecoder(resp.Body).Decode(&rec); err != nil || resp.StatusCode != http.StatusOK {
		r.t.Fatalf("end step %d: %d %v", n, resp.StatusCode, err)
	}
	return rec
}

// stop ends the run as SIGINT does and checks that it exits 0.
func (r *discRun) stop() {
	r.t.Helper()
	r.cancel()
	code := <-r.done
	r.exited = true
	if code != exitOK {
		r.t.Fatalf("run exited %d\n%s", code, r.stderr.String())
	}
}

// checkStep compares a step's total and per-target generation tokens with what the servers
// served.
func checkStep(t *testing.T, rec stepRec, total float64, perTarget map[string]float64) {
	t.Helper()
	if got := rec.Metrics["vllm/generation_tokens"]; got != total {
		t.Errorf("step %d: %v tokens, want %v", rec.Step, got, total)
	}
	got := map[string]float64{}
	for _, w := range rec.PerWorker {
		got[w.Target] = w.Metrics["vllm/generation_tokens"]
	}
	if fmt.Sprint(got) != fmt.Sprint(perTarget) || rec.Workers != len(perTarget) {
		t.Errorf("step %d: workers %d, per target %v; want %v", rec.Step, rec.Workers, got, perTarget)
	}
}

// replayEquals replays the recording and compares it with steps.jsonl byte for byte.
func replayEquals(t *testing.T, rec, steps string) {
	t.Helper()
	raw, err := os.ReadFile(steps)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := RunContext(context.Background(), []string{"replay", "--per-worker", rec}, &out, &errb); code != 0 {
		t.Fatalf("replay exited %d: %s", code, errb.String())
	}
	if !bytes.Equal(out.Bytes(), raw) {
		t.Fatalf("replay differs from steps.jsonl\nreplay:\n%s\nrun:\n%s", out.String(), raw)
	}
}

// TestRunDNSDiscovery runs "vllmstat run" with a dns+ target and a DNS server the test
// controls: engines appear and disappear with the DNS answers, a disappearing engine's tokens
// up to its last scrape stay in the open step, one that comes back is a new worker (what it
// served while away is not counted), a failing DNS server keeps the targets, and every step
// counts exactly; the recording replays to steps.jsonl byte for byte.
func TestRunDNSDiscovery(t *testing.T) {
	port, ss := samePortServers(t, 3)
	dns := dnstest.New(t)
	const name = "fleet.vllmstat.test"
	dns.SetIPs(name, "127.0.0.1")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "vllmstat.yaml")
	yaml := fmt.Sprintf("targets: [\"dns+http://%s.:%d/metrics\"]\ndns_server: %s\nrefresh_interval: 100ms\n", name, port, dns.Addr)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "rec.jsonl.gz")
	r := startDiscRun(t, "--config", cfg, "--out", dir, "--record", rec)
	a, b, c := ss[0], ss[1], ss[2]

	r.waitTargets(a.url)
	a.tokens.Add(10)
	checkStep(t, r.endStep(1), 10, map[string]float64{a.url: 10})

	dns.SetIPs(name, "127.0.0.1", "127.0.0.2")
	r.waitTargets(a.url, b.url) // b's first scrape is its baseline
	a.tokens.Add(5)
	b.tokens.Add(7)
	checkStep(t, r.endStep(2), 12, map[string]float64{a.url: 5, b.url: 7})

	a.tokens.Add(3)
	r.waitTokens(3) // scraped before it goes
	dns.SetIPs(name, "127.0.0.2", "127.0.0.3")
	r.waitTargets(b.url, c.url)
	a.tokens.Add(100) // while it is away: never counted
	b.tokens.Add(4)
	c.tokens.Add(6)
	checkStep(t, r.endStep(3), 13, map[string]float64{a.url: 3, b.url: 4, c.url: 6})

	c.tokens.Add(2)
	r.waitTokens(2) // in step 4 before it goes
	dns.Fail(name)
	if !testkit.Poll(20*time.Second, func() bool { return strings.Contains(r.stderr.String(), "dns discovery failed") }) {
		t.Fatalf("the failing DNS server was not reported\n%s", r.stderr.String())
	}
	dns.SetIPs(name, "127.0.0.1", "127.0.0.2") // c goes, a comes back as a new worker
	r.waitTargets(a.url, b.url)
	a.tokens.Add(1)
	checkStep(t, r.endStep(4), 3, map[string]float64{a.url: 1, b.url: 0, c.url: 2})
	if n := strings.Count(r.stderr.String(), "dns discovery failed"); n != 1 || !strings.Contains(r.stderr.String(), "dns discovery recovered") {
		t.Errorf("failure logged %d times, want once, and the recovery once\n%s", n, r.stderr.String())
	}

	dns.Remove(name)
	r.waitTargets()
	r.stop()
	replayEquals(t, rec, filepath.Join(dir, "steps.jsonl"))
}

// TestRunDNSSRVDiscovery runs "vllmstat run" with a dnssrv+ target: every SRV record is a
// target at its host and port, and the targets follow the records.
func TestRunDNSSRVDiscovery(t *testing.T) {
	var ss []*tokenServer
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, serveTokens(t, l))
	}
	port := func(s *tokenServer) uint16 {
		_, p, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/metrics"))
		n, _ := strconv.Atoi(p)
		return uint16(n)
	}
	// The records name hosts, which scrapes resolve as usual: localhost, here.
	url := func(s *tokenServer) string { return fmt.Sprintf("http://localhost:%d/metrics", port(s)) }
	dns := dnstest.New(t)
	const name = "_vllm._tcp.fleet.vllmstat.test"
	dns.SetSRV(name, dnstest.SRV{Target: "localhost.", Port: port(ss[0])}, dnstest.SRV{Target: "localhost", Port: port(ss[1])})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "vllmstat.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("dns_server: %s\nrefresh_interval: 100ms\n", dns.Addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The name comes as a flag, the server from the file.
	r := startDiscRun(t, "--config", cfg, "--target", "dnssrv+http://"+name+"./metrics", "--out", dir)
	a, b := ss[0], ss[1]
	r.waitTargets(sorted(url(a), url(b))...)
	a.tokens.Add(4)
	b.tokens.Add(5)
	checkStep(t, r.endStep(1), 9, map[string]float64{url(a): 4, url(b): 5})
	b.tokens.Add(1)
	r.waitTokens(1)
	dns.SetSRV(name, dnstest.SRV{Target: "localhost", Port: port(a)})
	r.waitTargets(url(a))
	a.tokens.Add(2)
	checkStep(t, r.endStep(2), 3, map[string]float64{url(a): 2, url(b): 1})
	r.stop()
}
