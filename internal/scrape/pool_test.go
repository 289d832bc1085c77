package scrape

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/target"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestFetchDuration checks that a scrape's duration covers the server's delay, timed by the
// injected clock: the server moves a fake clock on by 3 s before it answers.
func TestFetchDuration(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fc.Advance(3 * time.Second)
		w.Write([]byte(runningPage))
	}))
	defer srv.Close()
	r := Fetch(context.Background(), target.Target{URL: srv.URL}, Options{Timeout: 5 * time.Second, Clock: fc})
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	if r.Duration < 3*time.Second || !r.Start.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("start %v duration %v, want the fake start and at least the server's 3s", r.Start, r.Duration)
	}
}

// TestFetchDurationWallClock is the same on the wall clock, with a server that takes 30 ms: a
// lower bound only, as a busy machine may take longer.
func TestFetchDurationWallClock(t *testing.T) {
	const delay = 30 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay) // the slowness under test, not a wait for the test's sake
		w.Write([]byte(runningPage))
	}))
	defer srv.Close()
	r := Fetch(context.Background(), target.Target{URL: srv.URL}, Options{Timeout: 5 * time.Second})
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	if r.Duration < delay {
		t.Fatalf("duration %v, want at least the server's %v", r.Duration, delay)
	}
}

// enginePage is a page with n engines, each with one counter.
func enginePage(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "vllm:generation_tokens_total{engine=\"%d\",model_name=\"m\"} %d\n", i, 10*i)
	}
	return b.String()
}

func TestFetchLimits(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.URL.Query().Get("engines"), &n)
		w.Write([]byte(enginePage(n)))
	}))
	defer srv.Close()
	tests := []struct {
		engines int
		lim     page.Limits
		reason  string
		msg     string
	}{
		{engines: 3, lim: page.Limits{MaxWorkers: 3, MaxSeries: 3}},
		{engines: 4, lim: page.Limits{MaxWorkers: 3}, reason: "limit", msg: "workers"},
		{engines: 4, lim: page.Limits{MaxSeries: 3}, reason: "limit", msg: "series"},
		{engines: 64, lim: page.DefaultLimits},
		{engines: 100}, // no limits
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d engines %+v", tt.engines, tt.lim), func(t *testing.T) {
			r := Fetch(context.Background(), target.Target{URL: fmt.Sprintf("%s/metrics?engines=%d", srv.URL, tt.engines)}, Options{Timeout: 5 * time.Second, Limits: tt.lim})
			if r.Reason() != tt.reason {
				t.Fatalf("reason %q (err %v), want %q", r.Reason(), r.Err(), tt.reason)
			}
			if tt.reason == "" {
				if len(r.Page.Engines) != tt.engines {
					t.Fatalf("%d engines read, want %d", len(r.Page.Engines), tt.engines)
				}
				return
			}
			if !errors.Is(r.Err(), page.ErrLimit) || !strings.Contains(r.Err().Error(), tt.msg) || r.Page != nil {
				t.Fatalf("err %v page %v: want an ErrLimit about %s and no page", r.Err(), r.Page, tt.msg)
			}
		})
	}
}

// TestPoolGenerations checks that a target removed and added again is a new instance: its
// results carry a new generation, and the pool reports only the current one.
func TestPoolGenerations(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(runningPage)) }))
	defer srv.Close()
	out := make(chan Result, 8)
	p := NewPool(Options{Timeout: 5 * time.Second}, out)
	defer p.Close()
	a, b := target.Target{URL: srv.URL + "/a"}, target.Target{URL: srv.URL + "/b"}
	if added, _ := p.Set([]target.Target{a, b}); len(added) != 2 {
		t.Fatalf("added %v", added)
	}
	g1, _ := p.Generation(a.URL)
	p.Tick()
	first := map[string]uint64{}
	for range 2 {
		r := <-out
		first[r.Target] = r.Gen
	}
	if first[a.URL] != g1 || first[b.URL] == g1 {
		t.Fatalf("generations %v, want a's to be %d and b's another", first, g1)
	}
	if _, removed := p.Set([]target.Target{b}); len(removed) != 1 || removed[0] != a.URL {
		t.Fatalf("removed %v", removed)
	}
	if _, ok := p.Generation(a.URL); ok {
		t.Fatal("a removed target still has a generation")
	}
	p.Set([]target.Target{b, a})
	g2, _ := p.Generation(a.URL)
	if g2 == g1 {
		t.Fatal("a target added again kept its old generation")
	}
	if gb, _ := p.Generation(b.URL); gb != first[b.URL] {
		t.Fatalf("a kept target changed generation: %d, was %d", gb, first[b.URL])
	}
	p.Boundary(7)
	for range 2 {
		r := <-out
		if r.Target == a.URL && (r.Gen != g2 || r.Boundary != 7) {
			t.Fatalf("result %+v, want generation %d answering boundary 7", r, g2)
		}
	}
	// The same URL with other credentials is the same instance, which scrapes with them.
	p.Set([]target.Target{b, {URL: a.URL, Auth: target.Auth{Authorization: &target.Authorization{Type: "Bearer", Credentials: target.NewSecret("t")}}}})
	if g, _ := p.Generation(a.URL); g != g2 || p.Auth(a.URL).Authorization == nil {
		t.Fatalf("generation %d (want %d), auth %v", g, g2, p.Auth(a.URL))
	}
}

