package sim

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

func sampleValue(t *testing.T, page, name string) float64 {
	t.Helper()
	fams := simtest.ParsePage(t, []byte(page))
	f := fams[name]
	if f == nil || len(f.Metric) == 0 {
		t.Fatalf("page has no %s", name)
	}
	m := f.Metric[0]
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s is neither counter nor gauge", name)
	return 0
}

// TestFleetBatchesAndTotalsOverHTTP runs two batches and then compares what the pages say over
// HTTP with the simulator's own totals.
func TestFleetBatchesAndTotalsOverHTTP(t *testing.T) {
	cfg := simtest.FastConfig()
	cfg.Workload.Batches = 2
	f := startFleet(t, cfg)
	urls := f.URLs()
	if len(urls) != 2 || !strings.HasPrefix(urls[0], "http://127.0.0.1:") || !strings.HasSuffix(urls[0], "/metrics") || urls[0] == urls[1] {
		t.Fatalf("URLs %v", urls)
	}
	for want := 1; want <= 2; want++ {
		select {
		case n := <-f.Batches():
			if n != want {
				t.Fatalf("batch %d, want %d", n, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("batch %d never finished", want)
		}
	}
	// The workload is over, so the pages and the totals stay put.
	pages := map[string]float64{}
	for _, u := range urls {
		simtest.PageTotals(simtest.ParsePage(t, []byte(simtest.MustGet(t, u))), pages)
	}
	tot := f.Totals()
	simtest.CompareTotals(t, "over HTTP", pages, tot)
	if want := float64(2 * cfg.Workload.Prompts * cfg.Workload.Samples); tot["request_success/stop"]+tot["request_success/length"] != want {
		t.Errorf("%v requests finished, want %v", tot["request_success/stop"]+tot["request_success/length"], want)
	}
	// One scrape of server 0 so far; the instrumentation counts a request after answering it.
	if page := simtest.MustGet(t, urls[0]); !strings.Contains(page, `http_requests_total{handler="/metrics",method="GET",status="2xx"} 1.0`+"\n") {
		t.Errorf("scrapes not counted:\n%s", page[strings.Index(page, "http_requests_total{"):])
	}
}

// TestFaultRestartOverHTTP restarts server 1 after the only batch: its counters drop to zero
// with new _created timestamps, server 0 keeps its own, and the totals keep the counts.
// (Requests lost in a restart during a batch are checked in TestRestartInSim.) The wall clock
// is the test's, so the page before the restart is read before it on every machine.
func TestFaultRestartOverHTTP(t *testing.T) {
	clk := clock.NewFake(simtest.Start)
	cfg := simtest.FastConfig()
	cfg.Clock = clk
	cfg.Tick = 50 * time.Millisecond
	cfg.Workload.Batches = 1
	restartAt := 1500 * time.Millisecond
	cfg.Faults = []fleetconfig.Fault{{Kind: fleetconfig.FaultRestart, At: restartAt, Server: 1}}
	f := startFleet(t, cfg)
	u0, u1 := f.URLs()[0], f.URLs()[1]
	elapsed := time.Duration(0)
	// tick moves the wall clock one tick, once the fleet has published the last one.
	tick := func() {
		waitTimers(t, clk, 1)
		clk.Advance(cfg.Tick)
		elapsed += cfg.Tick
	}
	for {
		waitTimers(t, clk, 1) // the fleet has published and waits for the next tick
		if len(f.Batches()) > 0 {
			break
		}
		if elapsed+cfg.Tick >= restartAt {
			t.Fatalf("the batch did not finish within %s of simulated wall time", elapsed)
		}
		tick()
	}
	page := simtest.MustGet(t, u1)
	created := sampleValue(t, page, "vllm:generation_tokens_created")
	gen := sampleValue(t, page, "vllm:generation_tokens_total")
	created0 := sampleValue(t, simtest.MustGet(t, u0), "vllm:generation_tokens_created")
	if gen == 0 {
		t.Fatal("no tokens before the restart")
	}
	if n := f.Totals()["restarts"]; n != 0 {
		t.Fatalf("%v restarts at %s, before the restart is due", n, elapsed)
	}
	for elapsed < restartAt {
		tick()
	}
	waitTimers(t, clk, 1)
	page = simtest.MustGet(t, u1)
	if got := sampleValue(t, page, "vllm:generation_tokens_created"); got == created {
		t.Fatalf("_created still %v after the restart was due", got)
	}
	newCreated := sampleValue(t, page, "vllm:generation_tokens_created")
	if d := newCreated - created; d < 1.45 || d > 1.55 {
		t.Errorf("_created moved by %v s, want the restart's 1.5 s", d)
	}
	for _, name := range []string{"vllm:num_preemptions_created", "vllm:time_to_first_token_seconds_created", "http_requests_created"} {
		if v := sampleValue(t, page, name); v != newCreated {
			t.Errorf("%s = %v, want %v", name, v, newCreated)
		}
	}
	if v := sampleValue(t, page, "process_start_time_seconds"); v < newCreated-0.01 || v > newCreated+0.01 {
		t.Errorf("process_start_time_seconds %v, want about %v", v, newCreated)
	}
	for _, name := range []string{"vllm:generation_tokens_total", "vllm:prefix_cache_queries_total", "vllm:num_preemptions_total", "vllm:kv_cache_usage_perc"} {
		if v := sampleValue(t, page, name); v != 0 {
			t.Errorf("%s = %v after the restart, want 0", name, v)
		}
	}
	if v := sampleValue(t, simtest.MustGet(t, u0), "vllm:generation_tokens_created"); v != created0 {
		t.Errorf("server 0 restarted too")
	}
	tot := f.Totals()
	if tot["restarts"] != 1 || tot["generation_tokens"] <= gen {
		t.Errorf("totals after the restart: %v restarts, %v generation tokens", tot["restarts"], tot["generation_tokens"])
	}
}

// noKeepAlive is a client that opens a new connection per request, so that a server that went
// down refuses it (a kept-alive connection would be cut instead).
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// TestFaultDownOverHTTP takes the only server down on a fake wall clock: its port refuses
// connections from the fault's start to the end of its window, then serves again at the same URL.
func TestFaultDownOverHTTP(t *testing.T) {
	clk := clock.NewFake(simtest.Start)
	cfg := simtest.FastConfig()
	cfg.Clock = clk
	cfg.Tick = 50 * time.Millisecond
	cfg.Servers = 1
	cfg.Faults = []fleetconfig.Fault{{Kind: fleetconfig.FaultDown, At: 200 * time.Millisecond, Duration: 1500 * time.Millisecond, Server: fleetconfig.AllServers}}
	f := startFleet(t, cfg)
	u := f.URLs()[0]
	refused := func(when string) {
		t.Helper()
		if _, _, err := simtest.Get(t, noKeepAlive, u); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("%s: %v, want connection refused", when, err)
		}
	}
	waitTimers(t, clk, 2) // the fleet's tick and the server's wait for the fault
	body, resp, err := simtest.Get(t, noKeepAlive, u)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("before the fault: %v %v", err, resp)
	}
	simtest.ParsePage(t, []byte(body))
	clk.Advance(200 * time.Millisecond)
	waitTimers(t, clk, 2) // the server is down and waits for the window's end
	refused("at the fault's start")
	clk.Advance(1500*time.Millisecond - time.Millisecond)
	waitTimers(t, clk, 2)
	refused("1 ms before the window's end")
	clk.Advance(time.Millisecond)
	testkit.WaitFor(t, 10*time.Second, "the port to come back", func() bool {
		_, resp, err := simtest.Get(t, noKeepAlive, u)
		return err == nil && resp.StatusCode == 200
	})
	if f.URLs()[0] != u {
		t.Errorf("URL changed from %s to %s", u, f.URLs()[0])
	}
	simtest.ParsePage(t, []byte(simtest.MustGet(t, u)))
}

