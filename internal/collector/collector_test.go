package collector

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/target"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// counterServer answers a page whose generation counter grows by 10 per answer.
type counterServer struct {
	n     atomic.Int64
	block chan struct{} // when set, answers wait for it
	srv   *httptest.Server
}

func newCounterServer(t *testing.T) *counterServer {
	c := &counterServer{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.block != nil {
			select {
			case <-c.block:
			case <-r.Context().Done():
				return
			}
		}
		n := c.n.Add(1)
		fmt.Fprintf(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} %d\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1\n", 10*n)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

type recObserver struct {
	mu      sync.Mutex
	skipped int
	scraped int
}

func (o *recObserver) Scraped(*scrape.Result)       { o.mu.Lock(); o.scraped++; o.mu.Unlock() }
func (o *recObserver) Skipped(string)               { o.mu.Lock(); o.skipped++; o.mu.Unlock() }
func (o *recObserver) StepClosed(*step.Record)      {}
func (o *recObserver) TargetsChanged(_, _ []string) {}

func start(t *testing.T, opt Options) (*Collector, *clock.Fake, func() error) {
	t.Helper()
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opt.Clock = fc
	if opt.Interval == 0 {
		opt.Interval = time.Second
	}
	if opt.Timeout == 0 {
		opt.Timeout = 5 * time.Second
	}
	c := New(opt)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	return c, fc, func() error { cancel(); return <-errc }
}

func TestEndStepOrderAndBoundary(t *testing.T) {
	s := newCounterServer(t)
	c, _, stop := start(t, Options{Targets: targets(s.srv.URL), NoFinalStep: true})
	ctx := context.Background()
	testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return s.n.Load() == 1 })
	r1, err := c.EndStep(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	// the first scrape (at start) and the boundary scrape: one increase of 10
	if r1.Step != 3 || r1.Metrics["vllm/generation_tokens"] != 10 || r1.Scrapes.OK != 2 {
		t.Fatalf("step 3: %+v", r1)
	}
	if _, err := c.EndStep(ctx, 3); !errors.Is(err, ErrStepOrder) {
		t.Fatalf("repeated step number: %v", err)
	}
	r2, err := c.EndStep(ctx, -1)
	if err != nil || r2.Step != 4 || r2.Metrics["vllm/generation_tokens"] != 10 {
		t.Fatalf("next step: %+v %v", r2, err)
	}
	steps, _ := c.Steps(ctx, 0)
	if len(steps) != 2 {
		t.Fatalf("kept %d steps", len(steps))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EndStep(ctx, 9); !errors.Is(err, ErrStopped) {
		t.Fatalf("after stop: %v", err)
	}
}

func TestSlowTargetSkipsTicksAndNeverDelaysOthers(t *testing.T) {
	slow := newCounterServer(t)
	slow.block = make(chan struct{})
	fast := newCounterServer(t)
	obs := &recObserver{}
	c, fc, stop := start(t, Options{Targets: targets(slow.srv.URL, fast.srv.URL), Observer: obs, NoFinalStep: true})
	// Wait for the collector to have processed each fast answer (not merely for the server to
	// have sent it) before the next tick: only then is the fast target idle again.
	scraped := func(n int) func() bool {
		return func() bool { obs.mu.Lock(); defer obs.mu.Unlock(); return obs.scraped == n }
	}
	for i := 0; i < 5; i++ {
		testkit.WaitFor(t, 5*time.Second, fmt.Sprintf("scrape %d", i+1), scraped(i+1))
		fc.Advance(time.Second)
	}
	testkit.WaitFor(t, 5*time.Second, "scrape 6", scraped(6))
	obs.mu.Lock()
	skipped := obs.skipped
	obs.mu.Unlock()
	if skipped != 5 {
		t.Errorf("skipped ticks %d, want 5 (the slow target's scrape never finished)", skipped)
	}
	live, ts, err := c.Live(context.Background())
	if err != nil || live.Scrapes.OK != 6 {
		t.Fatalf("live: %+v %v", live.Scrapes, err)
	}
	if ts[0].Skipped != 5 || ts[1].Scrapes != 6 {
		t.Errorf("target states %+v", ts)
	}
	close(slow.block)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestRemovedTargetDoesNotHoldBoundary(t *testing.T) {
	slow := newCounterServer(t)
	fast := newCounterServer(t)
	slow.block = make(chan struct{})
	defer close(slow.block)
	c, _, stop := start(t, Options{Targets: targets(slow.srv.URL, fast.srv.URL), NoFinalStep: true})
	testkit.WaitFor(t, 5*time.Second, "the fast target's scrape at start", func() bool { return fast.n.Load() == 1 })
	done := make(chan step.Record)
	go func() {
		r, _ := c.EndStep(context.Background(), 1)
		done <- r
	}()
	testkit.WaitFor(t, 5*time.Second, "the fast target's boundary scrape", func() bool { return fast.n.Load() == 2 })
	if err := c.SetTargets(context.Background(), targets(fast.srv.URL)); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.Step != 1 || r.Metrics["vllm/generation_tokens"] != 10 {
			t.Errorf("step %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the step waited for a removed target")
	}
	stop()
}

func TestShutdownClosesFinalStep(t *testing.T) {
	s := newCounterServer(t)
	var got []int64
	var mu sync.Mutex
	_, _, stop := start(t, Options{Targets: targets(s.srv.URL), StepEvery: time.Hour, OnStep: func(r *step.Record) {
		mu.Lock()
		got = append(got, r.Step)
		mu.Unlock()
	}})
	testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return s.n.Load() == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != 1 || s.n.Load() != 2 {
		t.Fatalf("steps %v after %d answers, want one step after a boundary scrape", got, s.n.Load())
	}
}

// TestShutdownKeepsTheOpenStepOpen: when steps end only on request, the step open at exit was
// never ended by the trainer: it is no step (no OnStep, no sink), but OnOpenStep gets it after
// a last boundary scrape, and no step number is used up.
func TestShutdownKeepsTheOpenStepOpen(t *testing.T) {
	s := newCounterServer(t)
	var steps []int64
	var open []*step.Record
	var mu sync.Mutex
	c, _, stop := start(t, Options{Targets: targets(s.srv.URL),
		OnStep:     func(r *step.Record) { mu.Lock(); steps = append(steps, r.Step); mu.Unlock() },
		OnOpenStep: func(r *step.Record) { mu.Lock(); open = append(open, r); mu.Unlock() }})
	testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return s.n.Load() == 1 })
	if _, err := c.EndStep(context.Background(), 3); err != nil { // boundary scrape: answer 2
		t.Fatal(err)
	}
	if err := stop(); err != nil { // boundary scrape: answer 3
		t.Fatal(err)
	}
	if len(steps) != 1 || steps[0] != 3 {
		t.Fatalf("steps %v, want only the trainer's step 3", steps)
	}
	if len(open) != 1 || open[0].Step != 0 || open[0].Scrapes.OK != 1 || open[0].Metrics["vllm/generation_tokens"] != 10 || s.n.Load() != 3 {
		t.Fatalf("open steps %+v after %d answers, want one with the last boundary scrape's 10 tokens", open, s.n.Load())
	}
}

// TestNoFinalStepHandsOverTheOpenStep: with NoFinalStep the step open at shutdown is no step
// and gets no last boundary scrape: OnOpenStep gets it as it is, with the scrapes taken so far.
func TestNoFinalStepHandsOverTheOpenStep(t *testing.T) {
	s := newCounterServer(t)
	var steps int
	var open []*step.Record
	var mu sync.Mutex
	c, fc, stop := start(t, Options{Targets: targets(s.srv.URL), NoFinalStep: true,
		OnStep:     func(*step.Record) { mu.Lock(); steps++; mu.Unlock() },
		OnOpenStep: func(r *step.Record) { mu.Lock(); open = append(open, r); mu.Unlock() }})
	scraped := func(n int) func() bool {
		return func() bool {
			rec, _, err := c.Live(context.Background())
			return err == nil && rec.Scrapes.OK == n
		}
	}
	testkit.WaitFor(t, 5*time.Second, "the first scrape", scraped(1))
	fc.Advance(time.Second) // a tick: the second scrape
	testkit.WaitFor(t, 5*time.Second, "the second scrape", scraped(2))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if steps != 0 || len(open) != 1 || open[0].Scrapes.OK != 2 || open[0].Metrics["vllm/generation_tokens"] != 10 || s.n.Load() != 2 {
		t.Fatalf("%d steps, open steps %+v after %d answers; want no step and one open step of the two scrapes", steps, open, s.n.Load())
	}
}

// targets makes targets of URLs without credentials.
func targets(urls ...string) []target.Target {
	ts := make([]target.Target, len(urls))
	for i, u := range urls {
		ts[i] = target.Target{URL: u}
	}
	return ts
}

// TestShutdownDeadline checks that a target that never answers holds the exit only until the
// shutdown deadline (twice the scrape timeout and 2 s, on the collector's clock): the last step
// closes then without its boundary scrape, with the other target's.
func TestShutdownDeadline(t *testing.T) {
	dead := newCounterServer(t)
	dead.block = make(chan struct{}) // answers only when the scrape is cancelled
	live := newCounterServer(t)
	steps := make(chan *step.Record, 1)
	obs := &recObserver{}
	c, fc, stop := start(t, Options{Options: scrape.Options{Timeout: 5 * time.Second}, Targets: targets(dead.srv.URL, live.srv.URL), StepEvery: time.Hour,
		OnStep: func(r *step.Record) { steps <- r }, Observer: obs})
	testkit.WaitFor(t, 5*time.Second, "the live target's scrape at start", func() bool { return live.n.Load() == 1 })
	errc := make(chan error, 1)
	go func() { errc <- stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fc.BlockUntil(ctx, 1); err != nil { // the deadline is set
		t.Fatal(err)
	}
	// The live target's boundary scrape, observed by the collector (not only answered: under
	// load its result may wait a moment before the collector takes it).
	testkit.WaitFor(t, 5*time.Second, "the live target's boundary scrape", func() bool { obs.mu.Lock(); defer obs.mu.Unlock(); return obs.scraped == 2 })
	fc.Advance(11 * time.Second)
	if fc.Timers() != 1 || len(steps) != 0 {
		t.Fatalf("%d timers, %d steps 11 s into the shutdown: the 12 s deadline passed early", fc.Timers(), len(steps))
	}
	fc.Advance(time.Second)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	r := <-steps
	if r.Step != 1 || r.Scrapes.OK != 2 || r.Metrics["vllm/generation_tokens"] != 10 {
		t.Fatalf("last step %+v: want the live target's two scrapes", r)
	}
	if _, err := c.EndStep(context.Background(), 5); !errors.Is(err, ErrStopped) {
		t.Fatalf("after stop: %v", err)
	}
}

// Options.Boundary begins as a boundary's scrapes start (a step end, a phase edge) and ends
// once it closed.
func TestBoundaryHook(t *testing.T) {
	s := newCounterServer(t)
	var mu sync.Mutex
	var events []string
	note := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	hook := func() func() {
		note("begin:" + strconv.FormatInt(s.n.Load(), 10))
		return func() { note("end:" + strconv.FormatInt(s.n.Load(), 10)) }
	}
	c, _, stop := start(t, Options{Targets: targets(s.srv.URL), NoFinalStep: true, Boundary: hook})
	defer stop()
	ctx := context.Background()
	testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return s.n.Load() == 1 })
	if _, err := c.StartPhase(ctx, "rollout"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EndStep(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The step's end answers its caller before the collector ends the hook's boundary.
	testkit.WaitFor(t, 5*time.Second, "the last boundary's end", func() bool { mu.Lock(); defer mu.Unlock(); return len(events) >= 4 })
	mu.Lock()
	got := strings.Join(events, ",")
	mu.Unlock()
	// each begun before its boundary scrape and ended after it
	if want := "begin:1,end:2,begin:2,end:3"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}

// A step's traceparent is its end's, else the last one a phase edge of the step was given.
func TestStepTraceParent(t *testing.T) {
	s := newCounterServer(t)
	c, _, stop := start(t, Options{Targets: targets(s.srv.URL), NoFinalStep: true})
	defer stop()
	ctx := context.Background()
	const a, b = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if _, err := c.StartPhase(WithTraceParent(ctx, a), "rollout"); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		ctx  context.Context
		want string
	}{{ctx, a}, {ctx, ""}, {WithTraceParent(ctx, b), b}} {
		r, err := c.EndStep(tc.ctx, int64(i+1))
		if err != nil || r.TraceParent != tc.want {
			t.Errorf("step %d: traceparent %q (%v), want %q", i+1, r.TraceParent, err, tc.want)
		}
	}
}
