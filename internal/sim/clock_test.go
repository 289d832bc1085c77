package sim

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a wall clock that moves only when a test says so.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{c.now.Add(d), ch})
	return ch
}

// advance moves the clock and wakes the waiters that are due.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
		} else {
			w.ch <- c.now
		}
	}
	c.waiters = kept
}

// waitForWaiters blocks until n goroutines wait on the clock.
func (c *fakeClock) waitForWaiters(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		k := len(c.waiters)
		c.mu.Unlock()
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters on the clock, want %d", k, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFleetOnFakeClockServesTheSimulation drives a running fleet with a fake wall clock and
// checks that what it serves over HTTP is byte for byte the page of a Sim advanced to the same
// simulated time: the fleet adds pacing and HTTP, nothing else.
func TestFleetOnFakeClockServesTheSimulation(t *testing.T) {
	clk := &fakeClock{now: testStart}
	cfg := fastConfig()
	cfg.Clock = clk
	cfg.Tick = 50 * time.Millisecond
	f := startFleet(t, cfg)
	batches := 0
	for range 40 { // 2 s of wall time, 40 s simulated
		clk.waitForWaiters(t, 1)
		clk.advance(cfg.Tick)
	}
	clk.waitForWaiters(t, 1) // the loop has published the last tick
	for len(f.Batches()) > 0 {
		<-f.Batches()
		batches++
	}
	s := mustSim(t, cfg)
	s.AdvanceTo(cfg.simTime(40 * cfg.Tick))
	if got := len(s.takeBatches()); got != batches || batches < 2 {
		t.Errorf("fleet reported %d batches, the simulation finished %d", batches, got)
	}
	for i, u := range f.URLs() {
		if got, want := mustGet(t, u), string(s.Page(i, testStart)); got != want {
			t.Errorf("server %d serves a page that differs from the simulation's", i)
		}
	}
	if got, want := f.Totals()["generation_tokens"], s.Totals()["generation_tokens"]; got != want {
		t.Errorf("fleet totals %v, simulation %v", got, want)
	}
}