// TestPoolSpreadOffset checks on a fake clock that a tick's scrape waits for the target's
// offset, and that a boundary request cuts the wait short.
func TestPoolSpreadOffset(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(runningPage))
	}))
	defer srv.Close()
	const spread = time.Second
	u := srv.URL + "/metrics"
	for i := 0; offset(u, spread, 0) < spread/10; i++ { // an offset long enough to see
		u = fmt.Sprintf("%s/metrics?i=%d", srv.URL, i)
	}
	off := offset(u, spread, 0)
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	out := make(chan Result, 1)
	p := NewPool(Options{Timeout: 5 * time.Second, Spread: spread, Clock: fc}, out)
	defer p.Close()
	p.Set([]target.Target{{URL: u}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	p.Tick()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(off - time.Nanosecond)
	if fc.Timers() != 1 || hits.Load() != 0 {
		t.Fatalf("scraped %d times (%d timers) before the %s offset passed", hits.Load(), fc.Timers(), off)
	}
	fc.Advance(time.Nanosecond)
	if r := <-out; r.Err() != nil || r.Boundary != 0 || !r.Start.Equal(fc.Now()) {
		t.Fatalf("tick scrape: err %v boundary %d start %v, want at %v", r.Err(), r.Boundary, r.Start, fc.Now())
	}

	p.Tick()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p.Boundary(7)
	if r := <-out; r.Err() != nil || r.Boundary != 7 {
		t.Fatalf("boundary scrape: err %v boundary %d", r.Err(), r.Boundary)
	}
	if fc.Timers() != 0 || hits.Load() != 2 {
		t.Fatalf("%d timers, %d scrapes after the boundary, want the offset wait dropped", fc.Timers(), hits.Load())
	}
}

// TestPoolSpreadFrom checks that the spread applies once the pool has SpreadFrom targets, and no
// longer when it has fewer again, whatever it started with: a fleet found by discovery after
// the start is spread too.
func TestPoolSpreadFrom(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(runningPage))
	}))
	defer srv.Close()
	const spread = time.Second
	u := srv.URL + "/metrics"
	for i := 0; offset(u, spread, 0) < spread/10; i++ {
		u = fmt.Sprintf("%s/metrics?i=%d", srv.URL, i)
	}
	other := []target.Target{{URL: srv.URL + "/a"}, {URL: srv.URL + "/b"}}
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	out := make(chan Result, 3)
	p := NewPool(Options{Timeout: 5 * time.Second, Spread: spread, SpreadFrom: 3, Clock: fc}, out)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// drain ticks every target and waits for the results; it reports whether the target u
	// waited for a timer (its offset) before scraping.
	drain := func(n int) (waited bool) {
		t.Helper()
		p.Tick()
		for got := 0; got < n; {
			select {
			case r := <-out:
				if r.Err() != nil {
					t.Fatal(r.Err())
				}
				got++
			case <-time.After(10 * time.Millisecond):
				if fc.Timers() > 0 {
					waited = true
					fc.Advance(spread)
				}
			case <-ctx.Done():
				t.Fatal("no result")
			}
		}
		return waited
	}
	p.Set([]target.Target{{URL: u}})
	if drain(1) {
		t.Fatal("one target of SpreadFrom 3 waited for its offset")
	}
	p.Set(append([]target.Target{{URL: u}}, other...))
	if !drain(3) {
		t.Fatal("three targets of SpreadFrom 3: none waited for its offset")
	}
	p.Set([]target.Target{{URL: u}})
	if drain(1) {
		t.Fatal("back to one target: it still waited for its offset")
	}
}

// TestPoolFirstPageBudget checks that a target's first two scrapes have FirstTimeout, and the
// others Timeout: a server that always answers in 300 ms gets its first two pages read within a
// first budget of 10 s, and the next scrape, bounded by 50 ms, times out.
func TestPoolFirstPageBudget(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // a slow answer is the case under test
		w.Write([]byte(runningPage))
	}))
	defer srv.Close()
	out := make(chan Result, 1)
	p := NewPool(Options{Timeout: 50 * time.Millisecond, FirstTimeout: 10 * time.Second}, out)
	defer p.Close()
	p.Add([]target.Target{{URL: srv.URL + "/metrics"}})
	<-p.Started()
	p.Tick()
	for i := range firstScrapes {
		if r := <-out; r.Err() != nil || r.Page == nil {
			t.Fatalf("scrape %d: %v; want the page within the first budget", i+1, r.Err())
		}
		p.Tick()
	}
	if r := <-out; r.Reason() != "timeout" {
		t.Fatalf("scrape %d: err %v (reason %q); want a timeout of 50 ms", firstScrapes+1, r.Err(), r.Reason())
	}
}

