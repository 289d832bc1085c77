package collector

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

// gatedServer answers like counterServer, but its answers from the third on wait until the gate
// opens.
type gatedServer struct {
	n, asked atomic.Int64
	gate     chan struct{}
	srv      *httptest.Server
}

func newGatedServer(t *testing.T) *gatedServer {
	g := &gatedServer{gate: make(chan struct{})}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.asked.Add(1) >= 3 {
			select {
			case <-g.gate:
			case <-r.Context().Done():
				return
			}
		}
		n := g.n.Add(1)
		fmt.Fprintf(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} %d\n", 10*n)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// A tick that comes while a step end takes its boundary scrapes is theirs: it neither counts
// the targets still busy with them as skipped, nor scrapes the others again ahead of them, nor
// scrapes everyone again once the step has ended (when the trainer's next call comes). The next
// tick scrapes every target.
func TestTickDuringBoundaryIsItsScrapes(t *testing.T) {
	quick := newCounterServer(t)
	slow := newGatedServer(t)
	obs := &recObserver{}
	c, fc, stop := start(t, Options{Targets: targets(quick.srv.URL, slow.srv.URL), Observer: obs, NoFinalStep: true})
	ctx := context.Background()
	scraped := func(n int) func() bool {
		return func() bool { obs.mu.Lock(); defer obs.mu.Unlock(); return obs.scraped == n }
	}
	testkit.WaitFor(t, 5*time.Second, "the scrapes at start", scraped(2))
	fc.Advance(time.Second)
	testkit.WaitFor(t, 5*time.Second, "the first tick's scrapes", scraped(4))

	ended := make(chan error, 1)
	go func() { _, err := c.EndStep(ctx, 1); ended <- err }()
	testkit.WaitFor(t, 5*time.Second, "the quick target's boundary scrape", scraped(5))
	testkit.WaitFor(t, 5*time.Second, "the slow target's boundary request", func() bool { return slow.asked.Load() == 3 })
	fc.Advance(time.Second) // the tick comes while the slow target's boundary scrape is in flight
	for range 20 {          // calls the collector answers after it has taken the tick
		if _, _, err := c.Live(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := quick.n.Load(); n != 3 {
		t.Fatalf("the quick target was scraped %d times, want 3: the tick did not wait for the boundary", n)
	}
	close(slow.gate)
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Second)
	testkit.WaitFor(t, 5*time.Second, "the next tick's scrapes", scraped(8))
	for range 20 { // time for scrapes the step end might have started
		if _, _, err := c.Live(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if q, s := quick.n.Load(), slow.n.Load(); q != 4 || s != 4 {
		t.Errorf("scraped %d and %d times, want 4 each: at start, the first tick, the boundary, the next tick", q, s)
	}
	obs.mu.Lock()
	skipped := obs.skipped
	obs.mu.Unlock()
	if skipped != 0 {
		t.Errorf("%d skipped ticks, want none", skipped)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
