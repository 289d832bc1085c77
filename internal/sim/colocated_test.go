package sim

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/simtest"
)

// TestFleetDeliversLoopEdges drives a colocated fleet with a fake wall clock: it delivers the
// Sim's edges in order, each once the served pages show it (asleep after a sleep, awake after a
// wake-up), and a fleet outside the loop has no edge channel.
func TestFleetDeliversLoopEdges(t *testing.T) {
	clk, cfg := colocatedOnFakeClock()
	f := startFleet(t, cfg)
	var got []fleetmodel.LoopEdge
	for range 200 { // 10 s of wall time, 200 s simulated
		waitTimers(t, clk, 1)
		for len(f.Edges()) > 0 {
			e := <-f.Edges()
			got = append(got, e)
			if e.Kind != fleetmodel.Sleep && e.Kind != fleetmodel.Wake {
				continue
			}
			g := simtest.GaugesOf(t, simtest.ParsePage(t, []byte(simtest.MustGet(t, f.URLs()[0]))), "1")
			if want := map[fleetmodel.LoopEdgeKind]float64{fleetmodel.Sleep: 0, fleetmodel.Wake: 1}[e.Kind]; g.Awake != want {
				t.Errorf("after %v of step %d the page shows awake %v", e.Kind, e.Step, g.Awake)
			}
		}
		clk.Advance(cfg.Tick)
	}
	want := simEdges(t, cfg, 10*time.Minute, 50*time.Millisecond, func(edges []fleetmodel.LoopEdge) bool {
		last := edges[len(edges)-1]
		return last.Kind == fleetmodel.Wake && last.Step == cfg.Workload.Batches
	})
	if !slices.Equal(got, want) {
		t.Errorf("fleet delivered\n%v\nthe simulation has\n%v", got, want)
	}

	cfg.Workload.Colocated, cfg.Workload.EvalEvery = false, 0
	cfg.Clock = nil
	if f := startFleet(t, cfg); f.Edges() != nil {
		t.Error("a fleet outside the colocated loop has an edge channel")
	}
}