type answer struct {
	status int
	err    error
}

// getAsync sends a GET and delivers its outcome.
func getAsync(t *testing.T, u string) <-chan answer {
	c := make(chan answer, 1)
	go func() {
		_, resp, err := simtest.Get(t, noKeepAlive, u)
		if err != nil {
			c <- answer{err: err}
			return
		}
		c <- answer{status: resp.StatusCode}
	}()
	return c
}

// TestFaultSlowOverHTTP checks on a fake wall clock that an answer asked for in the slow window
// is held for SlowDelay, and that answers after the window come at once.
func TestFaultSlowOverHTTP(t *testing.T) {
	clk := clock.NewFake(simtest.Start)
	cfg := simtest.FastConfig()
	cfg.Clock = clk
	cfg.Tick = 50 * time.Millisecond
	cfg.Servers = 1
	cfg.SlowDelay = 5 * time.Second
	cfg.Faults = []fleetconfig.Fault{{Kind: fleetconfig.FaultSlow, At: 0, Duration: 2 * time.Second, Server: 0}}
	f := startFleet(t, cfg)
	u := f.URLs()[0]
	slow := getAsync(t, u)
	waitTimers(t, clk, 2) // the fleet's tick and the held answer
	clk.Advance(cfg.SlowDelay - time.Millisecond)
	waitTimers(t, clk, 2) // the answer is still held
	select {
	case a := <-slow:
		t.Fatalf("answered (%v) before the slow delay passed", a)
	default:
	}
	clk.Advance(time.Millisecond)
	if a := <-slow; a.err != nil || a.status != 200 {
		t.Fatalf("slow answer: %+v", a)
	}
	// 5 s in, past the window: the next answer needs no more time on the clock.
	if a := <-getAsync(t, u); a.err != nil || a.status != 200 {
		t.Fatalf("after the window: %+v", a)
	}
}