// TestPoolLearningBudget checks that every scrape of a pool has the first pages' budget while
// one of its targets still makes its first scrapes (a fleet's start), and Timeout once none
// does: a target answering in 300 ms is read while a second target holds back its first
// answer, and times out at 50 ms once the second target's first two scrapes are made.
func TestPoolLearningBudget(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // a slow answer is the case under test
		w.Write([]byte(runningPage))
	}))
	defer slow.Close()
	release := make(chan struct{})
	late := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Write([]byte(runningPage))
	}))
	defer late.Close()
	defer close(release)
	out := make(chan Result, 2)
	p := NewPool(Options{Timeout: 50 * time.Millisecond, FirstTimeout: 10 * time.Second}, out)
	defer p.Close()
	slowURL, lateURL := slow.URL+"/metrics", late.URL+"/metrics"
	p.Add([]target.Target{{URL: slowURL}, {URL: lateURL}})
	<-p.Started()
	next := func(url string) Result {
		for {
			if r := <-out; r.Target == url {
				return r
			}
		}
	}
	for i := range firstScrapes + 1 { // its own first scrapes, and one while the other learns
		p.ScrapeNow([]string{slowURL})
		if r := next(slowURL); r.Err() != nil {
			t.Fatalf("scrape %d of the slow target while the other makes its first: %v", i+1, r.Err())
		}
	}
	for i := range firstScrapes { // the late target's first scrapes
		p.ScrapeNow([]string{lateURL})
		release <- struct{}{}
		if r := next(lateURL); r.Err() != nil {
			t.Fatalf("late target's scrape %d: %v", i+1, r.Err())
		}
	}
	p.ScrapeNow([]string{slowURL})
	if r := next(slowURL); r.Reason() != "timeout" {
		t.Fatalf("slow target once the pool learnt every page: err %v (reason %q); want a timeout", r.Err(), r.Reason())
	}
}

// TestPoolBoundaryInFlight: a boundary asks every target at once, but no more than the pool's
// bound scrape at the same time; every target still answers the boundary, once.
func TestPoolBoundaryInFlight(t *testing.T) {
	const targets, bound = 6, 2
	var inFlight, most atomic.Int64
	gate := make(chan struct{})
	var urls []target.Target
	for range targets {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-gate
			inFlight.Add(-1)
			w.Write([]byte(runningPage))
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { srv.CloseClientConnections() })
		urls = append(urls, target.Target{URL: srv.URL})
	}
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open) // first of the cleanups: the servers' handlers wait for it
	out := make(chan Result, 2*targets)
	p := NewPool(Options{Timeout: 5 * time.Second, boundaryInFlight: bound}, out)
	defer p.Close()
	p.Add(urls)
	<-p.Started()
	asked := p.Boundary(7)
	if len(asked) != targets {
		t.Fatalf("asked %d targets, want %d", len(asked), targets)
	}
	if !testkit.Poll(5*time.Second, func() bool { return inFlight.Load() >= bound }) {
		t.Fatalf("%d boundary scrapes in flight, want %d", inFlight.Load(), bound)
	}
	// A scrape over the bound would have come by now; one that comes later fails the check
	// below all the same.
	time.Sleep(50 * time.Millisecond) // an absence cannot be waited for
	if n := inFlight.Load(); n != bound {
		t.Fatalf("%d boundary scrapes in flight, want %d", n, bound)
	}
	open()
	seen := map[string]bool{}
	for range targets {
		select {
		case r := <-out:
			if r.Err() != nil || r.Boundary != 7 || seen[r.Target] {
				t.Fatalf("result %s: boundary %d, err %v, seen before %v", r.Target, r.Boundary, r.Err(), seen[r.Target])
			}
			seen[r.Target] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d boundary results", len(seen), targets)
		}
	}
	if m := most.Load(); m > bound {
		t.Fatalf("%d boundary scrapes were in flight at once, want at most %d", m, bound)
	}
}

// TestPoolAfterFirstPages: the pool says once, when every target has made its first scrapes,
// that a fleet's start is over; not before, and not again.
func TestPoolAfterFirstPages(t *testing.T) {
	var urls []target.Target
	for range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(runningPage)) }))
		t.Cleanup(srv.Close)
		urls = append(urls, target.Target{URL: srv.URL})
	}
	var calls atomic.Int64
	out := make(chan Result, 8)
	p := NewPool(Options{Timeout: 5 * time.Second, AfterFirstPages: func() { calls.Add(1) }}, out)
	defer p.Close()
	p.Add(urls)
	<-p.Started()
	for round := range firstScrapes + 2 {
		if n := calls.Load(); n != min(int64(round/firstScrapes), 1) {
			t.Fatalf("after %d rounds of scrapes, called %d times", round, n)
		}
		if skipped := p.Tick(); len(skipped) > 0 {
			t.Fatalf("round %d: skipped %v", round, skipped)
		}
		for range urls {
			if r := <-out; r.Err() != nil {
				t.Fatal(r.Err())
			}
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("called %d times, want once", n)
	}
}
