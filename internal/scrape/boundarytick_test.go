package scrape

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/target"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestBoundaryTakesPendingTick: a target asked for a boundary scrape while a tick waits for it
// too makes one scrape for both. Scraped again for the tick right after, the page was not
// part of what the boundary closed: a run stopped right after its start served a page that its
// open step never counted (a flaky TestStop in package run, 1 run in 100 under -race).
//
// Both requests are made pending while the target's goroutine waits to hand over its previous
// result; its select then takes either first, at random. Taking the tick first is fine (the
// boundary's scrape follows it). Taking the boundary first must leave no tick scrape behind:
// the next result after it must answer the next boundary. 40 rounds leave a 2^-40 chance to
// miss the bug.
func TestBoundaryTakesPendingTick(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Write([]byte(runningPage))
	}))
	defer srv.Close()
	out := make(chan Result) // unbuffered: the goroutine waits, not busy, until the test reads
	p := NewPool(Options{Clock: clock.NewFake(time.Unix(1e9, 0)), Timeout: 5 * time.Second}, out)
	defer p.Close()
	p.Add([]target.Target{{URL: srv.URL}})
	<-p.Started()
	inst := p.targets[srv.URL]
	next := uint64(1)
	for round := range 40 {
		// The goroutine scrapes for boundary next and waits to hand the result over.
		want := served.Load() + 1
		p.Boundary(next)
		testkit.WaitFor(t, 5*time.Second, "the target's goroutine to finish its scrape", func() bool {
			return served.Load() >= want && !inst.busy.Load()
		})
		if skipped := p.Tick(); len(skipped) != 0 {
			t.Fatalf("round %d: the tick was skipped", round)
		}
		p.Boundary(next + 1)
		if r := <-out; r.Boundary != next || r.Err() != nil {
			t.Fatalf("round %d: result for boundary %d, err %v; want boundary %d", round, r.Boundary, r.Err(), next)
		}
		r := <-out
		if r.Boundary == 0 { // the tick was taken first: the boundary's scrape follows
			r = <-out
		}
		if r.Boundary != next+1 {
			t.Fatalf("round %d: result for boundary %d, want %d", round, r.Boundary, next+1)
		}
		// Nothing is pending now but what is asked next: a tick left behind by the boundary
		// that took it would be scraped first.
		p.Boundary(next + 2)
		if r := <-out; r.Boundary != next+2 {
			t.Fatalf("round %d: a scrape for a tick (boundary %d) came after the boundary that took it, before boundary %d", round, r.Boundary, next+2)
		}
		next += 3
	}
}