// TestFleetHoldsAtEdges: a fleet told to hold at edges stops its simulated time at each edge it
// delivers, however long the wall clock runs on, serving the same page, until each edge is
// resumed; it then goes on from where it stopped, and its edges are the simulation's, as
// without the hold.
func TestFleetHoldsAtEdges(t *testing.T) {
	clk, cfg := colocatedOnFakeClock()
	cfg.WaitForDriver = true
	f := startFleet(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next := func() []fleetmodel.LoopEdge { return nextHeld(t, ctx, clk, f, f.Edges()) }
	startHeld(t, clk, f)
	var got []fleetmodel.LoopEdge
	for ticks := 0; ticks < 200; { // 10 s of wall time ticking, 200 s simulated
		es := next()
		if es == nil {
			clk.Advance(cfg.Tick)
			ticks++
			continue
		}
		got = append(got, es...)
		// the engines' samples (the process' families change at every request)
		engines := func() string {
			var b strings.Builder
			for line := range strings.Lines(simtest.MustGet(t, f.URLs()[0])) {
				if strings.HasPrefix(line, "vllm:") {
					b.WriteString(line)
				}
			}
			return b.String()
		}
		at, page := f.GroundTruth().At, engines()
		clk.Advance(time.Minute) // a driver slow to act
		if now := f.GroundTruth().At; now != at || len(f.Edges()) != 0 {
			t.Fatalf("held at %v after %v, the fleet went on: simulated time %v, %d edges more", at, es, now, len(f.Edges()))
		}
		if p := engines(); p != page || page == "" {
			t.Fatalf("held at %v after %v, the page changed:\n%s\nthen\n%s", at, es, page, p)
		}
		for range es {
			f.Resume()
		}
	}
	// The held minutes are not simulated: the fleet is where 200 ticks take it.
	if es := next(); es != nil {
		t.Fatalf("edges %v after the loop's end", es)
	}
	if got, want := f.GroundTruth().At, cfg.SimTime(200*cfg.Tick); got != want {
		t.Errorf("simulated time %v after 200 ticks and the holds, want %v", got, want)
	}
	want := simEdges(t, cfg, 10*time.Minute, 50*time.Millisecond, func(edges []fleetmodel.LoopEdge) bool {
		last := edges[len(edges)-1]
		return last.Kind == fleetmodel.Wake && last.Step == cfg.Workload.Batches
	})
	if !slices.Equal(got, want) {
		t.Errorf("fleet delivered\n%v\nthe simulation has\n%v", got, want)
	}
}

// nextHeld returns what a fleet that waits for its driver delivered on ch after its last tick,
// and holds at, or nothing when it went on to wait for its next tick: it does one or the other.
func nextHeld[T any](t *testing.T, ctx context.Context, clk *clock.Fake, f *Fleet, ch <-chan T) []T {
	t.Helper()
	ticking := make(chan error, 1)
	go func() { ticking <- clk.BlockUntil(ctx, 1) }()
	select {
	case x := <-ch:
		xs := []T{x}
		f.GroundTruth() // answered once the fleet has delivered the tick's
		for len(ch) > 0 {
			xs = append(xs, <-ch)
		}
		return xs
	case err := <-ticking:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fleet neither delivered nor waited for its tick")
	}
	return nil
}

// TestFleetHoldsAtBatchEnds: outside the colocated loop, a fleet that waits for its driver holds
// at each batch's end, its counts unchanged, until resumed. Behind the wall clock by a minute at
// every tick, it catches up a tick at a time and stops at each batch's end: one batch per hold,
// none skipped.
func TestFleetHoldsAtBatchEnds(t *testing.T) {
	clk, cfg := onFakeClock()
	cfg.Workload.Batches = 4
	cfg.WaitForDriver = true
	f := startFleet(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startHeld(t, clk, f)
	var got []int
	for range 1000 {
		bs := nextHeld(t, ctx, clk, f, f.Batches())
		if bs == nil {
			if len(got) == cfg.Workload.Batches {
				break
			}
			clk.Advance(time.Minute) // far behind: a minute of wall time per tick
			continue
		}
		if len(bs) != 1 {
			t.Fatalf("batches %v delivered at once after batches %v: want one per hold", bs, got)
		}
		got = append(got, bs...)
		at, totals := f.GroundTruth().At, f.Totals()
		clk.Advance(time.Minute)
		if now := f.GroundTruth().At; now != at || !maps.Equal(f.Totals(), totals) {
			t.Fatalf("held at %v after batch %d, the fleet went on to %v", at, bs[0], now)
		}
		f.Resume()
	}
	if !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Errorf("batches %v, want 1 to 4", got)
	}
}

// startHeld checks that f, waiting for its driver, stays at time 0 while the wall clock runs
// on, and starts it.
func startHeld(t *testing.T, clk *clock.Fake, f *Fleet) {
	t.Helper()
	clk.Advance(time.Hour)
	if at := f.GroundTruth().At; at != 0 {
		t.Fatalf("a fleet waiting for its driver's start went on to %v", at)
	}
	f.Resume()
}

// onFakeClock returns a fake wall clock and a fast fleet's config paced by it, 50 ms a tick.
func onFakeClock() (*clock.Fake, fleetconfig.Config) {
	clk := clock.NewFake(simtest.Start)
	cfg := simtest.FastConfig()
	cfg.Clock = clk
	cfg.Tick = 50 * time.Millisecond
	return clk, cfg
}

// colocatedOnFakeClock is onFakeClock's fleet running two steps of the colocated loop, each with
// an eval batch.
func colocatedOnFakeClock() (*clock.Fake, fleetconfig.Config) {
	clk, cfg := onFakeClock()
	cfg.Workload.Colocated = true
	cfg.Workload.EvalEvery = 1
	cfg.Workload.Batches = 2
	return clk, cfg
}
