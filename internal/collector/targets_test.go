package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/target"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// valueServer answers a page whose generation counter is whatever the test set, with a
// _created sample when created is set.
type valueServer struct {
	value   atomic.Int64
	created atomic.Int64 // Unix seconds; 0: no _created sample
	n       atomic.Int64 // answers
	srv     *httptest.Server
}

func newValueServer(t *testing.T, v int64) *valueServer {
	s := &valueServer{}
	s.value.Store(v)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.n.Add(1)
		fmt.Fprintf(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} %d\n", s.value.Load())
		if c := s.created.Load(); c != 0 {
			fmt.Fprintf(w, "vllm:generation_tokens_created{engine=\"0\",model_name=\"m\"} %d\n", c)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// TestReaddedTarget removes a target and adds it back after its counter moved by a million.
// Back within the grace period (two intervals), it goes on with its worker: the million is
// counted, as after failed scrapes. Back later, it is a new worker: its first scrape back is a
// baseline, not a spike. Either way, when its engine restarted while it was away (its counter
// went down, its _created after its last scrape), what it counted since is the step's.
func TestReaddedTarget(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		away      time.Duration // on the collector's clock; the interval is 1 s
		restarted bool
		want      float64
	}{
		{name: "within the grace period", away: 0, want: 1_000_000},
		{name: "within the grace period, restarted", away: 0, restarted: true, want: 7},
		{name: "after the grace period", away: 3 * time.Second, want: 0},
		{name: "after the grace period, restarted", away: 3 * time.Second, restarted: true, want: 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newValueServer(t, 100)
			c, fc, stop := start(t, Options{Targets: targets(s.srv.URL), NoFinalStep: true})
			defer stop()
			ctx := context.Background()
			testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return s.n.Load() == 1 })
			s.value.Store(110)
			r1, err := c.EndStep(ctx, 1)
			if err != nil || r1.Metrics["vllm/generation_tokens"] != 10 {
				t.Fatalf("step 1: %v %v", r1.Metrics, err)
			}
			if err := c.SetTargets(ctx, nil); err != nil {
				t.Fatal(err)
			}
			fc.Advance(tt.away)
			if tt.restarted {
				s.value.Store(7)
				s.created.Store(base.Add(time.Second).Unix())
			} else {
				s.value.Store(1_000_110)
			}
			if err := c.SetTargets(ctx, targets(s.srv.URL)); err != nil {
				t.Fatal(err)
			}
			// A tick of the time away may scrape it once before the boundary scrape.
			r2, err := c.EndStep(ctx, 2)
			if err != nil || r2.Metrics["vllm/generation_tokens"] != tt.want || r2.Scrapes.OK < 1 || r2.Scrapes.Failed != 0 {
				t.Fatalf("step 2: tokens %v scrapes %+v err %v; want %v from its scrapes back", r2.Metrics["vllm/generation_tokens"], r2.Scrapes, err, tt.want)
			}
			s.value.Add(5)
			r3, err := c.EndStep(ctx, 3)
			if err != nil || r3.Metrics["vllm/generation_tokens"] != 5 {
				t.Fatalf("step 3: %v %v", r3.Metrics, err)
			}
		})
	}
}

// TestStaleGenerationDropped delivers a removed instance's scrape after the first scrape of the
// instance that replaced it, as a slow goroutine could: the collector drops it.
func TestStaleGenerationDropped(t *testing.T) {
	s := newValueServer(t, 100)
	c := New(Options{Options: scrape.Options{Timeout: 5 * time.Second, Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}})
	st := newState(c)
	results := make(chan scrape.Result, 8)
	st.pool = scrape.NewPool(scrape.Options{Timeout: 5 * time.Second}, results)
	defer st.pool.Close()
	st.setTargets(targets(s.srv.URL))
	st.tick()
	old := <-results
	st.setTargets(nil)
	st.setTargets(targets(s.srv.URL))
	s.value.Store(1_000_100)
	st.tick()
	fresh := <-results
	if fresh.Gen == old.Gen {
		t.Fatalf("the instance added again has the old generation %d", old.Gen)
	}
	st.observe(fresh)
	st.observe(old) // late: must change nothing
	s.value.Add(5)
	st.tick()
	st.observe(<-results)
	rec := st.tracker.Peek(st.stamp())
	if rec.Scrapes.OK != 2 || rec.Metrics["vllm/generation_tokens"] != 5 {
		t.Fatalf("scrapes %+v tokens %v; want the new instance's 2 scrapes and an increase of 5", rec.Scrapes, rec.Metrics["vllm/generation_tokens"])
	}
	if ts := st.targetStates(); len(ts) != 1 || ts[0].Scrapes != 2 {
		t.Fatalf("target states %+v, want 2 scrapes", ts)
	}
}

