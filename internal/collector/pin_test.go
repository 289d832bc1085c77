package collector

import (
	"context"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/scrape"
)

// TestRemovedAgainKeepsTheLatestGrace: a target removed, back within its grace period and
// removed again is kept for the grace period of its latest removal (two intervals, 2 s here), not
// forgotten at the first removal's deadline: back within it, its first scrape counts what its
// engine served while away. Back after it, the target is a new worker, whose first scrape is a
// baseline. The state is driven by hand on a fake clock, one scrape at a time.
func TestRemovedAgainKeepsTheLatestGrace(t *testing.T) {
	s := newValueServer(t, 100)
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := New(Options{Options: scrape.Options{Timeout: 5 * time.Second, Clock: fc}, Interval: time.Second})
	st := newState(c)
	results := make(chan scrape.Result, 8)
	st.pool = scrape.NewPool(scrape.Options{Timeout: 5 * time.Second}, results)
	defer st.pool.Close()
	scrapeOnce := func() { st.tick(); st.observe(<-results) }
	tokens := func() float64 { return st.tracker.Peek(st.stamp()).Metrics["vllm/generation_tokens"] }

	st.setTargets(targets(s.srv.URL))
	scrapeOnce() // the baseline
	s.value.Store(110)
	scrapeOnce()
	st.setTargets(nil) // removed at 0 s: its first deadline is 2 s
	fc.Advance(500 * time.Millisecond)
	st.setTargets(targets(s.srv.URL)) // back at 0.5 s
	fc.Advance(time.Second)
	st.setTargets(nil) // removed again at 1.5 s: its deadline is 3.5 s
	fc.Advance(500 * time.Millisecond)
	st.tick() // 2 s: the first removal's deadline passes
	fc.Advance(time.Second)
	s.value.Store(1_000_110)
	st.setTargets(targets(s.srv.URL)) // back at 3 s, within the latest removal's grace period
	scrapeOnce()
	if got := tokens(); got != 1_000_010 {
		t.Fatalf("back at 3 s after removals at 0 s and 1.5 s: %v tokens, want 1000010 (it goes on with its worker)", got)
	}

	st.setTargets(nil) // removed at 3 s: forgotten at 5 s
	fc.Advance(2 * time.Second)
	st.tick()
	s.value.Store(2_000_110)
	st.setTargets(targets(s.srv.URL))
	scrapeOnce()
	if got := tokens(); got != 1_000_010 {
		t.Fatalf("back after its grace period: %v tokens, want 1000010 (its first scrape back a baseline)", got)
	}
}

// TestAddTargetsOfAScrapedTargetReturnsAtOnce: registering a target that is already there and
// scraped waits for nothing: not for its next scrape, which here never comes (the fake clock
// does not move, so no tick scrapes it), nor for a timer on the clock. An engine that registers
// again is not held for an interval.
func TestAddTargetsOfAScrapedTargetReturnsAtOnce(t *testing.T) {
	s := newValueServer(t, 100)
	c, fc, stop := start(t, Options{NoFinalStep: true})
	defer stop()
	ctx := context.Background()
	if err := c.AddTargets(ctx, targets(s.srv.URL)); err != nil {
		t.Fatal(err)
	}
	if n := s.n.Load(); n != 1 {
		t.Fatalf("the first registration returned after %d scrapes, want 1", n)
	}
	done := make(chan error, 1)
	go func() { done <- c.AddTargets(ctx, targets(s.srv.URL)) }()
	// The timeout only catches a hang: the call returns, or waits on the clock, at once.
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	waiting := make(chan error, 1)
	go func() { waiting <- fc.BlockUntil(bctx, 1) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-waiting:
		t.Fatalf("registering a target scraped already waits on the clock (%v), for a scrape that the fake clock never brings", err)
	}
	if n := s.n.Load(); n != 1 {
		t.Fatalf("registering it again took %d scrapes in all, want the first one only", n)
	}
}