func TestFaultGarbageOverHTTP(t *testing.T) {
	cfg := simtest.FastConfig()
	cfg.Faults = []fleetconfig.Fault{{Kind: fleetconfig.FaultGarbage, At: 0, Server: fleetconfig.AllServers}}
	f := startFleet(t, cfg)
	for _, u := range f.URLs() {
		body, resp, err := simtest.Get(t, http.DefaultClient, u)
		if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "<html>") {
			t.Fatalf("first answer: %v %v %q", err, resp, body)
		}
		// The second answer is a real page again.
		simtest.ParsePage(t, []byte(simtest.MustGet(t, u)))
	}
}

// TestCloseDoesNotWaitForSlowAnswers closes a fleet while an answer is held for a minute of a
// fake clock that never moves: Close ends the held answer instead of waiting for it.
func TestCloseDoesNotWaitForSlowAnswers(t *testing.T) {
	clk := clock.NewFake(simtest.Start)
	cfg := simtest.FastConfig()
	cfg.Clock = clk
	cfg.Servers = 1
	cfg.SlowDelay = time.Minute
	cfg.Faults = []fleetconfig.Fault{{Kind: fleetconfig.FaultSlow, At: 0, Duration: time.Hour, Server: 0}}
	f, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	slow := getAsync(t, f.URLs()[0])
	waitTimers(t, clk, 2) // the fleet's tick and the held answer
	closed := make(chan struct{})
	go func() { f.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second): // a generous bound on real shutdown work, not a wait
		t.Fatal("Close waits for the held answer")
	}
	if a := <-slow; a.err == nil && a.status != http.StatusServiceUnavailable {
		t.Errorf("held answer after Close: %+v, want 503 or a cut connection", a)
	}
}

func TestStartFailsOnTakenPort(t *testing.T) {
	cfg := simtest.FastConfig()
	f := startFleet(t, cfg)
	u := f.URLs()[0]
	port := u[strings.LastIndexByte(u, ':')+1 : strings.LastIndexByte(u, '/')]
	cfg.Servers = 1
	cfg.Port = 0
	for _, c := range port {
		cfg.Port = cfg.Port*10 + int(c-'0')
	}
	if g, err := Start(context.Background(), cfg); err == nil {
		g.Close()
		t.Fatal("second fleet started on a taken port")
	}
}

// TestCloseDuringDownWindow closes the fleet while its servers are down; startFleet's cleanup
// checks that no goroutine is left waiting for the window's end.
func TestCloseDuringDownWindow(t *testing.T) {
	clk := clock.NewFake(simtest.Start)
	cfg := simtest.FastConfig()
	cfg.Clock = clk
	cfg.Tick = 50 * time.Millisecond
	cfg.Faults = []fleetconfig.Fault{{Kind: fleetconfig.FaultDown, At: 50 * time.Millisecond, Duration: 5 * time.Second, Server: fleetconfig.AllServers}}
	f := startFleet(t, cfg)
	waitTimers(t, clk, 3) // the fleet's tick and each server's wait for the fault
	clk.Advance(50 * time.Millisecond)
	waitTimers(t, clk, 3) // the servers are down and wait for the window's end
	for _, u := range f.URLs() {
		if _, _, err := simtest.Get(t, noKeepAlive, u); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("%s in the down window: %v, want connection refused", u, err)
		}
	}
}

// TestFleetLogNamesItsEngine: a fleet's start line names the vLLM page style only for vLLM
// engines; an SGLang fleet has no vLLM version.
func TestFleetLogNamesItsEngine(t *testing.T) {
	for _, engine := range []string{fleetconfig.EngineVLLM, fleetconfig.EngineSGLang} {
		var buf bytes.Buffer
		cfg := fleetconfig.DefaultConfig()
		cfg.Servers, cfg.DP, cfg.Port, cfg.Engine = 1, 1, 0, engine
		cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil))
		f, err := Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		line := buf.String()
		if !strings.Contains(line, "fleet started") || strings.Contains(line, "vllm_version") != (engine == fleetconfig.EngineVLLM) {
			t.Errorf("engine %s: start line %q", engine, line)
		}
	}
}