func TestStepNumberBounds(t *testing.T) {
	s := newValueServer(t, 1)
	var mu sync.Mutex
	var closed []int64
	c, _, stop := start(t, Options{Targets: targets(s.srv.URL), OnStep: func(r *step.Record) {
		mu.Lock()
		closed = append(closed, r.Step)
		mu.Unlock()
	}})
	ctx := context.Background()
	for _, n := range []int64{MaxStep + 1, 1<<63 - 1} {
		if _, err := c.EndStep(ctx, n); !errors.Is(err, ErrStepRange) {
			t.Errorf("step %d: %v, want ErrStepRange", n, err)
		}
	}
	if r, err := c.EndStep(ctx, 5); err != nil || r.Step != 5 {
		t.Fatalf("step 5: %v", err)
	}
	_, err := c.EndStep(ctx, 4)
	if !errors.Is(err, ErrStepOrder) || !strings.Contains(err.Error(), "is 5") {
		t.Fatalf("step 4 after 5: %v, want ErrStepOrder naming the last step 5", err)
	}
	if r, err := c.EndStep(ctx, MaxStep); err != nil || r.Step != MaxStep {
		t.Fatalf("step 2^53: %v", err)
	}
	if _, err := c.EndStep(ctx, -1); !errors.Is(err, ErrStepRange) {
		t.Fatalf("next step after 2^53: %v, want ErrStepRange", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(closed) != 2 || closed[0] != 5 || closed[1] != MaxStep {
		t.Fatalf("closed steps %v, want [5 2^53] and no final step with a wrapped number", closed)
	}
}

// TestScrapeDurationAndLimits checks what a target's state says of its scrapes: the duration
// taken on the collector's clock (the server moves it on by 300 ms), and a page over the
// limits as a failed scrape with a clear log line.
func TestScrapeDurationAndLimits(t *testing.T) {
	var fc atomic.Pointer[clock.Fake]
	engines := atomic.Int64{}
	engines.Store(1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fc.Load().Advance(300 * time.Millisecond) // less than the interval: no tick fires
		for i := range engines.Load() {
			fmt.Fprintf(w, "vllm:generation_tokens_total{engine=\"%d\",model_name=\"m\"} 1\n", i)
		}
	}))
	defer srv.Close()
	var logBuf syncbuf.Buffer
	opt := Options{Targets: targets(srv.URL), NoFinalStep: true, Options: scrape.Options{Limits: page.Limits{MaxWorkers: 2},
		Logger: slog.New(slog.NewTextHandler(&logBuf, nil))}}
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fc.Store(fake)
	opt.Clock = fake
	opt.Interval, opt.Timeout = time.Second, 5*time.Second
	c := New(opt)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	defer func() { cancel(); <-errc }()

	// The scrape at start first, so that it cannot come after step 1's boundary scrape.
	testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { r, _, _ := c.Live(context.Background()); return r.Scrapes.OK == 1 })
	if _, err := c.EndStep(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	_, ts, err := c.Live(context.Background())
	if err != nil || len(ts) != 1 || !ts[0].Up || ts[0].LastDuration < 0.3 {
		t.Fatalf("target states %+v %v: want up, with a last duration of at least 0.3 s", ts, err)
	}
	engines.Store(3)
	r, err := c.EndStep(context.Background(), 2)
	if err != nil || r.Scrapes.Failed != 1 || r.Scrapes.OK != 0 {
		t.Fatalf("step 2: %+v %v, want one failed scrape", r.Scrapes, err)
	}
	_, ts, _ = c.Live(context.Background())
	if ts[0].Up || !strings.Contains(ts[0].LastError, "more than the limit of 2 workers") {
		t.Fatalf("target state %+v, want down for the limit", ts[0])
	}
	if _, err := c.EndStep(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if l := logBuf.String(); strings.Count(l, "over the per-target limits") != 1 || !strings.Contains(l, "reason=limit") {
		t.Fatalf("log says the limit %d times, want once:\n%s", strings.Count(l, "over the per-target limits"), l)
	}
}

// TestTargetCredentials checks whose credentials a target scrapes with: its own (from its URL),
// kept when the API lists it again without them; APIAuth's for a new one without any.
func TestTargetCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, basic := r.BasicAuth()
		ok := r.URL.Path == "/a" && basic && u == "usr" && p == "pw" ||
			r.URL.Path == "/b" && r.Header.Get("Authorization") == "Bearer dflt"
		if !ok {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 1")
	}))
	defer srv.Close()
	a, err := target.Parse(strings.Replace(srv.URL, "http://", "http://usr:pw@", 1) + "/a")
	if err != nil {
		t.Fatal(err)
	}
	dflt := target.Auth{Authorization: &target.Authorization{Type: "Bearer", Credentials: target.NewSecret("dflt")}}
	c, _, stop := start(t, Options{Targets: []target.Target{a}, APIAuth: func(string) target.Auth { return dflt }, NoFinalStep: true})
	defer stop()
	ctx := context.Background()
	if err := c.SetTargets(ctx, targets(srv.URL+"/a", srv.URL+"/b")); err != nil {
		t.Fatal(err)
	}
	r, err := c.EndStep(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, ts, _ := c.Live(ctx)
	for _, s := range ts {
		if !s.Up {
			t.Errorf("target %s down: %s", s.URL, s.LastError)
		}
	}
	if r.Scrapes.Failed != 0 {
		t.Errorf("scrapes %+v, want none failed", r.Scrapes)
	}
}

// TestLimitRecordedAsFailure: a page over the limits goes into the recording as the failure
// it was, not as a page that replay, which knows no limits, would count.
func TestLimitRecordedAsFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 1\nvllm:generation_tokens_total{engine=\"1\",model_name=\"m\"} 1\n")
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	rw, err := record.Create(path, record.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, _, stop := start(t, Options{Options: scrape.Options{Limits: page.Limits{MaxWorkers: 1}}, Targets: targets(srv.URL), Recorder: rw})
	if _, err := c.EndStep(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	r, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	scrapes := 0
	for {
		e, err := r.Next()
		if err != nil {
			break
		}
		if e.Kind != record.KindScrape {
			continue
		}
		scrapes++
		if e.Body != nil || !strings.Contains(e.Error, "more than the limit of 1 workers") {
			t.Errorf("recorded %+v, want the limit failure without the page", e)
		}
	}
	if scrapes == 0 {
		t.Fatal("nothing recorded")
	}
}
