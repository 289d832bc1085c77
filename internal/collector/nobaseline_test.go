package collector

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/scrape"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// heldServer answers a counter that grows by 100 per answer; while hold is set, its answers
// wait until gate is closed.
type heldServer struct {
	n    atomic.Int64
	hold atomic.Bool
	gate chan struct{}
	srv  *httptest.Server
}

func newHeldServer(t *testing.T) *heldServer {
	h := &heldServer{gate: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.hold.Load() {
			select {
			case <-h.gate:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprintf(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} %d\n", 100*h.n.Add(1))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// TestBoundaryCutsTargetWithoutBaseline adds a target that never answers while the run runs,
// then ends steps. Its first scrape has the first pages' budget (10 s), and its boundary scrape
// waits behind it; but a target that has not answered once has no baseline for the step to
// close, so a step end waits for it the scrape timeout at most, on the collector's clock, not
// the 10 s and more it waited. A target that answered before is waited for, also after that.
func TestBoundaryCutsTargetWithoutBaseline(t *testing.T) {
	good := newCounterServer(t)
	held := newHeldServer(t)
	silent := testkit.SilentServer(t)
	obs := &recObserver{}
	const timeout = 3 * time.Second // the scrape timeout
	// No ticks: the scrapes are the one at start and those the test asks for.
	c, fc, stop := start(t, Options{Options: scrape.Options{Timeout: timeout}, Interval: time.Hour,
		Targets: targets(good.srv.URL, held.srv.URL), Observer: obs, NoFinalStep: true})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	scraped := func() int { obs.mu.Lock(); defer obs.mu.Unlock(); return obs.scraped }
	testkit.WaitFor(t, 5*time.Second, "the scrapes at start", func() bool { return scraped() == 2 })

	added := make(chan error, 1)
	go func() { added <- c.AddTargets(ctx, targets(silent)) }()
	if err := fc.BlockUntil(ctx, 1); err != nil { // the registration's wait for the first scrape
		t.Fatal(err)
	}
	fc.Advance(2 * time.Second) // FirstScrapeWait's default
	if err := <-added; err != nil {
		t.Fatal(err)
	}

	ended := make(chan error, 1)
	endStep := func(n int64) {
		t.Helper()
		go func() { _, err := c.EndStep(ctx, n); ended <- err }()
		if err := fc.BlockUntil(ctx, 1); err != nil {
			t.Fatalf("step %d: the step end waits on no timer for the target that never answered: %v", n, err)
		}
	}
	pending := func(why string) {
		t.Helper()
		for range 20 { // calls the collector answers after it has taken the time
			if _, _, err := c.Live(ctx); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case err := <-ended:
			t.Fatalf("the step ended (%v) %s", err, why)
		default:
		}
	}
	closed := func(n int64, tokens float64) {
		t.Helper()
		if err := <-ended; err != nil {
			t.Fatal(err)
		}
		steps, err := c.Steps(ctx, n)
		if err != nil || len(steps) != 1 || steps[0].Metrics["vllm/generation_tokens"] != tokens {
			t.Fatalf("step %d: %+v %v, want the increases of the targets that answered, %v", n, steps, err, tokens)
		}
	}

	// The targets that answered before answer their boundary scrapes; the silent one is waited
	// for the scrape timeout.
	endStep(1)
	testkit.WaitFor(t, 5*time.Second, "the boundary scrapes of the targets that answer", func() bool { return scraped() == 4 })
	fc.Advance(timeout - time.Millisecond)
	pending("before the scrape timeout passed")
	fc.Advance(time.Millisecond)
	closed(1, 10+100)

	// A target that answered before and is slow now is waited for after the scrape timeout.
	held.hold.Store(true)
	endStep(2)
	testkit.WaitFor(t, 5*time.Second, "the quick target's boundary scrape", func() bool { return scraped() == 5 })
	fc.Advance(timeout)
	pending("without the boundary scrape of a target that answered before")
	close(held.gate)
	closed(2, 10+100)
}
