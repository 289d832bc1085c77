package sim

import (
	"context"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// waitTimers blocks until n timers wait on clk: the fleet's goroutines have done what the
// last advance allowed and wait for the next.
func waitTimers(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// TestFleetOnFakeClockServesTheSimulation drives a running fleet with a fake wall clock and
// checks that what it serves over HTTP is byte for byte the page of a Sim advanced to the same
// simulated time: the fleet adds pacing and HTTP, nothing else.
func TestFleetOnFakeClockServesTheSimulation(t *testing.T) {
	clk := clock.NewFake(simtest.Start)
	cfg := simtest.FastConfig()
	cfg.Clock = clk
	cfg.Tick = 50 * time.Millisecond
	f := startFleet(t, cfg)
	batches := 0
	for range 40 { // 2 s of wall time, 40 s simulated
		waitTimers(t, clk, 1)
		clk.Advance(cfg.Tick)
	}
	waitTimers(t, clk, 1) // the loop has published the last tick
	for len(f.Batches()) > 0 {
		<-f.Batches()
		batches++
	}
	s := mustSim(t, cfg)
	s.AdvanceTo(cfg.SimTime(40 * cfg.Tick))
	if got := len(s.TakeBatches()); got != batches || batches < 2 {
		t.Errorf("fleet reported %d batches, the simulation finished %d", batches, got)
	}
	for i, u := range f.URLs() {
		if got, want := simtest.MustGet(t, u), string(s.Page(i, simtest.Start)); got != want {
			t.Errorf("server %d serves a page that differs from the simulation's", i)
		}
	}
	if got, want := f.Totals()["generation_tokens"], s.Totals()["generation_tokens"]; got != want {
		t.Errorf("fleet totals %v, simulation %v", got, want)
	}
}
